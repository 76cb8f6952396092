package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// paysWorld is a simulated provider whose payments payhook holds partly,
// and the database that holds them.
type paysWorld struct {
	db  *store.DB
	p   *sim.Provider
	f   flavour.Flavour
	key string
	// old and moved were paid at the provider 60 days before at and
	// refunded 30 minutes before it: payhook first saw each through
	// that refund. moved was refunded again 10 minutes before at, which
	// payhook missed. fresh was paid in the window and stored; ghost is
	// stored here only.
	old, moved, fresh, ghost string
	// missedRefund is moved's refund payhook missed.
	missedRefund string
}

func newPaysWorld(t *testing.T, dbURL string, f flavour.Flavour) *paysWorld {
	t.Helper()
	ctx := context.Background()
	clk := &clock{t: at.Add(-60 * 24 * time.Hour)}
	w := &paysWorld{db: openDB(t, dbURL), f: f, ghost: "pay_ghost"}
	var err error
	if w.p, err = sim.New(sim.Config{Flavour: f, Sender: nowhere{}, Now: clk.now}); err != nil {
		t.Fatal(err)
	}
	w.key, _ = w.p.Keys()
	a, _ := provider.Lookup(f.Provider())
	// store applies the provider's last event as payhook's processing
	// does, at the clock's time.
	store := func() {
		t.Helper()
		evs, _ := w.p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
		ev := evs[len(evs)-1]
		body, err := f.Body(ev, "")
		if err != nil {
			t.Fatal(err)
		}
		res, err := mapping.Read(a.Name, &payhook.Event{EventID: f.EventID(ev), OccurredAt: ev.CreatedAt, Payload: body})
		if err != nil || len(res.Facts) == 0 {
			t.Fatalf("mapping %s: %+v, %v; want its payment", ev.Type, res, err)
		}
		apply(t, w.db, clk.now(), res.Facts...)
	}
	pay := func() string {
		t.Helper()
		co, err := w.p.CreateCheckout(sim.EnvTest, 1000, "EUR", "")
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.p.CompleteCheckout(sim.EnvTest, co.ID)
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	refund := func(id string, amount int64) billing.Refunded {
		t.Helper()
		r, err := w.p.Refund(sim.EnvTest, id, amount, "", false)
		if err != nil {
			t.Fatal(err)
		}
		return billing.Refunded{PaymentRef: id, RefundRef: r.ID, Amount: amount, Currency: "EUR", At: clk.now()}
	}
	// firstSeen applies refund r of a payment payhook has not seen, as a
	// refund event that does not say when its payment was made places
	// it: captured when refunded.
	firstSeen := func(r billing.Refunded) {
		t.Helper()
		r.Payment = &billing.Payment{Ref: r.PaymentRef, Amount: 1000, Currency: "EUR", CapturedAt: r.At}
		apply(t, w.db, clk.now(), r)
	}
	w.old, w.moved = pay(), pay()
	clk.set(at.Add(-30 * time.Minute))
	firstSeen(refund(w.old, 300))
	firstSeen(refund(w.moved, 200))
	clk.set(at.Add(-20 * time.Minute))
	w.fresh = pay()
	store()
	clk.set(at.Add(-10 * time.Minute))
	w.missedRefund = refund(w.moved, 100).RefundRef
	apply(t, w.db, clk.now(), billing.Captured{Payment: billing.Payment{Ref: w.ghost, Amount: 1000, Currency: "EUR", CapturedAt: clk.now()}})
	clk.set(at)
	for _, ref := range []string{w.old, w.moved, w.fresh, w.ghost} {
		p, err := billing.GetPayment(ctx, w.db, "s", ref)
		if err != nil || p.CreatedAt.Before(at.Add(-time.Hour)) {
			t.Fatalf("payment %s here: %+v, %v; want it stored in the window", ref, p, err)
		}
	}
	return w
}

// client is w's client of the API h (w's own when nil).
func (w *paysWorld) client(t *testing.T, h http.Handler) adapter.Client {
	t.Helper()
	if h == nil {
		h = w.p.Handler()
	}
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)
	c, err := provider.NewClient(w.f.Provider(), adapter.ClientConfig{BaseURL: api.URL, Key: w.key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run reconciles source s over the hour before at, through client c.
func (w *paysWorld) run(c adapter.Client, cfg reconcile.Config) (*reconcile.Report, error) {
	return (&subsWorld{db: w.db}).run(c, cfg)
}

// paymentDiffs are rep's payment differences, as
// "ref what field:here→provider...".
func paymentDiffs(rep *reconcile.Report) []string {
	var out []string
	for _, d := range rep.Differences {
		if d.Kind != adapter.KindPayment {
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

func sorted(s ...string) []string { sort.Strings(s); return s }

// A payment made at the provider before the window whose first event
// payhook saw was a later refund (payhook's captured_at is the refund's
// time, inside the window) is not in the provider's list of the window,
// and is not missing at the provider: it is retrieved and compared as a
// listed one (a second refund payhook missed: a different
// refunded_amount); one the provider does not know (a 404) is missing at
// the provider. Each provider the simulator plays.
func TestReconcilePaymentsCreatedBeforeTheWindow(t *testing.T) {
	t.Parallel()
	for _, f := range []flavour.Flavour{flavour.Billete(), flavour.Stripe(), flavour.Paddle()} {
		t.Run(f.Name(), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				w := newPaysWorld(t, dbURL, f)
				c := w.client(t, nil)
				rep, err := w.run(c, reconcile.Config{})
				if err != nil {
					t.Fatal(err)
				}
				want := sorted(w.ghost+" missing_at_provider", w.moved+" different refunded_amount:200→300")
				if got := paymentDiffs(rep); strings.Join(got, "; ") != strings.Join(want, "; ") {
					t.Fatalf("differences %q; want %q", got, want)
				}
				if rep.Listed[adapter.KindPayment] != 1 || rep.Retrieved[adapter.KindPayment] != 2 || len(rep.Unchecked) != 0 {
					t.Fatalf("listed %v, retrieved %v, unchecked %v; want fresh listed, old and moved retrieved", rep.Listed, rep.Retrieved, rep.Unchecked)
				}
			})
		})
	}
}

// A 404 is taken for an object missing at the provider only once the
// same API answered a retrieve of that kind with the object in the run:
// an api_url (or a proxy) that answers 404 to every retrieve fails the
// run, naming the URL that answered, rather than report every payment
// the list did not have missing at the provider; when every unlisted
// payment answers 404, a payment the list has is retrieved to check.
func TestReconcileRetrieve404sTrusted(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newPaysWorld(t, dbURL, flavour.Billete())
		h := w.p.Handler()
		retrieve := regexp.MustCompile(`^/(payments|subscriptions)/([^/]+)$`)
		// proxy serves the API but answers 404, not in the provider's
		// shape, to the retrieves gone says, and lists no payment when
		// empty is set.
		proxy := func(gone func(id string) bool, empty bool) http.Handler {
			return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if m := retrieve.FindStringSubmatch(r.URL.Path); m != nil && gone(m[2]) {
					http.Error(rw, "404 page not found", http.StatusNotFound)
					return
				}
				if empty && r.URL.Path == "/payments" {
					rw.Write([]byte(`{"object":"list","data":[],"has_more":false,"next_cursor":null}`))
					return
				}
				h.ServeHTTP(rw, r)
			})
		}
		all := func(string) bool { return true }
		for _, tc := range []struct {
			name  string
			api   http.Handler
			want  []string // the payments' differences, when the run succeeds
			error string   // the run's error, else ""
		}{
			{"every retrieve a 404", proxy(all, false), nil,
				"the API answered 404 to the retrieve of payment " + w.fresh + ", which its own list has (GET %s/payments/" + w.fresh + ")"},
			{"every retrieve a 404, nothing listed", proxy(all, true), nil,
				"the retrieve of each of the 4 payments payhook stored in the window that the provider's list did not have answered 404 (GET %s/payments/"},
			{"the unlisted ones gone, the listed one there", proxy(func(id string) bool { return id != w.fresh }, false),
				// moved's refund payhook missed is listed all the same.
				sorted(w.old+" missing_at_provider", w.moved+" missing_at_provider", w.moved+" different refunds:→"+w.missedRefund, w.ghost+" missing_at_provider"), ""},
		} {
			api := httptest.NewServer(tc.api)
			t.Cleanup(api.Close)
			c, err := provider.NewClient("billete", adapter.ClientConfig{BaseURL: api.URL, Key: w.key})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := w.run(c, reconcile.Config{})
			if tc.error != "" {
				if want := fmt.Sprintf(tc.error, api.URL); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "api_url") {
					t.Fatalf("%s: error %v; want the run failed: %q, and the api_url to check", tc.name, err, want)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := sorted(paymentDiffs(rep)...); strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("%s: differences %q; want %q", tc.name, got, tc.want)
			}
		}
	})
}

// The objects a run retrieves one by one are capped (Config.MaxRetrieves):
// the rest are counted unchecked, logged, and neither compared nor
// reported.
func TestReconcileRetrievesCapped(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newPaysWorld(t, dbURL, flavour.Billete())
		c := w.client(t, nil)
		for _, tc := range []struct {
			max, retrieves int
		}{{-1, 0}, {1, 1}, {2, 2}, {3, 3}} {
			var log bytes.Buffer
			rep, err := w.run(c, reconcile.Config{MaxRetrieves: tc.max, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			// Each payment retrieved is compared: ghost is missing, moved
			// different, old the same. The refund payhook missed of moved
			// is listed, so found whether moved is retrieved or not.
			var diffs []string
			for _, d := range paymentDiffs(rep) {
				if !strings.Contains(d, " refunds:") {
					diffs = append(diffs, d)
				}
			}
			if n := rep.Retrieved[adapter.KindPayment] + strings.Count(strings.Join(diffs, ";"), "missing_at_provider"); n != tc.retrieves {
				t.Fatalf("max %d: retrieved %v, differences %q; want %d payments retrieved", tc.max, rep.Retrieved, diffs, tc.retrieves)
			}
			if rep.Unchecked[adapter.KindPayment] != 3-tc.retrieves || len(diffs) > tc.retrieves {
				t.Fatalf("max %d: unchecked %v, differences %q; want %d unchecked, unreported", tc.max, rep.Unchecked, diffs, 3-tc.retrieves)
			}
			if logged := strings.Contains(log.String(), "left unchecked"); logged != (tc.retrieves < 3) {
				t.Fatalf("max %d: log %q; want the unchecked logged when any", tc.max, log.String())
			}
			if run, err := w.db.Run(context.Background(), rep.Run); err != nil || run.Unchecked != int64(3-tc.retrieves) {
				t.Fatalf("max %d: run %+v, %v; want %d unchecked recorded", tc.max, run, err, 3-tc.retrieves)
			}
		}
	})
}

// A payment the cap left unchecked (Config.MaxRetrieves) is not compared,
// even when the refunds the list has of it are: its open difference
// stays open. old, refunded here 100 more than at the provider, is found
// different by a run that retrieves it; a run that retrieves nothing
// finds old's listed refund posted here, yet never checked old itself.
// Before, that run marked old compared through its refunds and cleared
// the difference it still has.
func TestReconcileUncheckedKeepsOpenDifferences(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		w := newPaysWorld(t, dbURL, flavour.Billete())
		apply(t, w.db, at.Add(-5*time.Minute), billing.Refunded{PaymentRef: w.old, RefundRef: "re_here_only", Amount: 100, Currency: "EUR", At: at.Add(-5 * time.Minute)})
		c := w.client(t, nil)
		open := func() []string {
			t.Helper()
			as, err := billing.ListAlerts(context.Background(), w.db, billing.AlertFilter{Kind: reconcile.AlertDifference, Unacknowledged: true})
			if err != nil {
				t.Fatal(err)
			}
			var subjects []string
			for _, a := range as {
				subjects = append(subjects, a.Subject)
			}
			return sorted(subjects...)
		}
		all := sorted("s/payment/"+w.old, "s/payment/"+w.moved, "s/payment/"+w.ghost)
		rep, err := w.run(c, reconcile.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(paymentDiffs(rep), w.old+" different refunded_amount:400→300") {
			t.Fatalf("differences %q; want old's refunded_amount", paymentDiffs(rep))
		}
		if got := open(); !slices.Equal(got, all) {
			t.Fatalf("open differences %q; want %q", got, all)
		}
		rep, err = w.run(c, reconcile.Config{MaxRetrieves: -1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Unchecked[adapter.KindPayment] != 3 {
			t.Fatalf("unchecked %v; want old, moved and ghost", rep.Unchecked)
		}
		if got := open(); !slices.Equal(got, all) {
			t.Fatalf("after a run that checked none of them: open differences %q; want %q (old's still open)", got, all)
		}
	})
}
