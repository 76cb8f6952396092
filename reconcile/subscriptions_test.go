package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/internal/stripemock"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// subsWorld is a simulated provider whose subscriptions payhook holds
// partly, and the database that holds them.
type subsWorld struct {
	db  *store.DB
	p   *sim.Provider
	key string
	// old and moved were created at the provider 60 days before at and
	// renewed 30 minutes before it, the renewals stored here (payhook
	// first saw them then); moved's plan changed at the provider after,
	// which payhook missed. fresh was created in the window and stored;
	// ghost is stored here only.
	old, moved, fresh, ghost string
}

// at is the time of the runs of subsWorld; their window is the hour
// before it.
var at = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newSubsWorld(t *testing.T, dbURL string, f flavour.Flavour) *subsWorld {
	t.Helper()
	ctx := context.Background()
	clk := &clock{t: at.Add(-60 * 24 * time.Hour)}
	w := &subsWorld{db: openDB(t, dbURL), ghost: "sub_ghost"}
	var err error
	if w.p, err = sim.New(sim.Config{Flavour: f, Sender: nowhere{}, Now: clk.now}); err != nil {
		t.Fatal(err)
	}
	w.key, _ = w.p.Keys()
	a, _ := provider.Lookup(f.Provider())
	// store applies the provider's last event as payhook's processing
	// does, at the clock's time: payhook's created_at of a subscription
	// it did not have.
	store := func() {
		t.Helper()
		evs, _ := w.p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
		ev := evs[len(evs)-1]
		body, err := f.Body(ev, "")
		if err != nil {
			t.Fatal(err)
		}
		res, err := mapping.Read(a.Name, &payhook.Event{EventID: f.EventID(ev), Payload: body})
		if err != nil || len(res.Facts) != 1 {
			t.Fatalf("mapping %s: %+v, %v; want its subscription", ev.Type, res, err)
		}
		apply(t, w.db, clk.now(), res.Facts...)
	}
	sub := func(customer string) string {
		t.Helper()
		s, err := w.p.CreateSubscription(sim.EnvTest, customer, "basic")
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	w.old, w.moved = sub("cus_old"), sub("cus_moved")
	clk.set(at.Add(-30 * time.Minute))
	for _, id := range []string{w.old, w.moved} {
		if _, err := w.p.RenewSubscription(sim.EnvTest, id); err != nil {
			t.Fatal(err)
		}
		store()
	}
	clk.set(at.Add(-20 * time.Minute))
	w.fresh = sub("cus_fresh")
	store()
	clk.set(at.Add(-10 * time.Minute))
	if _, err := w.p.UpdateSubscription(sim.EnvTest, w.moved, "pro"); err != nil {
		t.Fatal(err)
	}
	apply(t, w.db, clk.now(), billing.Subscription{Ref: w.ghost, Customer: "cus_ghost", Plan: "basic", Status: "active",
		CurrentPeriodEnd: at.Add(24 * time.Hour), UpdatedAt: clk.now()})
	clk.set(at)
	for _, ref := range []string{w.old, w.moved, w.fresh, w.ghost} {
		s, err := billing.GetSubscription(ctx, w.db, "s", ref)
		if err != nil || s.CreatedAt.Before(at.Add(-time.Hour)) {
			t.Fatalf("subscription %s here: %+v, %v; want it stored in the window", ref, s, err)
		}
	}
	return w
}

// apply applies facts to source s in one transaction at now.
func apply(t *testing.T, db *store.DB, now time.Time, facts ...billing.Fact) {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, db, now)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := billing.Apply(ctx, tx, "s", facts); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// run reconciles source s over the hour before at, through client c.
func (w *subsWorld) run(c adapter.Client, cfg reconcile.Config) (*reconcile.Report, error) {
	cfg.DB, cfg.Source, cfg.Client, cfg.Since = w.db, "s", c, at.Add(-time.Hour)
	cfg.Now = func() time.Time { return at }
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 1
	}
	return reconcile.Reconcile(context.Background(), cfg)
}

// subscriptionDiffs are rep's subscription differences, as
// "ref what field:here→provider...".
func subscriptionDiffs(rep *reconcile.Report) []string {
	var out []string
	for _, d := range rep.Differences {
		if d.Kind != adapter.KindSubscription {
			continue
		}
		s := d.Ref + " " + d.What
		for _, f := range d.Fields {
			s += " " + f.Name + ":" + f.Here + "→" + f.Provider
		}
		out = append(out, s)
	}
	return out
}

// lister hides every method of a client but its lists: a client that
// retrieves nothing.
type lister struct{ adapter.ObjectLister }

// A subscription created at the provider before the window and first
// stored by payhook inside it (the renewal of one older than payhook's
// deployment) is not in the provider's list of the window, and is not
// missing at the provider: it is retrieved and compared as a listed one
// (its plan changed since: different); one the provider does not know
// (a 404) is missing at the provider. Each provider the simulator
// plays. A client that cannot retrieve reports neither.
func TestReconcileSubscriptionsCreatedBeforeTheWindow(t *testing.T) {
	t.Parallel()
	for _, f := range []flavour.Flavour{flavour.Billete(), flavour.Stripe(), flavour.Paddle()} {
		t.Run(f.Name(), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				w := newSubsWorld(t, dbURL, f)
				api := httptest.NewServer(w.p.Handler())
				t.Cleanup(api.Close)
				c, err := provider.NewClient(f.Provider(), adapter.ClientConfig{BaseURL: api.URL, Key: w.key})
				if err != nil {
					t.Fatal(err)
				}
				rep, err := w.run(c, reconcile.Config{})
				if err != nil {
					t.Fatal(err)
				}
				want := []string{w.ghost + " missing_at_provider", w.moved + " different plan:basic→pro"}
				if w.moved < w.ghost {
					want[0], want[1] = want[1], want[0]
				}
				if got := subscriptionDiffs(rep); strings.Join(got, "; ") != strings.Join(want, "; ") {
					t.Fatalf("differences %q; want %q", got, want)
				}
				if rep.Listed[adapter.KindSubscription] != 1 || rep.Retrieved[adapter.KindSubscription] != 2 {
					t.Fatalf("listed %v, retrieved %v; want fresh listed, old and moved retrieved", rep.Listed, rep.Retrieved)
				}
				for _, d := range rep.Differences {
					if d.Ref == w.moved && !strings.Contains(d.Fix, "--since "+at.Add(-30*time.Minute).Format(time.RFC3339)) {
						t.Fatalf("fix %q; want a backfill from the snapshot payhook holds, not from the subscription's creation", d.Fix)
					}
				}
				open, err := billing.ListAlerts(context.Background(), w.db, billing.AlertFilter{Kind: reconcile.AlertDifference, Unacknowledged: true})
				if err != nil || len(open) != 2 {
					t.Fatalf("open differences %+v, %v; want moved's and ghost's", open, err)
				}

				// moved's change stored: its difference is fixed, and
				// the next run clears it; ghost's stays.
				apply(t, w.db, at, billing.Subscription{Ref: w.moved, Customer: "cus_moved", Plan: "pro", Status: "active",
					CurrentPeriodEnd: at.Add(90 * 24 * time.Hour), UpdatedAt: at.Add(-10 * time.Minute)})
				if rep, err = w.run(c, reconcile.Config{}); err != nil {
					t.Fatal(err)
				}
				if got := subscriptionDiffs(rep); strings.Join(got, "; ") != w.ghost+" missing_at_provider" {
					t.Fatalf("after the fix: differences %q; want ghost's only", got)
				}
				open, err = billing.ListAlerts(context.Background(), w.db, billing.AlertFilter{Kind: reconcile.AlertDifference, Unacknowledged: true})
				if err != nil || len(open) != 1 || open[0].Subject != "s/subscription/"+w.ghost {
					t.Fatalf("open differences %+v, %v; want ghost's only", open, err)
				}

				// Without a retrieve, nothing tells whether the provider
				// has those it did not list: none is reported.
				rep, err = w.run(lister{c.(adapter.ObjectLister)}, reconcile.Config{})
				if err != nil {
					t.Fatal(err)
				}
				if got := subscriptionDiffs(rep); len(got) != 0 || len(rep.Retrieved) != 0 {
					t.Fatalf("without a retrieve: differences %q, retrieved %v; want none", got, rep.Retrieved)
				}
			})
		})
	}
}

// A retrieve is retried as a page is: a 503 (then the answer) is
// retried, a 429 asking a longer wait than a run waits, or a 400, fails
// the run, saying which subscription it retrieved.
func TestReconcileSubscriptionRetrieveFaults(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newSubsWorld(t, dbURL, flavour.Billete())
		var mu sync.Mutex
		h := w.p.Handler()
		var fault http.HandlerFunc
		faults := 0
		api := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			f := fault
			if f != nil && r.URL.Path == "/subscriptions/"+w.old {
				faults++
				fault = nil
			}
			mu.Unlock()
			if f != nil && r.URL.Path == "/subscriptions/"+w.old {
				f(rw, r)
				return
			}
			h.ServeHTTP(rw, r)
		}))
		t.Cleanup(api.Close)
		c, err := provider.NewClient("billete", adapter.ClientConfig{BaseURL: api.URL, Key: w.key})
		if err != nil {
			t.Fatal(err)
		}
		noSleep := func(context.Context, time.Duration) error { return nil }
		for _, tc := range []struct {
			name  string
			fault http.HandlerFunc
			want  string // the run's error; "" for none
		}{
			{"a 503, then the answer", status(http.StatusServiceUnavailable, ""), ""},
			{"a 429 asking an hour", status(http.StatusTooManyRequests, "3600"), "more than the 5m0s a run waits"},
			{"a 400", status(http.StatusBadRequest, ""), "cannot be used"},
			{"another subscription", body(`{"id":"sub_other","status":"active","plan":"basic","created_at":"2026-01-01T00:00:00Z"}`), "cannot be used"},
		} {
			mu.Lock()
			fault, faults = tc.fault, 0
			mu.Unlock()
			rep, err := w.run(c, reconcile.Config{MaxAttempts: 3, Sleep: noSleep})
			if tc.want == "" {
				if err != nil || faults != 1 || strings.Join(subscriptionDiffs(rep), "; ") != fmt.Sprintf("%s different plan:basic→pro; %s missing_at_provider", w.moved, w.ghost) &&
					strings.Join(subscriptionDiffs(rep), "; ") != fmt.Sprintf("%s missing_at_provider; %s different plan:basic→pro", w.ghost, w.moved) {
					t.Fatalf("%s: %v (faults %d); want the run to retry and find moved and ghost only", tc.name, err, faults)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "retrieve subscription "+w.old) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: error %v; want the retrieve of %s failing the run (%s)", tc.name, err, w.old, tc.want)
			}
		}
	})
}

// Through Stripe's own emulator, which answers GET /v1/subscriptions/{id}
// for any id, with a subscription created in 2009, active with a
// cancel_at (canceled in payhook's words): the subscriptions payhook
// stored in the window are retrieved and compared, not missing at the
// provider. stripe-mock lists without filtering by time, so only the
// subscriptions' differences are looked at.
func TestReconcileSubscriptionsAgainstStripeMock(t *testing.T) {
	t.Parallel()
	mock := stripemock.Start(t)
	const price = "price_1PgafmB7WZ01zgkW6dKueIc5" // the fixture's
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		apply(t, db, at.Add(-30*time.Minute),
			billing.Subscription{Ref: "sub_same", Customer: "cus_1", Plan: price, Status: "canceled", UpdatedAt: at.Add(-30 * time.Minute)},
			billing.Subscription{Ref: "sub_other", Customer: "cus_2", Plan: "price_other", Status: "active", UpdatedAt: at.Add(-30 * time.Minute)})
		c, err := provider.NewClient("stripe", adapter.ClientConfig{BaseURL: mock, Key: "sk_test_123", APIVersion: "2024-06-20"})
		if err != nil {
			t.Fatal(err)
		}
		w := &subsWorld{db: db}
		rep, err := w.run(c, reconcile.Config{})
		if err != nil {
			t.Fatal(err)
		}
		want := "sub_other different status:active→canceled plan:price_other→" + price
		if got := subscriptionDiffs(rep); strings.Join(got, "; ") != want {
			t.Fatalf("differences %q; want %q", got, want)
		}
		if rep.Retrieved[adapter.KindSubscription] != 2 {
			t.Fatalf("retrieved %v; want both subscriptions", rep.Retrieved)
		}
	})
}

// Through Stripe's own emulator, which answers GET
// /v1/payment_intents/{id} for any id, its latest charge expanded as
// payhook asks (the fixture's: an authorization never captured, in USD):
// a payment payhook stored in the window that the list does not have is
// retrieved and compared with it, not missing at the provider. stripe-mock
// lists without filtering by time, so only this payment's differences are
// looked at.
func TestReconcilePaymentsAgainstStripeMock(t *testing.T) {
	t.Parallel()
	mock := stripemock.Start(t)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		apply(t, db, at.Add(-30*time.Minute),
			billing.Captured{Payment: billing.Payment{Ref: "pi_here", Amount: 1000, Currency: "EUR", CapturedAt: at.Add(-30 * time.Minute)}})
		c, err := provider.NewClient("stripe", adapter.ClientConfig{BaseURL: mock, Key: "sk_test_123", APIVersion: "2024-06-20"})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := (&subsWorld{db: db}).run(c, reconcile.Config{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range paymentDiffs(rep) {
			if strings.HasPrefix(d, "pi_here ") {
				got = append(got, d)
			}
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], "pi_here different status:succeeded→uncaptured amount:1000→0") {
			t.Fatalf("differences of pi_here %q; want it retrieved and compared: different status and amount", got)
		}
		if rep.Retrieved[adapter.KindPayment] != 1 {
			t.Fatalf("retrieved %v; want the payment", rep.Retrieved)
		}
	})
}
