package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/payhook/payhook/bench"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/store"
)

const benchHelp = `Usage: payhook bench [--floor] [--db URL]... [--url [NAME=]URL --secret S] [--provider P]
                     [--event KIND] [--events N] [--duplicates N] [--concurrency C,...] [--rate R,...]
                     [--hold] [--json] [--svg FILE]

Sends validly signed webhook deliveries and measures what a provider sees:
acknowledgements per second, latency percentiles (p50, p90, p99, p99.9),
errors by status, and the drain: the time from the first delivery until
every acknowledged event is processed, read from the database.

Targets, measured one after the other for each load, all in one run:
  --floor    a bare net/http server answering 204 to the same requests;
             every other figure is then also printed as a ratio of it
  --db URL   a payhook serve started in this process on that database
             (sqlite://FILE or postgres://...), with one source for --provider;
             one of its own: a database holding another source's events
             or another application's tables is refused, unchanged
  --url URL  a payhook already running: the webhook URL of a source of
             --provider holding --secret (drain only with --url-db, one for
             all or one per --url); or any
             other receiver of --provider's webhooks verifying with --secret,
             such as stripe-sync-engine (bench/peer). NAME=URL names the
             target in the results (default "url"); URL,URL,... is one
             target of several instances, each delivery sent to the next

Loads: each --concurrency value is a closed loop of that many senders;
each --rate value is an open loop of that many deliveries per second,
whose latencies count from when each delivery was due. With --rate and
no --concurrency, only the rate loads run. Every load sends
--events new events and --duplicates repeats of them, of the --event kind:
checkout.completed (Stripe checkout.session.completed), the default, or
payment.succeeded (Stripe payment_intent.succeeded).

With --hold, each --db target processes nothing until every delivery of
the load is answered; then its processing starts, and the time until no
event waits gives its processing alone, in events per second and as a
multiple of the same load's acks/s: how fast it works off a backlog with
no delivery to acknowledge. --hold takes one load.

Examples:
  payhook bench --floor --db sqlite://bench.db --concurrency 16,64
  payhook bench --floor --db sqlite://bench.db --db postgres://payhook:payhook@127.0.0.1:5432/payhook --svg bench.svg
  payhook bench --url http://127.0.0.1:8080/webhooks/demo --secret whsec_... --provider billete --rate 1000
  payhook bench --floor --db sqlite://bench.db --json > bench.json`

// benchSource names the source of an in-process target.
const benchSource = "bench"

// benchReport is the JSON output of payhook bench.
type benchReport struct {
	Date    time.Time       `json:"date"`
	Machine benchMachine    `json:"machine"`
	Args    []string        `json:"args"`
	Results []*bench.Result `json:"results"`
}

// benchMachine describes where the figures were measured.
type benchMachine struct {
	CPUs      int               `json:"cpus"`
	CPU       string            `json:"cpu,omitempty"`
	Go        string            `json:"go"`
	Databases map[string]string `json:"databases,omitempty"` // target → server version
}

// benchTarget is a target and the secret its source verifies with.
type benchTarget struct {
	bench.Target
	secret string
}

func (m *Main) bench(ctx context.Context, args []string) error {
	fs := m.flags("bench", benchHelp)
	floor := fs.Bool("floor", false, "also measure a bare net/http server answering 204, and print ratios of it")
	var dbs, urls listFlag
	fs.Var(&dbs, "db", "start payhook in-process on this database and measure it (repeatable)")
	fs.Var(&urls, "url", "measure the running payhook source at this webhook URL (repeatable)")
	var urlDBs listFlag
	fs.Var(&urlDBs, "url-db", "the database of the --url targets (payhook's), to measure their drain; repeated: one per --url, in order")
	secret := fs.String("secret", "", "the signing secret of the --url source")
	provider := fs.String("provider", "stripe", "whose deliveries to send: "+strings.Join(bench.Providers(), ", "))
	kind := fs.String("event", bench.Kinds()[0], "the event sent: "+strings.Join(bench.Kinds(), ", "))
	events := fs.Int("events", 20000, "distinct events per load")
	dups := fs.Int("duplicates", 2000, "deliveries repeating an event already sent, per load")
	conc := fs.String("concurrency", "16,64", "closed-loop senders, comma-separated: one load each")
	rate := fs.String("rate", "", "open-loop deliveries per second, comma-separated: one load each")
	jsonOut := fs.Bool("json", false, "print the results as JSON instead of tables")
	svg := fs.String("svg", "", "write a chart of throughput and p99 over time to this SVG file")
	stall := fs.Duration("stall", time.Minute, "give up waiting for the drain when no event was processed for this long")
	workers := fs.Int("workers", 0, "processing workers of the in-process payhook (default: serve's)")
	hold := fs.Bool("hold", false, "hold the in-process payhook's processing until the load is answered, then measure processing alone")
	unsafeDurability := fs.Bool("unsafe-durability", false,
		"start the in-process payhook even on a database that could lose acknowledged events (see payhook serve --help)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (generator and in-process payhook) to this file")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	concs, err := parseList(*conc, "--concurrency")
	if err != nil {
		return err
	}
	if *rate != "" && !flagGiven(fs, "concurrency") {
		concs = nil // --rate alone runs only its rate loads
	}
	rates, err := parseList(*rate, "--rate")
	if err != nil {
		return err
	}
	switch {
	case !*floor && len(dbs) == 0 && len(urls) == 0:
		return fmt.Errorf("%w: bench needs a target: --floor, --db or --url", errUsage)
	case len(urls) > 0 && *secret == "":
		return fmt.Errorf("%w: --url needs the source's --secret", errUsage)
	case len(urlDBs) > 0 && len(urls) == 0:
		return fmt.Errorf("%w: --url-db goes with a --url", errUsage)
	case len(urlDBs) > 1 && len(urlDBs) != len(urls):
		return fmt.Errorf("%w: %d --url-db for %d --url: give one for all, or one per --url", errUsage, len(urlDBs), len(urls))
	case *events <= 0 || *dups < 0:
		return fmt.Errorf("%w: --events must be positive and --duplicates 0 or more", errUsage)
	case *stall <= 0:
		return fmt.Errorf("%w: --stall must be positive", errUsage)
	case *workers < 0:
		return fmt.Errorf("%w: --workers must be 0 (serve's default) or more", errUsage)
	case *hold && len(dbs) == 0:
		return fmt.Errorf("%w: --hold holds the processing of an in-process payhook: give a --db", errUsage)
	case *hold && len(concs)+len(rates) != 1:
		return fmt.Errorf("%w: --hold measures one load: give one --concurrency or one --rate", errUsage)
	case len(concs)+len(rates) == 0:
		return fmt.Errorf("%w: give a --concurrency or a --rate", errUsage)
	}
	if !isProvider(*provider) {
		return fmt.Errorf("%w: --provider %q: want one of %s", errUsage, *provider, strings.Join(bench.Providers(), ", "))
	}
	if !slices.Contains(bench.Kinds(), *kind) {
		return fmt.Errorf("%w: --event %q: want one of %s", errUsage, *kind, strings.Join(bench.Kinds(), ", "))
	}
	for _, u := range urls {
		if _, _, err := urlTarget(u); err != nil {
			return err
		}
	}

	rep := benchReport{Date: m.Now().UTC(), Args: args, Machine: benchMachine{CPUs: runtime.NumCPU(), CPU: cpuModel(),
		Go: runtime.Version(), Databases: map[string]string{}}}
	targets, closeAll, err := m.benchTargets(ctx, *floor, dbs, urls, urlDBs, *provider, *secret, *workers, *hold, *unsafeDurability, &rep.Machine)
	defer closeAll()
	if err != nil {
		return err
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var loads []bench.Phase
	for _, c := range concs {
		loads = append(loads, bench.Phase{Concurrency: int(c)})
	}
	for _, r := range rates {
		loads = append(loads, bench.Phase{Rate: r})
	}
	for _, load := range loads {
		var floorRes *bench.Result
		for _, t := range targets {
			p := load
			p.Provider, p.Kind, p.Events, p.Duplicates = *provider, *kind, *events, *dups
			p.Secret, p.Stall = t.secret, *stall
			bar := m.progress(p.Events+p.Duplicates, t.Name+" "+phaseName(p))
			if bar != nil {
				p.Progress = func(n int) { bar.Set(n) }
			}
			res, err := bench.Run(ctx, t.Target, p)
			if bar != nil {
				bar.Finish()
				bar.Exit()
			}
			if err != nil {
				return err
			}
			res.LoadAvg = loadAvg()
			if t.Name == "floor" {
				floorRes = res
			} else if floorRes != nil {
				res.Compare(floorRes)
			}
			rep.Results = append(rep.Results, res)
		}
	}

	if *svg != "" {
		var b bytes.Buffer
		title := fmt.Sprintf("payhook bench, %s, %d CPUs, %s", *provider, rep.Machine.CPUs, rep.Date.Format("2006-01-02 15:04 MST"))
		if err := bench.WriteSVG(&b, title, rep.Results); err != nil {
			return err
		}
		if err := os.WriteFile(*svg, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		return refusedAll(rep.Results, *provider)
	}
	fmt.Fprintf(m.Stdout, "payhook bench, %s, %d CPUs (%s), %s\n", rep.Date.Format(time.RFC3339), rep.Machine.CPUs, rep.Machine.CPU, rep.Machine.Go)
	for name, v := range rep.Machine.Databases {
		fmt.Fprintf(m.Stdout, "%s: %s\n", name, v)
	}
	if err := bench.WriteText(m.Stdout, rep.Results); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "\nload average (1, 5, 15 min) after each measurement:")
	for _, r := range rep.Results {
		fmt.Fprintf(m.Stdout, "  %s %s: %s\n", r.Target, r.Load(), r.LoadAvg)
	}
	return refusedAll(rep.Results, *provider)
}

// refusedAll is the error of a bench where a target answered none of a
// load's deliveries 2xx: its figures measure refusals (a wrong --secret
// or --provider), not acknowledgements.
func refusedAll(results []*bench.Result, provider string) error {
	for _, r := range results {
		if r.Acked == 0 && r.Sent > 0 {
			return fmt.Errorf("bench: %s answered none of its %d deliveries 2xx at %s (%s): does it verify %s deliveries with --secret?",
				r.Target, r.Sent, r.Load(), bench.ErrorsText(r.Errors), provider)
		}
	}
	return nil
}

// benchTargets starts the targets: the floor, payhook on each database,
// and the running ones given by URL. closeAll stops what it started, also
// after an error.
func (m *Main) benchTargets(ctx context.Context, floor bool, dbs, urls, urlDBs []string, providerName, urlSecret string,
	workers int, hold, unsafeDurability bool, mach *benchMachine) (targets []benchTarget, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	secret, err := bench.NewSecret(providerName)
	if err != nil {
		return nil, closeAll, err
	}
	if floor {
		f, err := bench.StartFloor()
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, func() { f.Close() })
		targets = append(targets, benchTarget{bench.Target{Name: "floor", URL: f.URL}, secret})
	}
	if len(dbs) > 0 {
		dir, err := os.MkdirTemp("", "payhook-bench-")
		if err != nil {
			return nil, closeAll, fmt.Errorf("bench: %w", err)
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
		config := filepath.Join(dir, "payhook.yaml")
		env := ""
		if provider.ReportsEnvironment(providerName) {
			env = "    environment: test\n"
		}
		yaml := fmt.Sprintf("sources:\n  - name: %s\n    provider: %s\n%s    secrets: [%q]\n", benchSource, providerName, env, secret)
		if workers > 0 {
			yaml += fmt.Sprintf("processing:\n  workers: %d\n", workers)
		}
		if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
			return nil, closeAll, fmt.Errorf("bench: %w", err)
		}
		args := []string{"--config", config}
		if unsafeDurability {
			args = append(args, "--unsafe-durability")
		}
		// Every --db is checked before the first serve starts (and
		// migrates its database): that serve, with the bench's source
		// only, would work an inbox's queue, or add payhook's tables to
		// another application's database.
		for _, dbURL := range dbs {
			if other, err := otherEvents(ctx, dbURL, benchSource); err != nil {
				return nil, closeAll, fmt.Errorf("bench: %w", err)
			} else if other != "" {
				return nil, closeAll, fmt.Errorf("%w: --db %s holds events of source %q (an inbox's database?): the bench would add its own; give it a database of its own",
					errUsage, store.Redact(dbURL), other)
			}
			if foreign, err := foreignTables(ctx, dbURL); err != nil {
				return nil, closeAll, fmt.Errorf("bench: %w", err)
			} else if len(foreign) > 0 {
				return nil, closeAll, fmt.Errorf("%w: --db %s holds tables that are not payhook's (%s): another application's database? "+
					"the bench would add payhook's tables and its events to it; give it a database of its own",
					errUsage, store.Redact(dbURL), listSome(foreign))
			}
		}
		for _, dbURL := range dbs {
			logs := &headBuffer{max: 64 << 10}
			sub := &Main{Stdout: io.Discard, Stderr: logs, Getenv: m.subEnv, Now: m.Now}
			var release func()
			if hold {
				held := make(chan struct{})
				sub.holdProcessing, release = held, sync.OnceFunc(func() { close(held) })
			}
			srv, err := startInProcess(ctx, sub, append(args, "--db", dbURL)...)
			if err != nil {
				return nil, closeAll, fmt.Errorf("bench: start payhook on %s: %w\n%s", store.Redact(dbURL), err, logs.String())
			}
			closers = append(closers, func() { srv.stop() })
			db, err := store.Open(ctx, dbURL)
			if err != nil {
				return nil, closeAll, err
			}
			closers = append(closers, func() { db.Close() })
			name := string(db.Engine)
			for i := 2; slices.ContainsFunc(targets, func(t benchTarget) bool { return t.Name == name }); i++ {
				name = fmt.Sprintf("%s-%d", db.Engine, i)
			}
			mach.Databases[name] = serverVersion(ctx, db)
			targets = append(targets, benchTarget{bench.Target{Name: name, URL: srv.url + "/webhooks/" + benchSource,
				DB: db.SQL, Source: benchSource, Metrics: srv.url + "/metrics", Release: release}, secret})
		}
	}
	for i, u := range urls {
		name, us, _ := urlTarget(u)
		t := bench.Target{Name: name, URLs: us}
		if name == "" {
			t.Name = "url"
			if len(urls) > 1 {
				t.Name = fmt.Sprintf("url-%d", i+1)
			}
		}
		if len(urlDBs) > 0 {
			urlDB := urlDBs[0]
			if len(urlDBs) > 1 {
				urlDB = urlDBs[i]
			}
			db, err := store.Open(ctx, urlDB)
			if err != nil {
				return nil, closeAll, err
			}
			closers = append(closers, func() { db.Close() })
			u := us[0]
			t.DB, t.Source = db.SQL, u[strings.LastIndex(u, "/")+1:]
		}
		targets = append(targets, benchTarget{t, urlSecret})
	}
	return targets, closeAll, nil
}

// progress returns a progress bar for total deliveries when stderr is a
// terminal, else nil.
func (m *Main) progress(total int, what string) *progressbar.ProgressBar {
	f, ok := m.Stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("deliveries"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

// urlTarget splits a --url value, [NAME=]URL[,URL...], into its name
// ("" when none is given) and its URLs, each http or https: the
// instances of one target, all of the same source.
func urlTarget(v string) (name string, urls []string, err error) {
	rest := v
	if n, r, ok := strings.Cut(v, "="); ok && !strings.Contains(n, "/") {
		name, rest = n, r
	}
	for u := range strings.SplitSeq(rest, ",") {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return "", nil, fmt.Errorf("%w: --url %q: want [NAME=]URL[,URL...], each http://... or https://...", errUsage, v)
		}
		if len(urls) > 0 && u[strings.LastIndex(u, "/"):] != urls[0][strings.LastIndex(urls[0], "/"):] {
			return "", nil, fmt.Errorf("%w: --url %q: the instances of one target must serve the same source", errUsage, v)
		}
		urls = append(urls, u)
	}
	if name == "floor" || name == "sqlite" || name == "postgres" {
		return "", nil, fmt.Errorf("%w: --url %q: the name %s is a built-in target's", errUsage, v, name)
	}
	return name, urls, nil
}

func phaseName(p bench.Phase) string {
	if p.Concurrency > 0 {
		return fmt.Sprintf("c=%d", p.Concurrency)
	}
	return fmt.Sprintf("rate=%g/s", p.Rate)
}

func isProvider(name string) bool { return slices.Contains(bench.Providers(), name) }

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// parseList parses comma-separated positive numbers.
func parseList(s, name string) ([]float64, error) {
	var out []float64
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		v, err := strconv.ParseFloat(part, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%w: %s %q: want positive numbers, comma-separated", errUsage, name, part)
		}
		out = append(out, v)
	}
	return out, nil
}

// cpuModel returns the CPU's model name from /proc/cpuinfo, "" if unknown.
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAvg returns the 1, 5 and 15 minute load averages, "" if unknown.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// serverVersion names the database server and the settings an ack's
// durability depends on.
func serverVersion(ctx context.Context, db *store.DB) string {
	var q string
	switch db.Engine {
	case store.Postgres:
		q = `SELECT 'PostgreSQL ' || current_setting('server_version') || ', fsync=' || current_setting('fsync') ||
			', synchronous_commit=' || current_setting('synchronous_commit') || ', full_page_writes=' || current_setting('full_page_writes')`
	default:
		q = `SELECT 'SQLite ' || sqlite_version()`
	}
	var v string
	if err := db.SQL.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return "unknown: " + err.Error()
	}
	return v
}

// headBuffer keeps the first max bytes written to it and drops the rest:
// the log of a payhook started in the bench's process, read only when it
// fails to start. Kept whole, it grew by a line per fact (the default log
// sink) to tens of MB over a run, and each time the buffer doubled the
// process stalled for 100-300 ms: the one slow second of a rate load.
type headBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - h.buf.Len(); room > 0 {
		h.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String returns what was kept.
func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}
