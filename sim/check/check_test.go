package check

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/sim"
)

// memory is a receiver's state held in maps.
type memory struct {
	events   []*payhook.Event
	payments map[string]Payment
	orders   map[string]Order
	subs     map[string]Subscription
	alerts   []string
	balances map[string]Balance
}

func notFound(what, id string) error { return fmt.Errorf("%s %s: %w", what, id, payhook.ErrNotFound) }

func (m *memory) Events(context.Context) ([]*payhook.Event, error) { return m.events, nil }
func (m *memory) Payment(_ context.Context, id string) (Payment, error) {
	p, ok := m.payments[id]
	if !ok {
		return p, notFound("payment", id)
	}
	return p, nil
}
func (m *memory) Order(_ context.Context, id string) (Order, error) {
	o, ok := m.orders[id]
	if !ok {
		return o, notFound("order", id)
	}
	return o, nil
}
func (m *memory) Subscription(_ context.Context, id string) (Subscription, error) {
	s, ok := m.subs[id]
	if !ok {
		return s, notFound("subscription", id)
	}
	return s, nil
}
func (m *memory) ReusedReferenceAlerts(context.Context) ([]string, error) { return m.alerts, nil }
func (m *memory) Balances(context.Context) (map[string]Balance, error)    { return m.balances, nil }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// expected is a small run: one payment partly refunded, two invoices
// sharing a chain reference (the first credited), one subscription, and
// one event dropped on purpose.
func expected() sim.Expected {
	return sim.Expected{
		Events: []sim.ExpectedEvent{
			{ID: "e1", StoredID: "evt_1", Type: "checkout.completed", Delivered: true},
			{ID: "e2", StoredID: "evt_2", Type: "payment.refunded", Delivered: true},
			{ID: "e3", StoredID: "evt_3", Type: "invoice.settled", Delivered: false},
		},
		Payments: []sim.Payment{{ID: "pay_1", Amount: 1000, Currency: "USD", Status: "partially_refunded", RefundedAmount: 300, OrderID: "ord_1"}},
		Orders: []sim.ExpectedOrder{
			{ID: "ord_1", Status: "paid", PaidBy: "pay_1"},
			{ID: "ord_2", Status: "paid", PaidBy: "inv_1"},
			{ID: "ord_3", Status: "pending"},
		},
		Invoices: []sim.ExpectedInvoice{
			{Invoice: sim.Invoice{ID: "inv_1", Amount: 50, Currency: "BTC", Status: "settled", OrderID: "ord_2", ChainRef: "tx_1"}, Credited: true},
			{Invoice: sim.Invoice{ID: "inv_2", Amount: 70, Currency: "BTC", Status: "settled", OrderID: "ord_3", ChainRef: "tx_1"}, Credited: false},
		},
		Subscriptions: []sim.Subscription{{ID: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active",
			CurrentPeriodEnd: t0.Add(720 * time.Hour), UpdatedAt: t0}},
		Balances: map[string]int64{"USD": 700, "BTC": 50},
	}
}

// agreeing is the receiver's state that matches expected.
func agreeing() *memory {
	return &memory{
		events: []*payhook.Event{
			{ID: 1, EventID: "evt_1", Type: "checkout.completed", Status: payhook.StatusProcessed},
			{ID: 2, EventID: "evt_2", Type: "payment.refunded", Status: payhook.StatusProcessed},
		},
		payments: map[string]Payment{
			"pay_1": {Status: "partially_refunded", Amount: 1000, Currency: "USD", RefundedAmount: 300, OrderID: "ord_1"},
			"inv_1": {Status: "settled", Amount: 50, Currency: "BTC", OrderID: "ord_2"},
			"inv_2": {Status: "rejected", Amount: 70, Currency: "BTC", OrderID: "ord_3"},
		},
		orders: map[string]Order{"ord_1": {"paid", "pay_1"}, "ord_2": {"paid", "inv_1"}, "ord_3": {"pending", ""}},
		subs: map[string]Subscription{"sub_1": {Status: "active", Plan: "pro", Customer: "cus_1",
			CurrentPeriodEnd: t0.Add(720 * time.Hour).Truncate(time.Second), ProviderUpdatedAt: t0.Truncate(time.Microsecond)}},
		alerts:   []string{"tx_1"},
		balances: map[string]Balance{"USD": {Kept: 700}, "BTC": {Kept: 50}},
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(m *memory)
		want   []Difference
	}{
		{"agreeing", func(*memory) {}, nil},
		{"the dropped event stored too (backfilled)", func(m *memory) {
			m.events = append(m.events, &payhook.Event{ID: 3, EventID: "evt_3", Type: "invoice.settled", Status: payhook.StatusProcessed})
		}, nil},
		{"the other invoice of the pair credited", func(m *memory) {
			m.payments["inv_1"], m.payments["inv_2"] = Payment{Status: "rejected"}, Payment{Status: "settled"}
			m.orders["ord_2"], m.orders["ord_3"] = Order{"pending", ""}, Order{"paid", "inv_2"}
			m.balances["BTC"] = Balance{Kept: 70}
		}, nil},
		{"stripe's whole seconds", func(m *memory) {
			s := m.subs["sub_1"]
			s.ProviderUpdatedAt = t0.Truncate(time.Second)
			m.subs["sub_1"] = s
		}, nil},
		{"an event missing", func(m *memory) { m.events = m.events[1:] },
			[]Difference{{"event", "evt_1", "missing", "stored (checkout.completed, delivered)"}}},
		{"an event failed", func(m *memory) {
			m.events[1].Status, m.events[1].Attempts, m.events[1].LastError = payhook.StatusFailed, 3, "boom"
		},
			[]Difference{{"event", "evt_2", "failed after 3 attempts (boom)", "processed or ignored"}}},
		{"an event the provider did not create", func(m *memory) {
			m.events = append(m.events, &payhook.Event{ID: 9, EventID: "evt_forged", Type: "x"})
		}, []Difference{{"event", "evt_forged", "stored (x)", "no such event from the provider"}}},
		{"a payment missing", func(m *memory) { delete(m.payments, "pay_1") },
			[]Difference{{"payment", "pay_1", "missing", "partially_refunded 1000 USD refunded 300 order ord_1"}}},
		{"a refund applied twice", func(m *memory) { m.payments["pay_1"] = Payment{"partially_refunded", 1000, "USD", 600, "ord_1"} },
			[]Difference{{"payment", "pay_1", "partially_refunded 1000 USD refunded 600 order ord_1",
				"partially_refunded 1000 USD refunded 300 order ord_1"}}},
		{"a reference credited twice", func(m *memory) {
			m.payments["inv_2"] = Payment{Status: "settled"}
			m.orders["ord_3"] = Order{"paid", "inv_2"}
			m.balances["BTC"] = Balance{Kept: 120}
		}, []Difference{
			{"chain_reference", "tx_1", "credited 2 times", "credited once"},
		}},
		{"no alert for the reused reference", func(m *memory) { m.alerts = nil },
			[]Difference{{"chain_reference", "tx_1", "reused, 0 alerts", "reused, 1 alert"}}},
		{"an order left pending", func(m *memory) { m.orders["ord_1"] = Order{"pending", ""} },
			[]Difference{{"order", "ord_1", "pending", "paid by pay_1"}}},
		{"a subscription's older state", func(m *memory) {
			s := m.subs["sub_1"]
			s.Plan, s.ProviderUpdatedAt = "basic", t0.Add(-time.Hour).Truncate(time.Microsecond)
			m.subs["sub_1"] = s
		}, []Difference{{"subscription", "sub_1",
			"active basic cus_1 until 2026-03-31T12:00:00Z as of 2026-03-01T11:00:00.123456Z",
			"active pro cus_1 until 2026-03-31T12:00:00Z as of 2026-03-01T12:00:00.123456789Z"}}},
		{"an unbalanced ledger and a balance off", func(m *memory) { m.balances["USD"] = Balance{Kept: 1000, Sum: 300} },
			[]Difference{{"ledger", "USD", "accounts sum to 300", "0"}, {"balance", "USD", "1000 kept", "700 kept"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := agreeing()
			tc.change(m)
			got, err := Compare(context.Background(), m, expected())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Compare = %q\nwant      %q", got, tc.want)
			}
		})
	}
}

// TestCompareStopsOnReadErrors: an error other than not found is the
// comparison's error, not a difference.
func TestCompareStopsOnReadErrors(t *testing.T) {
	t.Parallel()
	m := agreeing()
	if _, err := Compare(context.Background(), brokenPayments{m}, expected()); err == nil {
		t.Fatal("Compare with a failing read: no error")
	}
}

type brokenPayments struct{ *memory }

func (brokenPayments) Payment(context.Context, string) (Payment, error) {
	return Payment{}, fmt.Errorf("connection reset")
}

func TestDifferenceString(t *testing.T) {
	t.Parallel()
	d := Difference{"event", "evt_1", "missing", "stored (checkout.completed, delivered)"}
	if got, want := d.String(), "event evt_1: missing; want stored (checkout.completed, delivered)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
