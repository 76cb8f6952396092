package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/payhook/payhook/cmd/payhook/checkdb"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/check"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

const simHelp = `Usage: payhook sim run|serve|check [flags]

A local payment provider that delivers webhooks like the real ones, and
breaks like them: at least once, retried for about 41 hours (divided by
--time-scale), with duplicates, parallel bursts, reordering, delays, drops
and outages of the target on purpose. --seed replays the story, its ids
and the faults drawn; the target's answers and their timing are its own,
so which of two racing deliveries wins (and what follows from it: which
invoice a reused chain reference credits, how many attempts an event
took) may differ from one run to the next, the final state checked by
sim check all the same.

  payhook sim run SCENARIO --target URL --secret SECRET [flags]
      plays a business story against URL and writes the expected final
      state as JSON (to --expect FILE, or stdout). Scenarios: %s.
      With --api-addr HOST:PORT [--api-key KEY] the provider's API answers
      there while the run lasts, so the target can fetch the resources its
      events are about (stripe: GET /v1/subscriptions/{id}).
  payhook sim serve [--addr HOST:PORT] [flags]
      runs the provider's API (bearer sk_test_/sk_live_ keys, printed at
      start) with a page at / showing endpoints and the delivery log.
  payhook sim check --expect FILE [--db URL] [--source NAME] [--json]
      compares the database with the expected state a run wrote and
      prints each difference; exit status 1 on any (see sim check --help).

Examples:
  payhook sim run storm --target http://127.0.0.1:8080/webhooks/demo --secret whsec_...
  payhook sim run outage --target http://127.0.0.1:8080/webhooks/stripe --secret whsec_... --flavour stripe --seed 7 --expect expected.json
  payhook sim run storm --target http://127.0.0.1:8080/webhooks/stripe --secret whsec_... --flavour stripe --api-addr 127.0.0.1:8091 --api-key sk_test_local
  payhook sim serve --addr 127.0.0.1:8090 --flavour billete --duplicate 0.3
  payhook sim check --expect expected.json --db sqlite://payhook.db`

func (m *Main) sim(ctx context.Context, args []string) error {
	help := fmt.Sprintf(simHelp, strings.Join(sim.ScenarioNames(), ", "))
	if len(args) == 0 {
		return fmt.Errorf("%w: sim needs a subcommand: run, serve or check", errUsage)
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "run":
		return m.simRun(ctx, rest, help)
	case "serve":
		return m.simServe(ctx, rest, help)
	case "check":
		return m.simCheck(ctx, rest)
	case "-h", "--help", "help":
		fmt.Fprintln(m.Stdout, help)
		return nil
	default:
		return fmt.Errorf("%w: unknown sim subcommand %q (want run, serve or check)", errUsage, sub)
	}
}

// faultFlags are the fault model's flags; only the ones given override
// the scenario's faults.
type faultFlags struct {
	duplicate, burst, drop float64
	burstSize, reorder     int
	delay                  time.Duration
	outage                 string
}

func addFaultFlags(fs *flag.FlagSet) *faultFlags {
	f := &faultFlags{}
	fs.Float64Var(&f.duplicate, "duplicate", 0, "probability that an event is delivered once more after its first success")
	fs.Float64Var(&f.burst, "burst", 0, "probability that an event's first delivery is a parallel burst")
	fs.IntVar(&f.burstSize, "burst-size", deliver.DefaultBurstSize, "copies in a parallel burst (1 or more)")
	fs.IntVar(&f.reorder, "reorder", 0, "shuffle events within windows of this many")
	fs.DurationVar(&f.delay, "delay", 0, "maximum random delay before an event's first attempt (scaled)")
	fs.Float64Var(&f.drop, "drop", 0, "probability that an event is never delivered (only GET /events finds it)")
	fs.StringVar(&f.outage, "outage", "", "target down from FROM to TO after the start (provider time, scaled), e.g. 0s-10m")
	return f
}

// apply returns base with the fault flags that were set on fs.
func (f *faultFlags) apply(fs *flag.FlagSet, base deliver.Faults) (deliver.Faults, error) {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "duplicate":
			base.Duplicate = f.duplicate
		case "burst":
			base.Burst = f.burst
		case "burst-size":
			if f.burstSize < 1 {
				// 0 would be taken for the default, 5, silently.
				err = fmt.Errorf("%w: --burst-size %d: want 1 or more copies in a parallel burst", errUsage, f.burstSize)
				return
			}
			base.BurstSize = f.burstSize
		case "reorder":
			base.ReorderWindow = f.reorder
		case "delay":
			base.Delay = f.delay
		case "drop":
			base.Drop = f.drop
		case "outage":
			base.Outages = nil
			if f.outage != "" {
				from, to, ok := strings.Cut(f.outage, "-")
				a, err1 := time.ParseDuration(from)
				b, err2 := time.ParseDuration(to)
				if !ok || err1 != nil || err2 != nil || b <= a {
					err = fmt.Errorf("%w: --outage %q: want FROM-TO durations, e.g. 0s-10m", errUsage, f.outage)
					return
				}
				base.Outages = []deliver.Outage{{From: a, To: b}}
			}
		}
	})
	for _, p := range []float64{base.Duplicate, base.Burst, base.Drop} {
		if p < 0 || p > 1 {
			return base, fmt.Errorf("%w: probabilities are between 0 and 1, got %v", errUsage, p)
		}
	}
	return base, err
}

func (m *Main) simRun(ctx context.Context, args []string, help string) error {
	fs := m.flags("sim run", help)
	target := fs.String("target", "", "the webhook URL to deliver to (required)")
	secret := fs.String("secret", "", "the signing secret the target has configured (default: a new one, printed)")
	flav := fs.String("flavour", "billete", "provider to play: "+strings.Join(flavour.Names(), ", "))
	seed := fs.Int64("seed", 1, "seed of the story and the faults")
	expectPath := fs.String("expect", "", "write the expected final state here (default stdout)")
	scale := fs.Float64("time-scale", 1000, "divide every delay of the retry schedule and of the faults by this (positive; 1 is real time)")
	size := fs.Float64("size", 1, "multiply the story's counts by this (positive)")
	environment := fs.String("environment", sim.EnvTest, "environment of the events: test or live")
	apiAddr := fs.String("api-addr", "", "serve the provider's API on HOST:PORT while the run lasts, so the target can fetch "+
		"resources (with --flavour stripe: GET /v1/subscriptions/{id})")
	apiKey := fs.String("api-key", "", "with --api-addr: the API key of --environment the API accepts (default: a new one, printed)")
	apiLinger := fs.Duration("api-linger", 2*time.Second, "with --api-addr: after the deliveries end, keep the API up "+
		"until it has gone this long without a request (the target may still be processing)")
	apiRate := fs.Float64("api-rate", 0, "with --api-addr: answer this many API requests a second, and 429 with a Retry-After "+
		"beyond, as a provider's rate limit (0: no limit)")
	faults := addFaultFlags(fs)
	name, err := oneArg(fs, args, "SCENARIO")
	if err != nil {
		return err
	}
	sc, ok := sim.Scenarios[name]
	if !ok {
		return fmt.Errorf("%w: unknown scenario %q (have %s)", errUsage, name, strings.Join(sim.ScenarioNames(), ", "))
	}
	if *target == "" {
		return fmt.Errorf("%w: sim run needs --target URL", errUsage)
	}
	f, err := flavour.ByName(*flav)
	if err != nil {
		return fmt.Errorf("%w: --flavour: %v", errUsage, err)
	}
	fl, err := faults.apply(fs, sc.Faults)
	if err != nil {
		return err
	}
	// Both divide or multiply: 0 or less is no speed and no story (the
	// library would take it for its default, 1000 or 1, silently).
	if err := positive("time-scale", *scale, "1 is real time, the default 1000 runs 41 hours of retries in 2.5 minutes"); err != nil {
		return err
	}
	if err := positive("size", *size, "1 is the scenario's story, 0.1 a tenth of it"); err != nil {
		return err
	}
	if err := rateFlag(*apiRate); err != nil {
		return err
	}
	if *apiAddr == "" {
		var err error
		fs.Visit(func(fl *flag.Flag) {
			if fl.Name == "api-key" || fl.Name == "api-linger" || fl.Name == "api-rate" {
				err = fmt.Errorf("%w: --%s goes with --api-addr", errUsage, fl.Name)
			}
		})
		if err != nil {
			return err
		}
	}
	summary := m.Stdout
	if *expectPath == "" {
		summary = m.Stderr
	}
	rc := sim.RunConfig{Target: *target, Secret: *secret, Flavour: f, Seed: *seed, TimeScale: *scale,
		Size: *size, Faults: &fl, Environment: *environment, Logger: m.logger(), APIKey: *apiKey, APIRate: *apiRate}
	if *apiAddr != "" {
		api, err := startRunAPI(*apiAddr)
		if err != nil {
			return err
		}
		defer func() {
			api.stop(ctx, *apiLinger)
			if *apiRate > 0 {
				fmt.Fprintf(summary, "provider API: %d requests, %d refused for --api-rate (429)\n", api.requests.Load(), api.refused.Load())
			}
		}()
		rc.Started = func(p *sim.Provider) {
			api.serve(p)
			fmt.Fprintf(summary, "provider API (%s) on %s\n", f.Name(), api.url)
			if *apiKey == "" {
				test, live := p.Keys()
				if *environment == sim.EnvLive {
					test = live
				}
				fmt.Fprintf(summary, "API key (configure it on the target): %s\n", test)
			}
		}
	}
	res, _, err := sim.Run(ctx, name, rc)
	if err != nil {
		return err
	}
	if *secret == "" {
		fmt.Fprintf(summary, "signing secret (configure it on the target): %s\n", res.Secret)
	}
	fmt.Fprint(summary, res.Summary())
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if *expectPath == "" {
		if _, err := fmt.Fprintf(m.Stdout, "%s\n", out); err != nil {
			return err
		}
		return noneAcked(res, *target)
	}
	if err := os.WriteFile(*expectPath, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("write expected state: %w", err)
	}
	fmt.Fprintf(summary, "expected final state written to %s\n", *expectPath)
	return noneAcked(res, *target)
}

// positive is the usage error of a --name that is not a positive finite
// number (hint says what it means), else nil.
func positive(name string, v float64, hint string) error {
	if !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: --%s %v: want a positive number (%s)", errUsage, name, v, hint)
	}
	return nil
}

// rateFlag checks --api-rate: requests a second, 0 for no limit.
func rateFlag(v float64) error {
	if !(v >= 0) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: --api-rate %v: want requests a second, 0 for no limit", errUsage, v)
	}
	return nil
}

// noneAcked is the error of a run whose every delivery failed: the
// target down, or refusing them all (a wrong --secret or --flavour).
func noneAcked(res *sim.Result, target string) error {
	if res.Stats.Acked > 0 || res.Stats.Attempts == 0 {
		return nil
	}
	return fmt.Errorf("sim run: none of the %d delivery attempts to %s was answered 2xx: is the target up, and does its source verify %s deliveries with --secret?",
		res.Stats.Attempts, target, res.Flavour)
}

// runAPI serves the provider's API while a sim run lasts.
type runAPI struct {
	url     string
	ln      net.Listener
	srv     *http.Server
	handler atomic.Pointer[http.Handler]
	last    atomic.Int64 // unix nanoseconds of the last request
	serving bool
	// requests, and those refused for --api-rate (429)
	requests, refused atomic.Int64
}

// refusals records a 429 the API answers.
type refusals struct {
	http.ResponseWriter
	refused *atomic.Int64
}

func (w refusals) WriteHeader(status int) {
	if status == http.StatusTooManyRequests {
		w.refused.Add(1)
	}
	w.ResponseWriter.WriteHeader(status)
}

// startRunAPI listens on addr; serve starts answering.
func startRunAPI(addr string) (*runAPI, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--api-addr: %w", err)
	}
	a := &runAPI{url: "http://" + ln.Addr().String(), ln: ln}
	a.srv = &http.Server{ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.last.Store(time.Now().UnixNano())
			a.requests.Add(1)
			(*a.handler.Load()).ServeHTTP(refusals{w, &a.refused}, r)
		})}
	return a, nil
}

// serve answers with p's API from now on.
func (a *runAPI) serve(p *sim.Provider) {
	h := p.Handler()
	a.handler.Store(&h)
	a.serving = true
	go a.srv.Serve(a.ln) // returns ErrServerClosed once stopped
}

// stop waits until the API has gone linger without a request (or ctx is
// done), then shuts it down.
func (a *runAPI) stop(ctx context.Context, linger time.Duration) {
	if !a.serving { // the run failed before it started
		a.ln.Close()
		return
	}
	a.last.Store(time.Now().UnixNano())
	for {
		idle := time.Since(time.Unix(0, a.last.Load()))
		if idle >= linger {
			break
		}
		select {
		case <-ctx.Done():
			linger = 0
		case <-time.After(linger - idle):
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	a.srv.Shutdown(sctx)
}

func (m *Main) simServe(ctx context.Context, args []string, help string) error {
	fs := m.flags("sim serve", help)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address of the provider API")
	flav := fs.String("flavour", "billete", "provider to play: "+strings.Join(flavour.Names(), ", "))
	seed := fs.Int64("seed", 0, "seed of ids and faults (default: one at random, printed, so that a restart never hands out an earlier run's ids)")
	scale := fs.Float64("time-scale", 1, "divide every delay of the retry schedule and of the faults by this (positive; 1 is real time)")
	apiRate := fs.Float64("api-rate", 0, "answer this many API requests a second in each environment, and 429 with a Retry-After "+
		"beyond, as a provider's rate limit (0: no limit)")
	faults := addFaultFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	// As sim run's: 0 or less would be taken for 1, silently.
	if err := positive("time-scale", *scale, "1, the default, is real time; 60 runs an hour of retries in a minute"); err != nil {
		return err
	}
	if err := rateFlag(*apiRate); err != nil {
		return err
	}
	if !flagGiven(fs, "seed") {
		// A provider never hands out an id twice: a seed per start, so
		// that a receiver's database kept from an earlier run does not
		// take this run's events for duplicates.
		*seed = rand.Int64N(1<<53) + 1
	}
	f, err := flavour.ByName(*flav)
	if err != nil {
		return fmt.Errorf("%w: --flavour: %v", errUsage, err)
	}
	fl, err := faults.apply(fs, deliver.Faults{})
	if err != nil {
		return err
	}
	log := m.logger()
	d := deliver.New(deliver.Config{TimeScale: *scale, Faults: fl, Seed: *seed, Logger: log})
	defer d.Close()
	// The API keys stay those of seed 1 whatever the seed, as a
	// provider's keys outlive its restarts: a receiver configured with
	// them goes on working.
	keys, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: 1})
	if err != nil {
		return err
	}
	test, live := keys.Keys()
	p, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: *seed, TestKey: test, LiveKey: live, APIRate: *apiRate})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", p.Page())
	mux.Handle("/", p.Handler())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(m.Stdout, "payhook sim (%s) on %s — delivery log at %s/\n  test key: %s\n  live key: %s\n  seed: %d (--seed %d hands out these ids again)\n\n"+
		"Create an endpoint (its secret is shown once: give it to the payhook source of that URL, provider %s):\n"+
		"  curl -s %s/webhook_endpoints -H 'Authorization: Bearer %s' -d '{\"url\":\"http://127.0.0.1:8080/webhooks/sim\",\"events\":[\"*\"]}'\n",
		f.Name(), base, base, test, live, *seed, *seed, f.Provider(), base, test)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("sim serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

const simCheckHelp = `Usage: payhook sim check --expect FILE [--db URL] [--source NAME] [--json]

Compares the database with the state the provider of a run ended with
(the file "payhook sim run --expect FILE" wrote) and prints each
difference, one a line: an event the provider delivered that is not
stored or not handled, an event stored that the provider did not create,
a payment, crypto invoice, order or subscription that is missing or
differs, a chain reference credited other than once, a balance, a ledger
that does not sum to zero. Each line reads
  KIND ID: what the database has; want what the provider says
With --json it prints one document instead:
  {"source", "scenario", "equal", "differences": [{"kind", "id", "got", "want"}]}

Exit status: 0 when the database agrees, 1 on any difference (or error),
2 on a usage error. Run it once payhook has processed the run's events.

--source is the source the run delivered to; by default NAME from the
run's target URL .../webhooks/NAME. --db URL (env PAYHOOK_DB) as for serve.

Examples:
  payhook sim run storm --target http://127.0.0.1:8080/webhooks/demo --secret whsec_... --expect expected.json
  payhook sim check --expect expected.json
  payhook sim check --expect expected.json --db postgres://payhook:payhook@127.0.0.1:5432/payhook --json`

// simCheck compares the database with a run's expected state.
func (m *Main) simCheck(ctx context.Context, args []string) error {
	fs := m.flags("sim check", simCheckHelp)
	expectPath := fs.String("expect", "", "the expected state written by sim run --expect (required)")
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "the source the run delivered to (default: from the run's target URL)")
	asJSON := fs.Bool("json", false, "print the differences as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: sim check takes no arguments, got %q", errUsage, fs.Args())
	}
	if *expectPath == "" {
		return fmt.Errorf("%w: sim check needs --expect FILE (written by sim run --expect)", errUsage)
	}
	raw, err := os.ReadFile(*expectPath)
	if err != nil {
		return fmt.Errorf("read expected state: %w", err)
	}
	var res sim.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%s is not an expected state written by sim run --expect: %w", *expectPath, err)
	}
	if res.Scenario == "" || res.Expected.Events == nil {
		return fmt.Errorf("%s is not an expected state written by sim run --expect: no scenario or events", *expectPath)
	}
	if *source == "" {
		if *source = sourceOfTarget(res.Target); *source == "" {
			return fmt.Errorf("%w: %s has no target URL .../webhooks/NAME to take the source from: give --source NAME",
				errUsage, *expectPath)
		}
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	diffs, err := check.Compare(ctx, checkdb.Receiver{DB: db, Source: *source}, res.Expected)
	if err != nil {
		return fmt.Errorf("sim check: %w", err)
	}
	if *asJSON {
		out, err := json.MarshalIndent(struct {
			Source      string             `json:"source"`
			Scenario    string             `json:"scenario"`
			Equal       bool               `json:"equal"`
			Differences []check.Difference `json:"differences"`
		}{*source, res.Scenario, len(diffs) == 0, append([]check.Difference{}, diffs...)}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "%s\n", out)
	} else {
		for _, d := range diffs {
			fmt.Fprintln(m.Stdout, d)
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("sim check: %d differences between source %s in %s and the provider's state", len(diffs), *source, db.URL)
	}
	if !*asJSON {
		exp := res.Expected
		fmt.Fprintf(m.Stdout, "no difference: source %s in %s holds the provider's state (%d events, %d payments, %d orders, %d subscriptions)\n",
			*source, db.URL, len(exp.Events), len(exp.Payments)+len(exp.Invoices), len(exp.Orders), len(exp.Subscriptions))
	}
	return nil
}

// sourceOfTarget returns NAME of a target URL .../webhooks/NAME (the
// receiver's route), or "".
func sourceOfTarget(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return ""
	}
	rest, ok := strings.CutPrefix(u.Path, "/webhooks/")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return ""
	}
	return rest
}
