package reconcile_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
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
)

// A partial capture from end to end: the simulator, playing Stripe,
// authorizes 1000 and captures 600, releasing the other 400 by a refund
// it makes itself (its charge counts it in amount_refunded; charge.refunded
// tells it). Each event is processed as payhook's worker does it (its
// object fetched from the simulator's API, in place of data.object, then
// mapped and applied): payhook books 600 captured, nothing refunded.
// Reconciliation against the simulator (its charges and its refunds with
// their charges) then reports no difference, and a later refund of 100,
// its event delivered twice, is booked once and agrees too. Before,
// every partial capture was a difference: the charge listed 400 refunded,
// the release a refund missing here.
func TestReconcileStripePartialCapture(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		clk := &clock{t: at.Add(-50 * time.Minute)}
		f := flavour.Stripe()
		p, err := sim.New(sim.Config{Flavour: f, Sender: nowhere{}, Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		key, _ := p.Keys()
		api := httptest.NewServer(p.Handler())
		t.Cleanup(api.Close)
		c, err := provider.NewClient("stripe", adapter.ClientConfig{BaseURL: api.URL, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		// process processes the events since the last call (again from
		// the one before, when again is true: a duplicate delivery).
		seen := 0
		process := func(again bool) {
			t.Helper()
			evs, _ := p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
			from := seen
			if again {
				from--
			}
			for _, ev := range evs[from:] {
				body, err := f.Body(ev, "")
				if err != nil {
					t.Fatal(err)
				}
				var env map[string]any
				if err := json.Unmarshal(body, &env); err != nil {
					t.Fatal(err)
				}
				pe := &payhook.Event{EventID: f.EventID(ev), Type: env["type"].(string), Payload: body}
				resource, err := c.Fetch(ctx, pe)
				if err != nil {
					t.Fatalf("fetch %s: %v", pe.Type, err)
				}
				if resource != nil {
					env["data"] = map[string]any{"object": json.RawMessage(resource)}
					if pe.Payload, err = json.Marshal(env); err != nil {
						t.Fatal(err)
					}
				}
				res, err := mapping.Read("stripe", pe)
				if err != nil {
					t.Fatalf("mapping %s: %v", pe.Type, err)
				}
				apply(t, db, clk.now(), res.Facts...)
			}
			seen = len(evs)
		}
		reconciled := func(when string, refunded int64, refunds int) {
			t.Helper()
			rep, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, Source: "s", Client: c, Since: at.Add(-time.Hour),
				Now: func() time.Time { return at }, MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Differences) != 0 || rep.Listed[adapter.KindPayment] != 1 || rep.Listed[adapter.KindRefund] != refunds {
				t.Errorf("%s: listed %v, differences %+v; want the payment and %d refunds (not the release) listed, no difference",
					when, rep.Listed, rep.Differences, refunds)
			}
			pays, err := billing.ListPayments(ctx, db, billing.PaymentFilter{Source: "s", Limit: 10})
			if err != nil || len(pays) != 1 || pays[0].Amount != 600 || pays[0].RefundedAmount != refunded {
				t.Fatalf("%s: payments here %+v, %v; want 600 captured, %d refunded", when, pays, err, refunded)
			}
		}

		co, err := p.CreateCheckout(sim.EnvTest, 1000, "EUR", "ord_partial")
		if err != nil {
			t.Fatal(err)
		}
		pay, err := p.CompleteCheckoutCapture(sim.EnvTest, co.ID, 600)
		if err != nil {
			t.Fatal(err)
		}
		process(false)
		reconciled("after the partial capture", 0, 0)

		clk.set(at.Add(-20 * time.Minute))
		if _, err := p.Refund(sim.EnvTest, pay.ID, 100, "", false); err != nil {
			t.Fatal(err)
		}
		process(false)
		process(true)
		reconciled("after a refund of 100, delivered twice", 100, 1)
	})
}
