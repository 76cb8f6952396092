package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// nowhere is a Sender that delivers nothing: every event is to be
// backfilled.
type nowhere struct{}

func (nowhere) Send(deliver.Target, flavour.Event)  {}
func (nowhere) Log(string) []deliver.Attempt        { return nil }
func (nowhere) Resend(string, deliver.Target) error { return nil }

// clock is a settable clock shared by the simulator and the backfill.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// openDB returns a migrated database (payhook's schema and River's).
func openDB(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

// world is a simulated provider with events, its API on loopback, and a
// database with a queue (not started: jobs wait).
type world struct {
	db    *store.DB
	queue *jobs.Queue
	p     *sim.Provider
	clk   *clock
	cfg   reconcile.BackfillConfig
	ids   []string // the provider's event ids, oldest first
}

// newWorld makes n checkouts completed at the provider, a second apart
// from t0, and a backfill Config of source "b" an hour later over the
// two hours before.
func newWorld(t *testing.T, dbURL string, f flavour.Flavour, n int) *world {
	t.Helper()
	w := &world{db: openDB(t, dbURL), clk: &clock{t: t0}}
	var err error
	if w.queue, err = jobs.New(w.db, jobs.Config{}); err != nil {
		t.Fatal(err)
	}
	if w.p, err = sim.New(sim.Config{Flavour: f, Sender: nowhere{}, Now: w.clk.now}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		w.clk.set(t0.Add(time.Duration(i) * time.Second))
		co, err := w.p.CreateCheckout(sim.EnvTest, 1000+int64(i), "EUR", fmt.Sprintf("order-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := w.p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
	for _, ev := range evs {
		w.ids = append(w.ids, f.EventID(ev))
	}
	api := httptest.NewServer(w.p.Handler())
	t.Cleanup(api.Close)
	key, _ := w.p.Keys()
	a, _ := provider.Lookup(f.Provider())
	c, err := provider.NewClient(a.Name, adapter.ClientConfig{BaseURL: api.URL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	w.clk.set(t0.Add(time.Hour))
	w.cfg = reconcile.BackfillConfig{
		DB: w.db, Inbox: w.queue, Source: payhook.Source{Name: "b", Provider: a.Name, Environment: "test"},
		Envelope: a.Envelope, Lister: c.(adapter.EventLister), From: t0.Add(-time.Hour), PageSize: 3,
		Now: w.clk.now, Sleep: func(context.Context, time.Duration) error { return nil },
	}
	return w
}

// stored returns the source's events by provider id.
func (w *world) stored(t *testing.T) map[string]*payhook.Event {
	t.Helper()
	evs, err := w.db.ListEvents(context.Background(), store.Filter{Source: "b", Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*payhook.Event, len(evs))
	for _, ev := range evs {
		if out[ev.EventID] != nil {
			t.Fatalf("event %s stored twice", ev.EventID)
		}
		out[ev.EventID] = ev
	}
	return out
}

// jobsOf counts the processing jobs enqueued.
func (w *world) jobsOf(t *testing.T) int {
	t.Helper()
	var n int
	if err := w.db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Every event the provider created and payhook lacks is stored once,
// with its job, as backfilled; those payhook has are known and unchanged;
// a second backfill adds nothing. On each provider the simulator plays.
func TestBackfillStoresWhatIsMissingOnce(t *testing.T) {
	for _, f := range []flavour.Flavour{flavour.Billete(), flavour.Stripe(), flavour.Paddle()} {
		t.Run(f.Name(), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				w := newWorld(t, dbURL, f, 5)
				// The first event came by webhook.
				first, _ := w.p.Events(sim.EnvTest, flavour.Query{Limit: 1})
				body, _ := f.Body(first[0], "dlv_1")
				hook := &payhook.Event{Source: "b", EventID: w.ids[0], Type: "x", ReceivedAt: t0, Payload: body}
				if _, err := w.queue.Ingest(ctx, []*payhook.Event{hook}); err != nil {
					t.Fatal(err)
				}
				cfg := w.cfg
				if f.Name() == "paddle" {
					cfg.Source.Environment = "" // Paddle events do not say theirs
				}
				sum, err := reconcile.Backfill(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				n := len(w.ids)
				if sum.Listed != n || sum.New != n-1 || sum.Known != 1 || sum.Refused != 0 || len(sum.Runs) != 1 || sum.Pages < n/3 {
					t.Fatalf("summary %+v; want %d listed, %d new, 1 known over %d+ pages, one run", sum, n, n-1, n/3)
				}
				got := w.stored(t)
				for i, id := range w.ids {
					ev := got[id]
					switch {
					case ev == nil:
						t.Fatalf("event %s not stored", id)
					case i == 0 && (ev.ReceivedVia != payhook.ViaWebhook || ev.Type != "x"):
						t.Fatalf("the delivered event changed: %+v", ev)
					case i > 0 && (ev.ReceivedVia != payhook.ViaBackfill || ev.Status != payhook.StatusReceived):
						t.Fatalf("backfilled event %s is %s via %s; want received via backfill", id, ev.Status, ev.ReceivedVia)
					}
				}
				if len(got) != n || w.jobsOf(t) != n {
					t.Fatalf("%d events and %d jobs stored; want %d of each", len(got), w.jobsOf(t), n)
				}
				again, err := reconcile.Backfill(ctx, cfg)
				if err != nil || again.New != 0 || again.Known != n {
					t.Fatalf("second backfill = %+v, %v; want nothing new, %d known", again, err, n)
				}
				if len(w.stored(t)) != n || w.jobsOf(t) != n {
					t.Fatal("the second backfill stored something")
				}
				runs, err := w.db.Runs(ctx, store.RunFilter{Source: "b", Kind: store.RunBackfill})
				if err != nil || len(runs) != 2 {
					t.Fatalf("runs %v, %v; want 2", runs, err)
				}
				for _, r := range runs {
					if !r.Finished() || r.Failed() || r.Listed != int64(n) {
						t.Fatalf("run %+v; want finished, no error, %d listed", r, n)
					}
				}
			})
		})
	}
}

// An event of another environment is stored ignored, as the receiver
// stores it; a dry run stores nothing and records no run.
func TestBackfillEnvironmentAndDryRun(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		w := newWorld(t, dbURL, flavour.Billete(), 2)
		cfg := w.cfg
		cfg.DryRun = true
		sum, err := reconcile.Backfill(ctx, cfg)
		if err != nil || sum.New != len(w.ids) || !sum.DryRun {
			t.Fatalf("dry run = %+v, %v; want %d new", sum, err, len(w.ids))
		}
		if len(w.stored(t)) != 0 || w.jobsOf(t) != 0 {
			t.Fatal("a dry run stored events")
		}
		if runs, _ := w.db.Runs(ctx, store.RunFilter{}); len(runs) != 0 {
			t.Fatalf("a dry run recorded runs %v", runs)
		}
		cfg = w.cfg
		cfg.Source.Environment = "live"
		if _, err := reconcile.Backfill(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		for id, ev := range w.stored(t) {
			if ev.Status != payhook.StatusIgnored || !strings.Contains(ev.LastError, `environment "test" on a source of environment "live"`) {
				t.Fatalf("event %s of test on a live source: %s %q; want ignored, saying why", id, ev.Status, ev.LastError)
			}
		}
		if w.jobsOf(t) != 0 {
			t.Fatal("an ignored event got a job")
		}
	})
}

// A crash in the middle of a backfill (after its second page is stored):
// the next backfill resumes from the recorded cursor, stores the rest
// once, and lists only what was left.
func TestBackfillResumesAfterACrash(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		w := newWorld(t, dbURL, flavour.Billete(), 5) // 10 events, pages of 3
		n := len(w.ids)
		cfg := w.cfg
		pages := 0
		cfg.Progress = func(reconcile.Summary) {
			if pages++; pages == 2 {
				panic("crash")
			}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the backfill did not crash")
				}
			}()
			reconcile.Backfill(ctx, cfg)
		}()
		runs, _ := w.db.Runs(ctx, store.RunFilter{Source: "b"})
		if len(runs) != 1 || runs[0].Finished() || runs[0].Cursor == "" || runs[0].New != 6 {
			t.Fatalf("after the crash: runs %+v; want one unfinished with a cursor and 6 new", runs)
		}
		crashed := runs[0]
		if len(w.stored(t)) != 6 {
			t.Fatalf("%d events stored before the crash; want the first two pages", len(w.stored(t)))
		}
		// Once it has gone StaleAfter without progress, the next backfill
		// takes it for crashed and resumes it.
		cfg.Progress = nil
		cfg.StaleAfter = time.Minute
		w.clk.set(t0.Add(time.Hour + 5*time.Minute))
		sum, err := reconcile.Backfill(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The window asked is listed whole after the resumed run: what
		// either stored before is known.
		if len(sum.Runs) != 2 || sum.New != n-6 || sum.Known != n {
			t.Fatalf("resumed backfill %+v; want 2 runs (the resumed one, then the window whole), the %d left new, %d known", sum, n-6, n)
		}
		resumed, _ := w.db.Run(ctx, sum.Runs[0])
		if resumed.Resumes != crashed.ID || resumed.Listed != int64(n-6) || resumed.Failed() || !resumed.Finished() {
			t.Fatalf("resumed run %+v; want it to resume run %d and list the %d left", resumed, crashed.ID, n-6)
		}
		if old, _ := w.db.Run(ctx, crashed.ID); old.ResumedBy != resumed.ID {
			t.Fatalf("crashed run resumed_by %d; want %d", old.ResumedBy, resumed.ID)
		}
		got := w.stored(t)
		if len(got) != n || w.jobsOf(t) != n {
			t.Fatalf("%d events, %d jobs; want %d of each, none doubled", len(got), w.jobsOf(t), n)
		}
	})
}

// Listed items that fail the envelope checks are refused, reported and
// skipped; the rest of the page is stored.
func TestBackfillRefusesMalformedItems(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		w := newWorld(t, dbURL, flavour.Billete(), 0)
		good := `{"id":"evt_good","type":"checkout.completed","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`
		items := []string{
			good,
			`{"type":"checkout.completed","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`,
			`{"id":"evt_ctl","type":"checkout.completed\u0007","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`,
			`{"id":"evt_dup","id":"evt_dup2","type":"checkout.completed","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`,
			`{"id":"evt_year","type":"checkout.completed","created_at":"2999-01-01T00:00:00Z","environment":"test","data":{}}`,
			`[1,2]`,
		}
		api := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, `{"object":"list","data":[%s],"has_more":false,"next_cursor":null}`, strings.Join(items, ","))
		}))
		defer api.Close()
		cfg := w.cfg
		cfg.Lister = &fixedLister{t: t, url: api.URL}
		sum, err := reconcile.Backfill(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if sum.New != 1 || sum.Refused != len(items)-1 || sum.Listed != len(items) || len(sum.Refusals) != len(items)-1 {
			t.Fatalf("summary %+v; want 1 new and %d refused, each reported", sum, len(items)-1)
		}
		if sum.Refusals[1].EventID != "evt_ctl" || !strings.Contains(sum.Refusals[1].Reason, "billete") {
			t.Fatalf("refusal %+v; want evt_ctl named with the reason", sum.Refusals[1])
		}
		if got := w.stored(t); len(got) != 1 || got["evt_good"] == nil {
			t.Fatalf("stored %v; want evt_good only", got)
		}
		runs, _ := w.db.Runs(ctx, store.RunFilter{})
		if len(runs) != 1 || runs[0].Refused != int64(len(items)-1) || runs[0].Failed() {
			t.Fatalf("runs %+v; want one, succeeded, counting the refused", runs)
		}
	})
}

// fixedLister lists through billete's client at url, with no clock: a
// request fails with a timeout only when the API says it hangs on it.
type fixedLister struct {
	t       *testing.T
	url     string
	hanging chan struct{}
}

func (l *fixedLister) ListEvents(ctx context.Context, q adapter.EventQuery) (adapter.EventPage, error) {
	c, err := provider.NewClient("billete", adapter.ClientConfig{BaseURL: l.url, Key: "sk_test_x",
		HTTP: &http.Client{Transport: timeoutTransport{hanging: l.hanging}}})
	if err != nil {
		l.t.Fatal(err)
	}
	return c.(adapter.EventLister).ListEvents(ctx, q)
}

// Stripe lists the last 30 days: asking for more is refused, saying so,
// before any request.
func TestBackfillStripeRetention(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, flavour.Stripe(), 1)
		cfg := w.cfg
		cfg.From = w.clk.now().Add(-31 * 24 * time.Hour)
		_, err := reconcile.Backfill(context.Background(), cfg)
		if !errors.Is(err, payhook.ErrInvalid) || !strings.Contains(err.Error(), "last 30 days only") {
			t.Fatalf("Backfill(31 days) = %v; want ErrInvalid explaining the 30-day limit", err)
		}
		if runs, _ := w.db.Runs(context.Background(), store.RunFilter{}); len(runs) != 0 {
			t.Fatalf("a refused window recorded runs %v", runs)
		}
	})
}

// An interrupted backfill (Ctrl-C: its context cancelled) records its run
// as failed, with the cursor of the last page stored; the next one
// resumes from there.
func TestBackfillInterrupted(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, flavour.Billete(), 5) // 10 events, pages of 3
		ctx, cancel := context.WithCancel(context.Background())
		cfg := w.cfg
		cfg.Progress = func(reconcile.Summary) { cancel() }
		sum, err := reconcile.Backfill(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "interrupted") || sum.New != 3 {
			t.Fatalf("interrupted Backfill = %+v, %v; want an error saying so after the first page", sum, err)
		}
		r, _ := w.db.Run(context.Background(), sum.Runs[0])
		if !r.Failed() || r.Cursor == "" || r.New != 3 {
			t.Fatalf("interrupted run %+v; want failed, with its cursor", r)
		}
		cfg.Progress = nil
		sum, err = reconcile.Backfill(context.Background(), cfg)
		if err != nil || sum.New != len(w.ids)-3 || sum.Known != len(w.ids) {
			t.Fatalf("next Backfill = %+v, %v; want the %d left, resumed, then the window whole, known", sum, err, len(w.ids)-3)
		}
		if len(w.stored(t)) != len(w.ids) {
			t.Fatalf("%d stored; want %d", len(w.stored(t)), len(w.ids))
		}
	})
}

// TestBackfillProviderClockAhead: with no end given, the window reaches
// past payhook's now, so an event the provider, whose clock runs two
// minutes ahead, dated in payhook's future is listed and stored too.
func TestBackfillProviderClockAhead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, flavour.Billete(), 2)
		w.clk.set(t0.Add(time.Hour + 2*time.Minute)) // the provider's clock
		co, err := w.p.CreateCheckout(sim.EnvTest, 3000, "EUR", "order-ahead")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
			t.Fatal(err)
		}
		all, _ := w.p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
		cfg := w.cfg
		cfg.Now = func() time.Time { return t0.Add(time.Hour) } // payhook's, behind
		sum, err := reconcile.Backfill(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if sum.New != len(all) || len(w.stored(t)) != len(all) {
			t.Fatalf("summary %+v, %d stored; want all %d of the provider's events, its newest dated ahead of payhook's clock",
				sum, len(w.stored(t)), len(all))
		}
	})
}
