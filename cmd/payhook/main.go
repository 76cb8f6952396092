// Command payhook is the payment-webhook inbox as a server: it receives
// webhooks for the configured sources, stores each event once, processes
// it in the background and lets operators inspect and replay events.
//
// Run "payhook help" for the commands (the table commands in main.go),
// "payhook help COMMAND" or "payhook COMMAND --help" for one's flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agnivade/levenshtein"
)

// gcPercent is the garbage collector's target (GOGC) unless GOGC is set
// in the environment, to any value. Go's default, 100, collects each time
// the heap has grown by as much as is live; payhook's live heap is a few
// MiB and every delivery allocates its request, body and rows, so at
// thousands of deliveries a second it collected many times a second. At
// 400, payhook serve took 7–21% less CPU per event, acknowledged and
// processed, on both engines (docs/benchmarks.md), for a heap up to five
// times the live one instead of twice: tens of MiB.
const gcPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	// SIGHUP too: a closed terminal stops serve as Ctrl-C does, not dead.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// Main is the whole program with its outside world injected, so tests run
// it in-process exactly as a user would.
type Main struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnListen, if set, is called with the address serve listens on.
	OnListen func(addr string)
	// OnAdminListen, if set, is called with the address of --admin-addr.
	OnAdminListen func(addr string)
	// demoSecret, if set, is the demo source's secret (payhook demo).
	demoSecret string
	// holdProcessing, if set, holds serve's processing until it is
	// closed: events are received and stored, none processed (payhook
	// bench --hold).
	holdProcessing <-chan struct{}
}

// errUsage marks a command-line mistake: exit status 2.
var errUsage = errors.New("usage")

// A command is one line of the usage text and what runs it.
type command struct {
	name string
	// args follows the name in the usage text: flags, or for a command of
	// subcommands "list|show ..." (made from subs when empty).
	args    string
	summary string
	// subs names the subcommands of a command that has some; run gets
	// the subcommand as its first argument (or a help flag). Run refuses
	// any other, suggesting the nearest.
	subs []string
	run  func(m *Main, ctx context.Context, args []string) error
}

// commands returns the command table: the usage text is made from it and
// Run dispatches through it. (A function, not a variable: the commands
// refer back to Run.)
func commands() []command {
	return []command{
		{name: "demo", args: "[--db URL] [--size X] [--seed N]", summary: "payhook on SQLite against a storm of deliveries", run: (*Main).demo},
		{name: "serve", args: "[--config FILE] [--db URL] [--addr HOST:PORT]", summary: "receive and process webhooks", run: (*Main).serve},
		{name: "migrate", args: "[--db URL]", summary: "create or update the schema", run: (*Main).migrate},
		{name: "events", subs: []string{"list", "show", "replay"}, summary: "inspect events; replay one, or all that match a filter", run: (*Main).events},
		{name: "send", args: "--secret S [--url URL] [--type T] [--id EVENT_ID]", summary: "send a signed test event", run: (*Main).send},
		{name: "sim", subs: []string{"run", "serve", "check"}, summary: "a local provider that breaks like real ones", run: (*Main).sim},
		{name: "payments", subs: []string{"list", "show", "refund"}, summary: "payments and their ledger postings; refund one", run: (*Main).payments},
		{name: "orders", subs: []string{"list", "show"}, summary: "orders and what paid them", run: (*Main).orders},
		{name: "subscriptions", subs: []string{"list", "show"}, summary: "subscriptions and their status", run: (*Main).subscriptions},
		{name: "ledger", subs: []string{"balances"}, args: "balances [--json]", summary: "balances per currency and account", run: (*Main).ledger},
		{name: "backfill", args: "--source S [--since 3h] [--until T] [--type T...] [--dry-run] [--json]", summary: "store the provider's events that webhooks never brought", run: (*Main).backfill},
		{name: "reconcile", args: "--source S [--since 24h] [--json] | runs [--json]", summary: "compare with the provider's payments and subscriptions", run: (*Main).reconcile},
		{name: "alerts", subs: []string{"list", "ack"}, summary: "conflicts, failed events", run: (*Main).alerts},
		{name: "deliveries", subs: []string{"list", "resend"}, summary: "facts sent to the sinks, and their attempts", run: (*Main).deliveries},
		{name: "bench", args: "[--floor] [--db URL]... [--url URL]", summary: "measure acks/s, latency and drain against a floor", run: (*Main).bench},
		{name: "version", summary: "this build's version, commit and Go version", run: (*Main).version},
		{name: "help", args: "[COMMAND [SUBCOMMAND]]", summary: "this text, or a command's flags and examples"},
	}
}

// usage is the text of payhook help, made from the command table.
func usage() string {
	var b strings.Builder
	b.WriteString("payhook: a payment-webhook inbox that stores every event once and processes it once.\n\nUsage:\n")
	for _, c := range commands() {
		args := c.args
		if args == "" && len(c.subs) > 0 {
			args = strings.Join(c.subs, "|") + " ..."
		}
		fmt.Fprintf(&b, "  %s\n        %s\n", strings.TrimSpace("payhook "+c.name+" "+args), c.summary)
	}
	b.WriteString(`
Environment: PAYHOOK_CONFIG, PAYHOOK_DB, PAYHOOK_ADDR, PAYHOOK_ADMIN_ADDR stand for the flags;
PAYHOOK_ADMIN_TOKEN (32 bytes or more) enables the console (/console) and the read API (/api/v1/) of serve.
PAYHOOK_METRICS_TOKEN (32 bytes or more) is the bearer token /metrics then takes (payhook help serve).
The database defaults to sqlite://payhook.db in the working directory;
--db also takes sqlite:///abs/path.db and postgres://user:pass@host/db.

Run "payhook help COMMAND" or "payhook COMMAND --help" for a command's
flags and examples.
`)
	return b.String()
}

// lookup returns the command named name.
func lookup(name string) (command, bool) {
	cmds := commands()
	i := slices.IndexFunc(cmds, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return cmds[i], true
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// Run runs the command line args and returns the exit status.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Now == nil {
		m.Now = time.Now
	}
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage())
		return 2
	}
	err := m.dispatch(ctx, args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(m.Stderr, "payhook: %v\n", err)
		return 2
	default:
		fmt.Fprintf(m.Stderr, "payhook: %v\n", err)
		return 1
	}
}

// dispatch finds args[0] in the command table, and its subcommand, and
// runs it. Help of any form (-h, --help, help, help COMMAND) goes to
// stdout.
func (m *Main) dispatch(ctx context.Context, args []string) error {
	name, rest := args[0], args[1:]
	if name == "--version" || name == "-version" {
		name = "version"
	}
	if isHelp(name) {
		if len(rest) == 0 || isHelp(rest[0]) {
			fmt.Fprint(m.Stdout, usage())
			return nil
		}
		// help CMD [SUB] is CMD [SUB] --help.
		return m.dispatch(ctx, append(slices.Clone(rest), "--help"))
	}
	c, ok := lookup(name)
	if !ok || c.run == nil {
		return fmt.Errorf("%w: unknown command %q; %s", errUsage, name,
			cmp.Or(didYouMean(name, commandNames()), `run "payhook help" for the list`))
	}
	if len(c.subs) > 0 {
		switch {
		case len(rest) == 0:
			return fmt.Errorf("%w: %s needs a subcommand: %s", errUsage, c.name, orList(c.subs))
		case !isHelp(rest[0]) && !slices.Contains(c.subs, rest[0]):
			return fmt.Errorf("%w: unknown %s subcommand %q; %s", errUsage, c.name, rest[0],
				cmp.Or(didYouMean(rest[0], c.subs), "want "+orList(c.subs)))
		}
	}
	return c.run(m, ctx, rest)
}

func commandNames() []string {
	cmds := commands()
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return names
}

// orList writes names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// didYouMean returns `did you mean "x"?` for the candidates nearest to
// typed (see nearest), each written with prefix, else "".
func didYouMean(typed string, candidates []string, prefix ...string) string {
	best := nearest(typed, candidates)
	if len(best) == 0 {
		return ""
	}
	quoted := make([]string, len(best))
	for i, b := range best {
		quoted[i] = fmt.Sprintf("%q", strings.Join(prefix, "")+b)
	}
	return "did you mean " + orList(quoted) + "?"
}

// nearest returns the candidates nearest to typed: at most two edits
// away (fewer than typed has letters), or that typed starts.
func nearest(typed string, candidates []string) []string {
	best, bestDist := []string(nil), 3
	for _, c := range candidates {
		d := levenshtein.ComputeDistance(strings.ToLower(typed), c)
		if len(typed) >= 2 && strings.HasPrefix(c, strings.ToLower(typed)) {
			d = 1
		}
		if d >= len(typed) { // "x" is one edit from every one-letter name
			continue
		}
		switch {
		case d < bestDist:
			best, bestDist = []string{c}, d
		case d == bestDist:
			best = append(best, c)
		}
	}
	return best
}

// flags returns a FlagSet for a command whose --help prints help (then
// the flags) on stdout; parse turns its errors into usage errors.
func (m *Main) flags(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("payhook "+name, flag.ContinueOnError)
	// The flag package prints its errors and calls Usage for -h and for
	// errors alike; parse decides what is printed, and where.
	fs.SetOutput(&helpOutput{stdout: m.Stdout, help: help})
	fs.Usage = func() {}
	return fs
}

// helpOutput is a FlagSet's output: it discards what the flag package
// writes and keeps the help text and stdout for parse.
type helpOutput struct {
	stdout io.Writer
	help   string
}

func (*helpOutput) Write(p []byte) (int, error) { return len(p), nil }

// parse parses args, turning flag errors into usage errors; -h and
// --help print the command's help and flags on stdout and return
// flag.ErrHelp (exit status 0).
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		if out, ok := fs.Output().(*helpOutput); ok {
			// A command without flags (version) gets no empty Flags: heading.
			hasFlags := false
			fs.VisitAll(func(*flag.Flag) { hasFlags = true })
			if !hasFlags {
				fmt.Fprintf(out.stdout, "%s\n", strings.TrimRight(out.help, "\n"))
				return err
			}
			fmt.Fprintf(out.stdout, "%s\n\nFlags:\n", strings.TrimRight(out.help, "\n"))
			fs.SetOutput(out.stdout)
			fs.PrintDefaults()
			fs.SetOutput(out)
		}
		return err
	}
	hint := ""
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if h := didYouMean(strings.TrimPrefix(name, "-"), names, "--"); h != "" {
			hint = h + "; "
		}
	}
	return fmt.Errorf("%w: %s: %v (%ssee %s --help)", errUsage, fs.Name(), err, hint, fs.Name())
}

// env returns the flag value if set, else the environment variable, else def.
func (m *Main) env(flagValue, name, def string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := m.Getenv(name); v != "" {
		return v
	}
	return def
}

func (m *Main) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// flagGiven reports whether the flag name was set on the command line
// parsed by fs.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}
