package reconcile_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// onCall runs do around the n-th call of a page's request or store (1
// for the first); the others pass.
type onCall struct {
	mu    sync.Mutex
	calls int
	n     int
}

func (o *onCall) hit() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	return o.calls == o.n
}

// cutLister lists through lister, cutting the n-th request with cut.
type cutLister struct {
	adapter.EventLister
	at  *onCall
	cut func()
}

func (l *cutLister) ListEvents(ctx context.Context, q adapter.EventQuery) (adapter.EventPage, error) {
	if l.at.hit() {
		l.cut()
	}
	return l.EventLister.ListEvents(ctx, q)
}

// cutInbox stores through inbox, cutting the n-th store with cut, before
// the store (cut before) or after its commit.
type cutInbox struct {
	payhook.Inbox
	at     *onCall
	cut    func()
	before bool
}

func (c *cutInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	hit := c.at.hit()
	if hit && c.before {
		c.cut()
	}
	ins, err := c.Inbox.Ingest(ctx, evs)
	if hit && !c.before {
		c.cut()
	}
	return ins, err
}

// killed stands for the process dying: the run stops where it is,
// recording nothing more.
type killed struct{}

// A backfill cut in the middle of its second page, by a kill (after the
// page's commit, before its cursor is recorded) or a cancelled context
// (during the page's request, or its store): the next run, in the shape
// of the next scheduled one (a later window ending now), resumes the cut
// run from its last recorded cursor, not from the start, and every event
// is stored once with one job.
func TestBackfillResumesAfterACutMidPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kill bool // the run dies: unfinished, resumed once stale
		cut  func(w *world, cfg *reconcile.BackfillConfig, cut func())
	}{
		{"killed after the page's commit", true, func(w *world, cfg *reconcile.BackfillConfig, cut func()) {
			cfg.Inbox = &cutInbox{Inbox: w.queue, at: &onCall{n: 2}, cut: cut}
		}},
		{"cancelled during the page's request", false, func(w *world, cfg *reconcile.BackfillConfig, cut func()) {
			cfg.Lister = &cutLister{EventLister: cfg.Lister, at: &onCall{n: 2}, cut: cut}
		}},
		{"cancelled during the page's store", false, func(w *world, cfg *reconcile.BackfillConfig, cut func()) {
			cfg.Inbox = &cutInbox{Inbox: w.queue, at: &onCall{n: 2}, cut: cut, before: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				w := newWorld(t, dbURL, flavour.Billete(), 5) // 10 events, pages of 3
				n := len(w.ids)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cfg := w.cfg
				cut := cancel
				if tc.kill {
					cut = func() { panic(killed{}) }
				}
				tc.cut(w, &cfg, cut)
				first := func() (sum *reconcile.Summary, err error) {
					defer func() {
						if v := recover(); v != nil && v != (killed{}) {
							panic(v)
						}
					}()
					return reconcile.Backfill(ctx, cfg)
				}
				if sum, err := first(); err == nil && sum != nil {
					t.Fatalf("the cut backfill = %+v, nil; want it cut", sum)
				}
				runs, _ := w.db.Runs(context.Background(), store.RunFilter{Source: "b"})
				if len(runs) != 1 || runs[0].Finished() == tc.kill || runs[0].Cursor == "" || runs[0].New != 3 {
					t.Fatalf("the cut run %+v; want one (finished %v) at the cursor after its first page, 3 new", runs, !tc.kill)
				}
				cutRun := runs[0]
				before := len(w.stored(t))

				// The next run, a period later: past StaleAfter, a later
				// window ending now.
				next := w.cfg
				next.StaleAfter = time.Minute
				next.From = w.cfg.From.Add(30 * time.Minute)
				w.clk.set(w.clk.now().Add(5 * time.Minute))
				sum, err := reconcile.Backfill(context.Background(), next)
				if err != nil {
					t.Fatal(err)
				}
				resumed, _ := w.db.Run(context.Background(), sum.Runs[0])
				if resumed.Resumes != cutRun.ID || resumed.Failed() || resumed.Listed > int64(n-3) || resumed.New != int64(n-before) {
					t.Fatalf("next run %+v (summary %+v); want it to resume run %d from its cursor, listing at most the %d after the first page, %d new",
						resumed, sum, cutRun.ID, n-3, n-before)
				}
				if got := w.stored(t); len(got) != n || w.jobsOf(t) != n {
					t.Fatalf("%d events, %d jobs; want %d of each, none doubled", len(got), w.jobsOf(t), n)
				}
			})
		})
	}
}

// A run waiting on a long Retry-After records its progress while it
// waits, so that it is never taken for crashed (StaleAfter) and resumed
// by another run meanwhile.
func TestBackfillAliveWhileWaiting(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		w := newWorld(t, dbURL, flavour.Billete(), 0)
		api := &pagedAPI{attempts: map[int]int{}, fault: on(1, 1, status(429, "180")), hanging: make(chan struct{}, 1)}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		cfg := w.cfg
		cfg.Lister = &fixedLister{t: t, url: srv.URL, hanging: api.hanging}
		cfg.StaleAfter = time.Minute
		var sleeps []time.Duration
		cfg.Sleep = func(_ context.Context, d time.Duration) error {
			sleeps = append(sleeps, d)
			w.clk.set(w.clk.now().Add(d))
			runs, err := w.db.Runs(ctx, store.RunFilter{Source: "b"})
			if err != nil || len(runs) != 1 {
				t.Fatalf("runs %v, %v; want the one", runs, err)
			}
			if quiet := w.clk.now().Sub(runs[0].UpdatedAt); quiet > cfg.StaleAfter {
				t.Fatalf("the waiting run recorded no progress for %s; StaleAfter is %s", quiet, cfg.StaleAfter)
			}
			return nil
		}
		sum, err := reconcile.Backfill(ctx, cfg)
		if err != nil || sum.New != 6 || len(sum.Runs) != 1 {
			t.Fatalf("Backfill = %+v, %v; want the 6 events in one run", sum, err)
		}
		if len(sleeps) != 6 || sleeps[0] != 30*time.Second {
			t.Fatalf("waits %v; want the 3 minutes asked in steps of 30s", sleeps)
		}
	})
}

// newestFirst lists the simulator's events newest first, paging after the
// last id of a page, as Stripe's events API does (the simulator's
// flavours list oldest first). fail, if set, may fail a query.
type newestFirst struct {
	p    *sim.Provider
	f    flavour.Flavour
	fail func(q adapter.EventQuery) error
}

func (l *newestFirst) ListEvents(ctx context.Context, q adapter.EventQuery) (adapter.EventPage, error) {
	if l.fail != nil {
		if err := l.fail(q); err != nil {
			return adapter.EventPage{}, err
		}
	}
	all, _ := l.p.Events(sim.EnvTest, flavour.Query{Limit: 1000}) // one page: a test's few events
	var evs []flavour.Event
	for _, ev := range slices.Backward(all) {
		if q.From.IsZero() || !ev.CreatedAt.Before(q.From.Truncate(time.Second)) {
			evs = append(evs, ev)
		}
	}
	start := 0
	if q.Cursor != "" {
		i := slices.IndexFunc(evs, func(e flavour.Event) bool { return l.f.EventID(e) == q.Cursor })
		if i < 0 {
			return adapter.EventPage{}, &adapter.APIError{Status: http.StatusBadRequest}
		}
		start = i + 1
	}
	end := min(start+cmp.Or(q.Limit, 100), len(evs))
	var bodies [][]byte
	for _, ev := range evs[start:end] {
		b, err := l.f.Body(ev, "")
		if err != nil {
			return adapter.EventPage{}, err
		}
		bodies = append(bodies, b)
	}
	next := ""
	if end < len(evs) {
		next = l.f.EventID(evs[end-1])
	}
	return adapter.NewEventPage(bodies, next != "", next)
}

// missing lists the provider's events w does not store.
func (w *world) missing(t *testing.T) []string {
	t.Helper()
	all, _ := w.p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
	got := w.stored(t)
	var out []string
	for _, ev := range all {
		if id := flavour.Billete().EventID(ev); got[id] == nil {
			out = append(out, fmt.Sprintf("%s (created %s)", id, ev.CreatedAt.Format(time.TimeOnly)))
		}
	}
	return out
}

// TestBackfillResumedNewestFirst: a run of a lister that pages newest
// first (Stripe), cut after its first page, covered the events that
// existed then, not its whole window; the next Backfill resumes it and
// lists its own window whole, so an event made between the two is stored
// (it was listed by neither when the rest of the window started at the
// cut run's end).
func TestBackfillResumedNewestFirst(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, flavour.Billete(), 5)
		ctx := context.Background()
		cfg := w.cfg
		cfg.From, cfg.Until, cfg.MaxAttempts = t0.Add(-time.Hour), time.Time{}, 1
		calls := 0
		cfg.Lister = &newestFirst{p: w.p, f: flavour.Billete(), fail: func(adapter.EventQuery) error {
			if calls++; calls == 2 {
				return &adapter.APIError{Status: http.StatusServiceUnavailable}
			}
			return nil
		}}
		if _, err := reconcile.Backfill(ctx, cfg); err == nil {
			t.Fatal("the first run was not cut")
		}
		w.clk.set(t0.Add(time.Hour + time.Minute))
		co, err := w.p.CreateCheckout(sim.EnvTest, 4242, "EUR", "order-late")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
			t.Fatal(err)
		}
		w.clk.set(t0.Add(time.Hour + 10*time.Minute))
		if _, err := reconcile.Backfill(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if m := w.missing(t); len(m) > 0 {
			t.Fatalf("events not stored after the resumed backfill: %v", m)
		}
	})
}

// TestBackfillGivesUpARunItCannotFinish: a run cut by a failure a resume
// repeats (the provider refuses its cursor) is resumed once, given up
// then, and never stops a later window from being listed: each later
// backfill stores the events its window holds, and only the first one
// reports the resumed run's error.
func TestBackfillGivesUpARunItCannotFinish(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, flavour.Billete(), 5)
		ctx := context.Background()
		cfg := w.cfg
		cfg.MaxAttempts = 1
		bad, calls := "", 0
		cfg.Lister = &newestFirst{p: w.p, f: flavour.Billete(), fail: func(q adapter.EventQuery) error {
			if calls++; calls == 2 {
				bad = q.Cursor
			}
			if bad != "" && q.Cursor == bad {
				return &adapter.APIError{Status: http.StatusBadRequest}
			}
			return nil
		}}
		if _, err := reconcile.Backfill(ctx, cfg); err == nil {
			t.Fatal("the first run did not fail")
		}
		for i := range 3 {
			w.clk.set(t0.Add(time.Duration(2+i) * time.Hour))
			co, err := w.p.CreateCheckout(sim.EnvTest, 5000+int64(i), "EUR", fmt.Sprintf("order-later-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
				t.Fatal(err)
			}
			cfg.From = w.clk.now().Add(-10 * time.Minute)
			sum, err := reconcile.Backfill(ctx, cfg)
			if want := i == 0; (err != nil) != want {
				t.Errorf("backfill %d: %v; want an error: %v", i+1, err, want)
			}
			if sum == nil || sum.New != 2 {
				t.Errorf("backfill %d: summary %+v; want the 2 events of its window stored", i+1, sum)
			}
		}
	})
}
