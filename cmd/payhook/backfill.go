package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

const backfillHelp = `Usage: payhook backfill --source S [--since 3h] [--until T] [--type T...] [--undelivered]
                        [--dry-run] [--json] [--config FILE] [--db URL]

Lists the provider's events of the window (every page) through its API and
stores each one payhook does not have exactly as the receiver stores a
delivery: the same envelope checks, the same unique index, its job in the
same transaction; serve's workers then process it. Events payhook has
change nothing, so running it again adds nothing. Listed events carry no
signature: they are trusted through the API key, and stored with
received_via backfill (see payhook events show). An item that fails the
envelope checks is reported and skipped.

A backfill cut short (a crash, an API that kept failing) is resumed from
its last page by the next backfill of the source with the same --type and
--undelivered, which then lists its own window whole all the same; a
resume that fails as it did (a 4xx, a malformed page) is given up. Each
run is recorded: payhook reconcile runs.

The source's api_url and api_key come from the config file, read as serve
reads it (--config or PAYHOOK_CONFIG; --db or PAYHOOK_DB). Stripe lists the
events of the last 30 days only; Paddle's list cannot filter by time, so
its every event is read and those outside the window skipped.

--since is a duration back from now (3h, 72h) or an RFC 3339 time, the
form the fixes of payhook reconcile print.

Exit status 0 when the window was listed to its end (refused items
included), 1 when the backfill failed.

Examples:
  payhook backfill --source stripe
  payhook backfill --source stripe --since 72h --type charge.refunded --type charge.dispute.created
  payhook backfill --source stripe --since 720h --undelivered --dry-run
  payhook backfill --source shop --since 24h --until 2026-12-01T06:00:00Z --json
  payhook backfill --source shop --since 2026-12-01T05:00:00Z`

// typeFlags collects --type, repeated or comma-separated.
type typeFlags []string

func (t *typeFlags) String() string { return strings.Join(*t, ",") }

func (t *typeFlags) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*t = append(*t, s)
		}
	}
	return nil
}

// sinceFlag is backfill's --since: a duration back from now (3h), or the
// RFC 3339 time reconcile's fixes print (2026-12-01T06:00:00Z).
type sinceFlag struct {
	d time.Duration
	t time.Time
}

func (s *sinceFlag) String() string {
	if !s.t.IsZero() {
		return s.t.Format(time.RFC3339Nano)
	}
	return s.d.String()
}

func (s *sinceFlag) Set(v string) error {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		s.d, s.t = 0, t
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want a duration such as 3h or an RFC 3339 time such as 2026-12-01T06:00:00Z")
	}
	s.d, s.t = d, time.Time{}
	return nil
}

func (m *Main) backfill(ctx context.Context, args []string) error {
	fs := m.flags("backfill", backfillHelp)
	configPath := fs.String("config", "", "YAML file listing the sources (env PAYHOOK_CONFIG)")
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB; default "+store.DefaultURL+")")
	source := fs.String("source", "", "the source to backfill (required)")
	since := sinceFlag{d: 3 * time.Hour}
	fs.Var(&since, "since", "list the events that occurred since `T`: a duration back from now, or an RFC 3339 time")
	until := fs.String("until", "", "list the events that occurred up to this time (RFC 3339; default now, plus 5 minutes for a provider clock ahead of ours)")
	var types typeFlags
	fs.Var(&types, "type", "only events of this provider type (repeat, or comma-separate)")
	undelivered := fs.Bool("undelivered", false, "only events whose webhook deliveries failed (Stripe: delivery_success=false)")
	dryRun := fs.Bool("dry-run", false, "list and check, count what is missing, store nothing")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *source == "" {
		return fmt.Errorf("%w: backfill: --source is required (see payhook backfill --help)", errUsage)
	}
	if since.t.IsZero() && since.d <= 0 {
		return fmt.Errorf("%w: backfill: --since must be a positive duration, not %v", errUsage, since.d)
	}
	now := m.Now()
	from := now.Add(-since.d)
	if !since.t.IsZero() {
		from = since.t
	}
	var end time.Time // zero: now plus reconcile.OpenEndSkew, as Backfill reads it
	if *until != "" {
		t, err := time.Parse(time.RFC3339Nano, *until)
		if err != nil {
			return fmt.Errorf("%w: backfill: --until %q is not an RFC 3339 time such as 2026-12-01T06:00:00Z", errUsage, *until)
		}
		end = t
		if !end.After(from) {
			return fmt.Errorf("%w: backfill: --until %s is not after --since (%s): the window would be empty", errUsage,
				end.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
		}
	}
	for _, t := range types {
		if err := payhook.CheckRef("--type", t); err != nil {
			return fmt.Errorf("%w: backfill: %v", errUsage, err)
		}
	}
	src, client, err := m.sourceClient(*configPath, *source)
	if err != nil {
		return err
	}
	a, _ := provider.Lookup(src.Provider)
	lister, _ := client.(adapter.EventLister)
	// The inbox's database as serve made it: a mistyped --db is an error,
	// not a new database that takes the events where no serve reads them
	// (nor a migration of a live database by whichever binary runs this).
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	queue, err := jobs.New(db, jobs.Config{Logger: m.logger(), Now: m.Now})
	if err != nil {
		return err
	}
	show, stop := m.backfillProgress(*source)
	sum, err := reconcile.Backfill(ctx, reconcile.BackfillConfig{
		DB: db, Inbox: queue, Source: payhook.Source{Name: src.Name, Provider: src.Provider, Environment: src.Environment},
		Envelope: a.Envelope, Lister: lister, From: from, Until: end,
		Types: types, Undelivered: *undelivered, DryRun: *dryRun,
		Progress: show, Logger: m.logger(), Now: m.Now,
	})
	stop()
	if sum != nil {
		if *asJSON {
			if jerr := m.printJSON(backfillDoc{Summary: sum, OK: err == nil, Error: errText(err)}); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			printSummary(m.Stdout, sum)
		}
	}
	return err
}

// backfillDoc is the --json output.
type backfillDoc struct {
	*reconcile.Summary
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// backfillProgress returns the Progress of a backfill: a progress bar on
// stderr when it is a terminal, else a plain line per page on stderr. The
// returned stop ends the bar.
func (m *Main) backfillProgress(source string) (func(reconcile.Summary), func()) {
	line := func(s reconcile.Summary) string {
		return fmt.Sprintf("page %d: listed %d, new %d, known %d, refused %d", s.Pages, s.Listed, s.New, s.Known, s.Refused)
	}
	f, ok := m.Stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func(s reconcile.Summary) { fmt.Fprintf(m.Stderr, "backfill %s: %s\n", source, line(s)) }, func() {}
	}
	// The number of events is unknown until the last page: a spinner with
	// the counts.
	bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("backfill "+source),
		progressbar.OptionShowCount(), progressbar.OptionSetItsString("events"), progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	return func(s reconcile.Summary) {
			bar.Describe("backfill " + source + ": " + line(s))
			bar.Set(s.Listed)
		}, func() {
			bar.Finish()
			bar.Exit()
		}
}

// printSummary writes sum for people.
func printSummary(w io.Writer, sum *reconcile.Summary) {
	verb := "stored"
	if sum.DryRun {
		verb = "would store (dry run)"
	}
	fmt.Fprintf(w, "backfill of source %s, events of %s to %s: listed %d on %d %s; %s %d new, %d already known, %d refused\n",
		sum.Source, formatTime(sum.From), formatTime(sum.Until), sum.Listed, sum.Pages, plural(sum.Pages, "page"),
		verb, sum.New, sum.Known, sum.Refused)
	for _, r := range sum.Refusals {
		fmt.Fprintf(w, "  refused on page %d: %s: %s\n", r.Page, orDash(r.EventID), r.Reason)
	}
	if sum.Refused > len(sum.Refusals) {
		fmt.Fprintf(w, "  and %d more refused\n", sum.Refused-len(sum.Refusals))
	}
	if len(sum.Runs) > 0 {
		ids := make([]string, len(sum.Runs))
		for i, id := range sum.Runs {
			ids[i] = fmt.Sprint(id)
		}
		fmt.Fprintf(w, "recorded as %s %s (payhook reconcile runs)\n", plural(len(ids), "run"), strings.Join(ids, ", "))
	}
}
