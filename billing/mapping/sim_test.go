package mapping_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// recorder is a sim.Sender that records what the provider sends.
type recorder struct {
	mu   sync.Mutex
	sent []sent
}

type sent struct {
	target deliver.Target
	ev     flavour.Event
}

func (r *recorder) Send(t deliver.Target, ev flavour.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sent{t, ev})
}

func (r *recorder) Log(string) []deliver.Attempt        { return nil }
func (r *recorder) Resend(string, deliver.Target) error { return errors.New("recorder: no resend") }

func (r *recorder) all() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.sent...)
}

// ticker is a clock that moves one second at each reading, so that every
// time of the story is distinct and whole (Stripe renders unix seconds).
type ticker struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ticker) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// delivered is one event of the story as payhook stores it.
type delivered struct {
	neutral flavour.Event  // what the provider meant
	stored  *payhook.Event // what payhook received, verified and stored
}

// playStory drives a real simulated provider of flavour name through a
// story that emits every neutral event type at least once, renders and
// signs each event as the flavour delivers it, verifies it with payhook's
// verifier of that provider and returns the stored events.
func playStory(t *testing.T, name string) (flavour.Flavour, []delivered) {
	t.Helper()
	f, err := flavour.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	clk := &ticker{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	p, err := sim.New(sim.Config{Flavour: f, Sender: rec, Now: clk.Now, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	const env = sim.EnvTest
	ep, secret, err := p.CreateEndpoint(env, "http://127.0.0.1:1/hook", []string{"*"}, "")
	if err != nil {
		t.Fatal(err)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pay := func(amount int64, currency, order string) sim.Payment {
		t.Helper()
		c, err := p.CreateCheckout(env, amount, currency, order)
		if err != nil {
			t.Fatal(err)
		}
		py, err := p.CompleteCheckout(env, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return py
	}
	full := pay(10000, "USD", "ord_1")
	partial := pay(2500, "EUR", "ord_2")
	failed := pay(777, "USD", "ord_3")
	disputed := pay(4200, "USD", "ord_4")
	won := pay(3100, "EUR", "ord_5")
	must(p.Refund(env, full.ID, full.Amount, "k1", false))
	must(p.Refund(env, partial.ID, 1000, "k2", false))
	must(p.Refund(env, partial.ID, 500, "k3", false))
	must(p.Refund(env, failed.ID, 300, "k4", true))
	must(p.Chargeback(env, disputed.ID))
	must(p.Refund(env, won.ID, 100, "k5", false))
	must(p.Chargeback(env, won.ID))
	must(p.WinChargeback(env, won.ID))
	sub, err := p.CreateSubscription(env, "cus_0001", "basic")
	if err != nil {
		t.Fatal(err)
	}
	must(p.UpdateSubscription(env, sub.ID, "pro"))
	must(p.RenewSubscription(env, sub.ID))
	must(p.CancelSubscription(env, sub.ID))
	must(p.EndSubscription(env, sub.ID))
	inv, err := p.CreateInvoice(env, 150000, "BTC", "ord_9")
	if err != nil {
		t.Fatal(err)
	}
	must(p.SettleInvoice(env, inv.ID, "tx_00000000deadbeef"))
	must(p.SendTest(env, ep.ID))

	v, err := provider.New(provider.Options{Provider: f.Provider(), Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	var out []delivered
	for i, s := range rec.all() {
		dlv := fmt.Sprintf("dlv_%04d", i)
		body, err := f.Body(s.ev, dlv)
		if err != nil {
			t.Fatal(err)
		}
		hdr, err := f.Sign(s.target.Secrets(), s.ev, dlv, body, s.ev.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		envl, err := v.Verify(payhook.Delivery{Header: hdr, Body: body, ReceivedAt: s.ev.CreatedAt})
		if err != nil {
			t.Fatalf("verify %s %s: %v", name, s.ev.Type, err)
		}
		out = append(out, delivered{neutral: s.ev, stored: &payhook.Event{
			ID: int64(i + 1), Source: name + "-test", EventID: envl.EventID, Type: envl.Type,
			Environment: envl.Environment, OccurredAt: envl.OccurredAt, ReceivedAt: s.ev.CreatedAt,
			Payload: body, SecretID: envl.SecretID, Status: payhook.StatusReceived,
		}})
	}
	return f, out
}

// decode reads an event's neutral Data as the sim's resource type.
func decode[T any](t *testing.T, data map[string]any) T {
	t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// want returns the facts flavour name's rendering of ev must give.
func want(t *testing.T, name string, ev flavour.Event) []billing.Fact {
	t.Helper()
	if name == "crypto" && ev.Type != flavour.InvoiceSettled {
		return nil // BTCPay knows invoices only
	}
	switch ev.Type {
	case flavour.CheckoutCompleted:
		c := decode[sim.Checkout](t, ev.Data)
		order := c.Metadata["order_id"]
		return []billing.Fact{
			billing.Captured{Payment: billing.Payment{
				Ref: c.PaymentID, OrderID: order, Amount: c.Amount, Currency: c.Currency, CapturedAt: c.UpdatedAt,
			}},
			billing.OrderPaid{OrderID: order, PaymentRef: c.PaymentID, At: c.UpdatedAt},
		}
	case flavour.PaymentSucceeded:
		p := decode[sim.Payment](t, ev.Data)
		at := p.CreatedAt
		if name == "paddle" {
			at = p.UpdatedAt // the transaction's updated_at
		}
		return []billing.Fact{
			billing.Captured{Payment: billing.Payment{
				Ref: p.ID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, CapturedAt: at,
			}},
			billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.ID, At: at},
		}
	case flavour.PaymentRefunded:
		d := decode[struct {
			sim.Payment
			Refund sim.Refund `json:"refund"`
		}](t, ev.Data)
		f := billing.Refunded{
			Payment: &billing.Payment{
				Ref: d.ID, OrderID: d.OrderID, Amount: d.Amount, Currency: d.Currency, CapturedAt: d.CreatedAt,
			},
			PaymentRef: d.ID, RefundRef: d.Refund.ID, Amount: d.Refund.Amount, Currency: d.Refund.Currency,
			At: d.Refund.CreatedAt,
		}
		if name == "paddle" {
			// An adjustment: no transaction total, its own created_at.
			f.Payment, f.At = nil, ev.CreatedAt
		}
		return []billing.Fact{f}
	case flavour.RefundFailed:
		r := decode[sim.Refund](t, ev.Data)
		at := r.CreatedAt
		if name == "paddle" {
			at = ev.CreatedAt // the adjustment's updated_at
		}
		return []billing.Fact{billing.RefundFailed{PaymentRef: r.PaymentID, RefundRef: r.ID, At: at}}
	case flavour.PaymentChargedBack:
		p := decode[sim.Payment](t, ev.Data)
		if p.DisputeID != "dp_"+p.ID || !p.ChargedBackAt.Equal(p.UpdatedAt) {
			t.Fatalf("the sim's chargeback names dispute %q at %v", p.DisputeID, p.ChargedBackAt)
		}
		switch name {
		case "stripe": // the dispute's amount: the whole payment
			return []billing.Fact{billing.ChargedBack{PaymentRef: p.ID, DisputeRef: p.DisputeID, Amount: p.Amount, At: p.UpdatedAt}}
		case "paddle":
			return []billing.Fact{billing.ChargedBack{PaymentRef: p.ID, DisputeRef: "adj_cb_" + p.ID, Amount: p.Amount, At: ev.CreatedAt}}
		}
		return []billing.Fact{billing.ChargedBack{
			Payment: &billing.Payment{
				Ref: p.ID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, CapturedAt: p.CreatedAt,
			},
			PaymentRef: p.ID, DisputeRef: p.DisputeID, At: p.UpdatedAt,
		}}
	case flavour.ChargebackWon:
		// The same dispute as the chargeback's, so that ChargebackWon
		// finds its posting.
		p := decode[sim.Payment](t, ev.Data)
		if p.Status == "charged_back" || p.DisputeID != "dp_"+p.ID {
			t.Fatalf("the sim's won chargeback says %s, dispute %q", p.Status, p.DisputeID)
		}
		switch name {
		case "stripe": // charge.dispute.closed: the event's time
			return []billing.Fact{billing.ChargebackWon{PaymentRef: p.ID, DisputeRef: p.DisputeID, At: ev.CreatedAt}}
		case "paddle": // a chargeback_reverse adjustment of its own, as Paddle reports a win
			return []billing.Fact{billing.ChargebackWon{PaymentRef: p.ID, ReversalRef: "adj_cbr_" + p.ID, Amount: p.Amount, At: ev.CreatedAt}}
		}
		return []billing.Fact{billing.ChargebackWon{PaymentRef: p.ID, DisputeRef: p.DisputeID, At: p.UpdatedAt}}
	case flavour.SubscriptionCreated, flavour.SubscriptionUpdated, flavour.SubscriptionRenewed,
		flavour.SubscriptionCanceled, flavour.SubscriptionEnded:
		s := decode[sim.Subscription](t, ev.Data)
		status := map[string]string{
			flavour.SubscriptionCreated: "active", flavour.SubscriptionUpdated: "active",
			flavour.SubscriptionRenewed: "active", flavour.SubscriptionCanceled: "canceled",
			flavour.SubscriptionEnded: "ended",
		}[ev.Type]
		if s.Status != status {
			t.Fatalf("the sim's %s says %s", ev.Type, s.Status)
		}
		sub := billing.Subscription{
			Ref: s.ID, Customer: s.Customer, Plan: s.Plan, Status: status,
			CurrentPeriodEnd: s.CurrentPeriodEnd, UpdatedAt: s.UpdatedAt,
		}
		if status == "ended" && name != "billete" {
			// Stripe's ended_at, Paddle's canceled_at: when it ended.
			sub.EndedAt = ev.CreatedAt.Truncate(map[string]time.Duration{"stripe": time.Second, "paddle": 1}[name])
		}
		return []billing.Fact{sub}
	case flavour.InvoiceSettled:
		inv := decode[sim.Invoice](t, ev.Data)
		f := billing.Settled{
			InvoiceRef: inv.ID, OrderID: inv.OrderID, Amount: inv.Amount, Currency: inv.Currency,
			ChainRef: inv.ChainRef, At: inv.UpdatedAt,
		}
		switch name {
		case "crypto":
			f.At = ev.CreatedAt // BTCPay's timestamp
		case "stripe", "paddle":
			return nil // fiat sources do not credit crypto invoices
		}
		return []billing.Fact{f}
	}
	return nil // webhook_endpoint.test
}

// Every flavour, every neutral event type: a real simulated provider's
// deliveries, verified by payhook, map to the facts of the story.
func TestFactsFromSimulator(t *testing.T) {
	t.Parallel()
	for _, name := range flavour.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, evs := playStory(t, name)
			if f.Provider() != name {
				t.Fatalf("flavour %s is verified by provider %s", name, f.Provider())
			}
			byType := map[string][]delivered{}
			for _, d := range evs {
				byType[d.neutral.Type] = append(byType[d.neutral.Type], d)
			}
			for _, typ := range flavour.Types() {
				t.Run(typ, func(t *testing.T) {
					t.Parallel()
					if len(byType[typ]) == 0 {
						t.Fatalf("the story emitted no %s", typ)
					}
					for _, d := range byType[typ] {
						got, err := mapping.Facts(f.Provider(), d.stored)
						if err != nil {
							t.Fatalf("%s (%s): %v\npayload: %s", d.stored.Type, d.neutral.ID, err, d.stored.Payload)
						}
						exp := want(t, name, d.neutral)
						if !reflect.DeepEqual(got, exp) {
							t.Errorf("%s (%s):\n got  %s\n want %s\npayload: %s",
								d.stored.Type, d.neutral.ID, show(got), show(exp), d.stored.Payload)
						}
					}
				})
			}
		})
	}
}

// A won dispute's ChargebackWon names the DisputeRef of its payment's
// ChargedBack, as each flavour renders the two, so that billing finds the
// chargeback it reverses (crypto maps neither); Paddle's names the
// payment, whose chargeback its reversal wins.
func TestChargebackWonMatchesItsChargeback(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"billete", "stripe", "paddle"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, evs := playStory(t, name)
			charged := map[string]string{} // payment -> dispute
			won := 0
			for _, d := range evs {
				got, err := mapping.Facts(f.Provider(), d.stored)
				if err != nil {
					t.Fatal(err)
				}
				for _, fact := range got {
					switch fact := fact.(type) {
					case billing.ChargedBack:
						charged[fact.PaymentRef] = fact.DisputeRef
					case billing.ChargebackWon:
						won++
						if _, ok := charged[fact.PaymentRef]; ok && name == "paddle" && fact.ReversalRef != "" {
							continue
						}
						if dp, ok := charged[fact.PaymentRef]; !ok || dp != fact.DisputeRef {
							t.Errorf("won dispute %s of %s; its chargeback's is %q", fact.DisputeRef, fact.PaymentRef, dp)
						}
					}
				}
			}
			if won != 1 {
				t.Errorf("%d won disputes, want 1", won)
			}
		})
	}
}

// The story's subscription events give strictly newer UpdatedAt, one after
// the other, so that the store's "only if newer" guard keeps the last.
func TestSubscriptionUpdatedAtOrdersTheStory(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"billete", "stripe", "paddle"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, evs := playStory(t, name)
			var last time.Time
			var statuses []string
			for _, d := range evs {
				if !strings.HasPrefix(d.neutral.Type, "subscription.") {
					continue
				}
				got, err := mapping.Facts(f.Provider(), d.stored)
				if err != nil || len(got) != 1 {
					t.Fatalf("%s: %v %v", d.stored.Type, show(got), err)
				}
				s := got[0].(billing.Subscription)
				if !s.UpdatedAt.After(last) {
					t.Errorf("%s: UpdatedAt %v not after %v", d.neutral.Type, s.UpdatedAt, last)
				}
				last = s.UpdatedAt
				statuses = append(statuses, s.Status)
			}
			if w := "active active active canceled ended"; strings.Join(statuses, " ") != w {
				t.Errorf("statuses %v, want %s", statuses, w)
			}
		})
	}
}

// show prints facts with their types and times readably.
func show(facts []billing.Fact) string {
	if facts == nil {
		return "nil"
	}
	var parts []string
	for _, f := range facts {
		s := fmt.Sprintf("%T%+v", f, f)
		switch f := f.(type) {
		case billing.Refunded:
			if f.Payment != nil {
				s += fmt.Sprintf(" Payment=%+v", *f.Payment)
			}
		case billing.ChargedBack:
			if f.Payment != nil {
				s += fmt.Sprintf(" Payment=%+v", *f.Payment)
			}
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
