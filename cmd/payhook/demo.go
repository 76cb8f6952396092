package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/cmd/payhook/checkdb"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

const demoHelp = `Usage: payhook demo [--db URL] [--size X] [--seed N] [--unsafe-durability]

Runs payhook with no configuration (its demo source) on SQLite, its own
file payhook-demo.db made afresh, plays the simulator's storm scenario
against it — duplicates, parallel bursts, reordering, delays and an
outage of the target — sends a few forged deliveries, waits until every
event is processed, and prints what was sent, acknowledged, stored once,
deduplicated and rejected. Like serve, it refuses a database that could
lose acknowledged events (a test cluster with fsync off) unless
--unsafe-durability. --db (PostgreSQL too) must name a database of the
demo's own: one that holds events, or tables that are neither payhook's
nor its job queue's (another application's), is refused and left
unchanged.

Examples:
  payhook demo
  payhook demo --db postgres://payhook:payhook@127.0.0.1:5432/payhook --seed 7`

// demoDB is the demo's own database, started afresh on every run.
const demoDB = "sqlite://payhook-demo.db"

func (m *Main) demo(ctx context.Context, args []string) error {
	fs := m.flags("demo", demoHelp)
	dbURL := fs.String("db", demoDB, "database URL; the default demo file is removed first, another must hold no events and no tables but payhook's")
	size := fs.Float64("size", 1, "multiply the story's counts by this (positive)")
	seed := fs.Int64("seed", 1, "seed of the story and the faults")
	unsafeDurability := fs.Bool("unsafe-durability", false,
		"run even on a database that could lose acknowledged events, such as a test cluster with fsync off (see payhook serve --help)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	// As sim run refuses it: the library would take 0 or less for 1 and
	// run the whole story, silently.
	if err := positive("size", *size, "1 is the story, 0.1 a tenth of it"); err != nil {
		return err
	}
	serveArgs := []string{"--db", *dbURL}
	if *unsafeDurability {
		serveArgs = append(serveArgs, "--unsafe-durability")
	}
	// Shown with its password hidden, quoted for a shell.
	shown := "'" + strings.ReplaceAll(store.Redact(*dbURL), "'", `'\''`) + "'"
	if *dbURL == demoDB {
		shown = demoDB
	}
	// The commands are pasted as printed: say where the password went,
	// as serve does.
	note := ""
	if store.Redact(*dbURL) != *dbURL {
		note = "   # with the database's password in place of xxxxx"
	}
	if *dbURL == demoDB {
		// Only the demo's own file: any other database, a SQLite file
		// too, may be someone's inbox, and is refused below if it holds
		// events.
		path := strings.TrimPrefix(demoDB, "sqlite://")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
	}
	// The summary compares the database with one story: it must hold
	// nothing else. Checked before serve starts on it: that serve, with
	// the demo source only, would work an inbox's queue (and on
	// PostgreSQL join the instances sharing it) until refused.
	if other, err := otherEvents(ctx, *dbURL, ""); err != nil {
		return err
	} else if other != "" {
		return fmt.Errorf("demo: %s already holds events; give --db an empty database", store.Redact(*dbURL))
	}
	// Nor another application's database: serve would migrate payhook's
	// and the job queue's tables into it beside the application's own.
	if foreign, err := foreignTables(ctx, *dbURL); err != nil {
		return err
	} else if len(foreign) > 0 {
		return fmt.Errorf("demo: %s holds tables that are not payhook's (%s): another application's database? "+
			"demo would add payhook's tables and a story's events to it; give --db an empty database", store.Redact(*dbURL), listSome(foreign))
	}
	f := flavour.Billete()
	secret := f.NewSecret()
	p := m.newPhases(5)
	p.start("starting payhook serve on %s, with its demo source (provider billete, environment test)", store.Redact(*dbURL))
	var logs bytes.Buffer
	srv, err := startInProcess(ctx, &Main{Stdout: io.Discard, Stderr: &logs, Getenv: m.subEnv,
		Now: m.Now, demoSecret: secret}, serveArgs...)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, logs.String())
	}
	defer srv.stop()
	db, err := store.Open(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.CheckDurable(ctx); errors.Is(err, store.ErrNotDurable) {
		fmt.Fprintf(m.Stderr, "warning: running with --unsafe-durability: a crash can lose events already answered 2xx: %v\n", err)
	}
	target := srv.url + "/webhooks/demo"
	p.done("listening on %s", srv.url)

	p.start("playing the storm scenario against %s: duplicates, parallel bursts, reordering, delays, an outage", target)
	stored := p.watch(ctx, -1, "events stored", func() (int, error) {
		n, _, err := countEvents(ctx, db, "demo")
		return n, err
	})
	res, _, err := sim.Run(ctx, "storm", sim.RunConfig{Target: target, Secret: secret, Flavour: f, Seed: *seed,
		TimeScale: 1000, Size: *size, Logger: discardLogger()})
	stored()
	if err != nil {
		return err
	}
	st := res.Stats
	p.done("%d delivery attempts for %d events, %d answered 200", st.Attempts, len(res.Expected.Events), st.Acked)

	p.start("sending 3 forged deliveries (wrong secret, expired timestamp, tampered body)")
	rejected, err := sendForged(ctx, target, secret, m.Now())
	if err != nil {
		return err
	}
	p.done("%d answered 400", rejected)

	p.start("waiting until every stored event is processed")
	total, _, err := countEvents(ctx, db, "demo")
	if err != nil {
		return err
	}
	handled := p.watch(ctx, total, "events processed", func() (int, error) {
		n, waiting, err := countEvents(ctx, db, "demo")
		return n - waiting, err
	})
	rep, err := waitProcessed(ctx, db, "demo", res, 2*time.Minute)
	handled()
	if err != nil {
		return err
	}
	p.done("%d processed, %d ignored, %d failed", rep.Processed, rep.Ignored, rep.Failed)

	p.start("comparing payhook's billing state with the provider's")
	diffs, err := compareBilling(ctx, db, "demo", res.Expected)
	if err != nil {
		return err
	}
	ledger, err := billing.LedgerBalances(ctx, db)
	if err != nil {
		return err
	}
	p.done("%d differences", len(diffs))
	fmt.Fprintf(m.Stdout, `
sent          %d delivery attempts for %d events: %d duplicates, %d parallel bursts of 5, reordered, delayed
acknowledged  %d answered 200; %d attempts failed (%d while the target was down on purpose) and were retried
stored once   %d events, one row each under the unique (source, event id) index
deduplicated  %d deliveries answered 200 without storing anything
rejected      %d forged deliveries (wrong secret, expired timestamp, tampered body) answered 400, nothing stored
processed     %d processed, %d ignored (they change no billing state), %d failed, %d still waiting;
              %d took more than one attempt (they came before what they are about, and waited for it)
ledger        kept %s (provider_receivable + crypto_wallet, as payhook ledger balances shows)

every event the provider created is stored exactly once and processed exactly once: %s
billing state (%d payments, %d orders, %d subscriptions, the ledger) equals the provider's: %s
Look around: payhook events list --db %s%s
             payhook ledger balances --db %s%s
`, st.Attempts, len(res.Expected.Events), st.Duplicates, st.Bursts,
		st.Acked, st.Failed, st.Outage, rep.Stored, st.Acked-rep.Stored, rejected, rep.Processed, rep.Ignored, rep.Failed, rep.Waiting, rep.Retried,
		formatBalances(keptBalances(ledger)),
		yesNo(rep.ExactlyOnce()), len(res.Expected.Payments)+len(res.Expected.Invoices), len(res.Expected.Orders),
		len(res.Expected.Subscriptions), yesNo(len(diffs) == 0), shown, note, shown, note)
	if !rep.ExactlyOnce() {
		return fmt.Errorf("demo: %s", rep.Problem)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("demo: billing state differs from the provider's: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// keptBalances is checkdb.Kept for every currency of the ledger.
func keptBalances(b billing.BalancesView) map[string]int64 {
	out := make(map[string]int64, len(b.Balances))
	for cur, cb := range b.Balances {
		out[cur] = checkdb.Kept(cb.Accounts)
	}
	return out
}

// phases says what the demo is doing while it plays: a numbered line
// per phase and, when done, what it did and how long it took; on a
// terminal (stderr) a progress bar while a phase counts something.
type phases struct {
	m        *Main
	n, total int
	began    time.Time
}

func (m *Main) newPhases(total int) *phases { return &phases{m: m, total: total} }

func (p *phases) start(format string, args ...any) {
	p.n++
	p.began = p.m.Now()
	fmt.Fprintf(p.m.Stdout, "[%d/%d] %s ...\n", p.n, p.total, fmt.Sprintf(format, args...))
}

func (p *phases) done(format string, args ...any) {
	fmt.Fprintf(p.m.Stdout, "      %s (%s)\n", fmt.Sprintf(format, args...), p.m.Now().Sub(p.began).Round(100*time.Millisecond))
}

// watch shows count (of total, -1 when unknown) on a progress bar while
// the phase runs, when stderr is a terminal; the returned stop ends it.
// Elsewhere (a pipe, a file, a test) it shows nothing: the phase lines
// say enough.
func (p *phases) watch(ctx context.Context, total int, what string, count func() (int, error)) (stop func()) {
	f, ok := p.m.Stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := count(); err == nil {
				bar.Set(n)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		bar.Finish()
		bar.Exit()
	}
}

// countEvents counts the events of source, and those still waiting to be
// processed (received).
func countEvents(ctx context.Context, db *store.DB, source string) (events, waiting int, err error) {
	err = db.SQL.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'received' THEN 1 ELSE 0 END), 0)
		FROM payhook_events WHERE source = $1`, source).Scan(&events, &waiting)
	if err != nil {
		return 0, 0, fmt.Errorf("count events: %w", err)
	}
	return events, waiting, nil
}

// formatBalances writes amounts in minor units per currency, sorted.
func formatBalances(b map[string]int64) string {
	var parts []string
	for _, cur := range slices.Sorted(maps.Keys(b)) {
		parts = append(parts, fmt.Sprintf("%s %d", cur, b[cur]))
	}
	return strings.Join(parts, ", ")
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// sendForged sends three deliveries that must be rejected, and returns how
// many were answered 400.
func sendForged(ctx context.Context, target, secret string, now time.Time) (int, error) {
	body := []byte(`{"id":"evt_forged","type":"checkout.completed","created_at":"2026-01-01T00:00:00Z","environment":"test","api_version":"2026-01-01","data":{}}`)
	wrong, _ := standard.Sign("whsec_"+"Zm9yZ2VkIGJ5IHNvbWVvbmUgZWxzZQ==", "evt_forged", now, body)
	expired, _ := standard.Sign(secret, "evt_forged", now.Add(-time.Hour), body)
	tampered, _ := standard.Sign(secret, "evt_forged", now, body)
	rejected := 0
	for _, d := range []struct {
		h    http.Header
		body []byte
	}{{wrong, body}, {expired, body}, {tampered, bytes.Replace(body, []byte("checkout"), []byte("checkoux"), 1)}} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(d.body))
		if err != nil {
			return 0, err
		}
		req.Header = d.h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, fmt.Errorf("send forged delivery: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest {
			rejected++
		}
	}
	return rejected, nil
}

// onceReport compares what payhook stored for a source with what the
// simulated provider created.
type onceReport struct {
	Stored, Processed, Ignored, Failed, Waiting int
	// Retried counts events that took more than one attempt: about
	// something not seen yet (a refund before its payment), retried until
	// it was, never half-applied.
	Retried int
	// Problem says what is wrong, "" when every event the provider
	// delivered is stored once and processed once and nothing else is.
	Problem string
}

// ExactlyOnce reports whether nothing was lost, doubled or left over.
func (r onceReport) ExactlyOnce() bool { return r.Problem == "" }

// waitProcessed waits until no event of source is waiting, then checks it
// against the run's expected events: each delivered one stored exactly
// once and handled (processed, or ignored when it changes no billing
// state, like a test event), and nothing stored that the provider did not
// create. That effects happened once is for compareBilling to tell.
//
// It gives up waiting only when nothing moved (no event stored, handled
// or attempted) for stall, never because the whole run took long: a slow
// machine is not a failure, a stuck one is. It polls with a cheap count,
// not a listing, so that watching does not slow the work it watches.
func waitProcessed(ctx context.Context, db *store.DB, source string, res *sim.Result, stall time.Duration) (onceReport, error) {
	var last [3]int64
	moved := time.Now()
	for {
		var now [3]int64 // events, waiting, attempts
		err := db.SQL.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'received' THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(attempts), 0) FROM payhook_events WHERE source = $1`, source).Scan(&now[0], &now[1], &now[2])
		if err != nil {
			return onceReport{}, fmt.Errorf("count waiting events: %w", err)
		}
		if now != last {
			last, moved = now, time.Now()
		}
		if now[1] == 0 || time.Since(moved) > stall {
			break
		}
		select {
		case <-ctx.Done():
			return onceReport{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	evs, err := db.ListEvents(ctx, store.Filter{Source: source, Limit: 1 << 30})
	if err != nil {
		return onceReport{}, err
	}
	rep := onceReport{Stored: len(evs)}
	stored := map[string]*payhook.Event{}
	for _, ev := range evs {
		switch ev.Status {
		case payhook.StatusProcessed:
			rep.Processed++
		case payhook.StatusIgnored:
			rep.Ignored++
		case payhook.StatusFailed:
			rep.Failed++
		case payhook.StatusReceived:
			rep.Waiting++
		}
		if stored[ev.EventID] != nil {
			rep.Problem = fmt.Sprintf("event %s stored twice", ev.EventID)
		}
		stored[ev.EventID] = ev
	}
	want := 0
	for _, e := range res.Expected.Events {
		ev := stored[e.StoredID]
		switch {
		case !e.Delivered:
			continue
		case ev == nil:
			rep.Problem = fmt.Sprintf("event %s (%s) was acknowledged but is not stored", e.StoredID, e.Type)
		case ev.Status != payhook.StatusProcessed && ev.Status != payhook.StatusIgnored:
			rep.Problem = fmt.Sprintf("event %s is %s after %d attempts (%s), want handled", e.StoredID, ev.Status, ev.Attempts, ev.LastError)
		case ev.Attempts > 1:
			rep.Retried++
		}
		want++
	}
	if rep.Problem == "" && rep.Stored != want {
		rep.Problem = fmt.Sprintf("%d events stored, the provider delivered %d", rep.Stored, want)
	}
	return rep, nil
}

// inProcess is a payhook serve running in this process on a loopback port.
type inProcess struct {
	url  string
	stop func() int
}

// subEnv is the environment of a payhook serve that a command (demo,
// bench) starts in-process with settings of its own: none of m's but
// PAYHOOK_UNSAFE_DURABILITY, which the user gave for the database.
func (m *Main) subEnv(name string) string {
	if name == "PAYHOOK_UNSAFE_DURABILITY" {
		return m.Getenv(name)
	}
	return ""
}

// startInProcess runs "serve --addr 127.0.0.1:0 args..." with sub and
// returns once it listens; stop shuts it down and returns its exit status.
func startInProcess(ctx context.Context, sub *Main, args ...string) (*inProcess, error) {
	ctx, cancel := context.WithCancel(ctx)
	addr := make(chan string, 1)
	sub.OnListen = func(a string) { addr <- a }
	done := make(chan int, 1)
	go func() { done <- sub.Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)) }()
	select {
	case a := <-addr:
		var once sync.Once
		code := 0
		return &inProcess{url: "http://" + a, stop: func() int {
			once.Do(func() { cancel(); code = <-done })
			return code
		}}, nil
	case code := <-done:
		cancel()
		return nil, fmt.Errorf("payhook serve exited with status %d", code)
	}
}

// otherEvents returns the source of an event stored in the database at
// dbURL whose source is not except ("" when there is none), changing
// nothing: a database without payhook's schema (or a SQLite file not
// there yet) holds none. demo and bench check it before they start a
// serve of their own there, which would work an inbox's queue.
func otherEvents(ctx context.Context, dbURL, except string) (string, error) {
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	return otherEventsIn(ctx, db, except)
}

// otherEventsIn is otherEvents on an open database.
func otherEventsIn(ctx context.Context, db *store.DB, except string) (string, error) {
	if ok, err := db.HasSchema(ctx); err != nil || !ok {
		return "", err
	}
	var other string
	err := db.SQL.QueryRowContext(ctx, `SELECT source FROM payhook_events WHERE source <> $1 LIMIT 1`, except).Scan(&other)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", db.URL, err)
	}
	return other, nil
}

// foreignTables returns the tables of the database at dbURL that are
// neither payhook's nor the job queue's (store.DB.ForeignTables), changing
// nothing: another application's. demo and bench check it before their
// serve migrates payhook's tables into a database they are to have alone.
func foreignTables(ctx context.Context, dbURL string) ([]string, error) {
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.ForeignTables(ctx)
}

// listSome writes the first few names, then how many more there are.
func listSome(names []string) string {
	const few = 5
	if len(names) <= few {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:few], ", "), len(names)-few)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
