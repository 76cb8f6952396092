// Package check compares what a receiver kept after a simulator run with
// what the simulated provider says it must hold (the sim.Expected that
// `payhook sim run --expect` writes) and lists each difference.
//
// It knows the receiver only through the Receiver interface, so the
// simulator depends on nothing of the server: cmd/payhook reads
// payhook's database into it (`payhook sim check`).
package check

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/sim"
)

// Receiver is what a receiver kept for the run's source. The lookups
// return an error matching payhook.ErrNotFound for what it does not have;
// any other error stops the comparison.
type Receiver interface {
	// Events returns every event stored for the source.
	Events(ctx context.Context) ([]*payhook.Event, error)
	// Payment returns the payment, or crypto settlement, with the
	// provider's id.
	Payment(ctx context.Context, id string) (Payment, error)
	// Order returns the application order with that id.
	Order(ctx context.Context, id string) (Order, error)
	// Subscription returns the subscription with the provider's id.
	Subscription(ctx context.Context, id string) (Subscription, error)
	// ReusedReferenceAlerts returns the subjects (chain references) of
	// the alerts raised for a crypto reference used twice, one per alert.
	ReusedReferenceAlerts(ctx context.Context) ([]string, error)
	// Balances returns the ledger per currency.
	Balances(ctx context.Context) (map[string]Balance, error)
}

// Payment is a payment (or crypto settlement) as the receiver kept it.
type Payment struct {
	Status         string
	Amount         int64
	Currency       string
	RefundedAmount int64
	OrderID        string
}

// Order is an application order as the receiver kept it.
type Order struct {
	Status string // pending | paid
	PaidBy string // the payment or invoice that paid it
}

// Subscription is a subscription as the receiver kept it.
type Subscription struct {
	Status, Plan, Customer string
	CurrentPeriodEnd       time.Time
	Ended                  bool
	// ProviderUpdatedAt is the provider's updated_at of the state kept.
	ProviderUpdatedAt time.Time
}

// Balance is one currency of the ledger.
type Balance struct {
	// Kept is the money the merchant kept: what customers owe it and the
	// crypto it holds.
	Kept int64
	// Sum is the sum of every account, 0 in a balanced ledger.
	Sum int64
}

// Difference is one way the receiver's state differs from the provider's.
type Difference struct {
	// Kind is what differs: event, payment, crypto_invoice,
	// chain_reference, order, subscription, ledger or balance.
	Kind string `json:"kind"`
	// ID is its id: the stored event id, the provider's id, the chain
	// reference, the order id or the currency.
	ID string `json:"id"`
	// Got is what the receiver has ("missing" when it has nothing).
	Got string `json:"got"`
	// Want is what the provider says it must have.
	Want string `json:"want"`
}

// String is the difference as one line for people.
func (d Difference) String() string {
	return fmt.Sprintf("%s %s: %s; want %s", d.Kind, d.ID, d.Got, d.Want)
}

// missing is Difference.Got for what the receiver does not have.
const missing = "missing"

// Compare returns the differences between r and exp, events and billing
// (see Events and Billing); none when r holds the provider's state.
func Compare(ctx context.Context, r Receiver, exp sim.Expected) ([]Difference, error) {
	evs, err := Events(ctx, r, exp)
	if err != nil {
		return nil, err
	}
	bill, err := Billing(ctx, r, exp)
	if err != nil {
		return nil, err
	}
	return append(evs, bill...), nil
}

// Events checks the events: each one the provider delivered (answered
// 2xx) is stored and handled (processed, or ignored when it changes no
// billing state), and each one stored was created by the provider. An
// event the provider never delivered (dropped on purpose) may be stored,
// when the events API brought it back, or not.
func Events(ctx context.Context, r Receiver, exp sim.Expected) ([]Difference, error) {
	stored, err := r.Events(ctx)
	if err != nil {
		return nil, fmt.Errorf("read stored events: %w", err)
	}
	byID := make(map[string]*payhook.Event, len(stored))
	for _, ev := range stored {
		byID[ev.EventID] = ev
	}
	var diffs []Difference
	known := make(map[string]bool, len(exp.Events))
	for _, e := range exp.Events {
		known[e.StoredID] = true
		ev := byID[e.StoredID]
		switch {
		case ev == nil && e.Delivered:
			diffs = append(diffs, Difference{"event", e.StoredID, missing, fmt.Sprintf("stored (%s, delivered)", e.Type)})
		case ev == nil:
		case ev.Status != payhook.StatusProcessed && ev.Status != payhook.StatusIgnored:
			got := fmt.Sprintf("%s after %d attempts", ev.Status, ev.Attempts)
			if ev.LastError != "" {
				got += " (" + ev.LastError + ")"
			}
			diffs = append(diffs, Difference{"event", e.StoredID, got, "processed or ignored"})
		}
	}
	// Stored events the provider did not create, oldest first.
	slices.SortFunc(stored, func(a, b *payhook.Event) int { return cmp.Compare(a.ID, b.ID) })
	for _, ev := range stored {
		if !known[ev.EventID] {
			diffs = append(diffs, Difference{"event", ev.EventID, "stored (" + ev.Type + ")", "no such event from the provider"})
		}
	}
	return diffs, nil
}

// Billing checks the billing state against the provider's final state:
// every payment with its status and refunded amount, every order, every
// subscription, the balances per currency, a ledger that sums to zero,
// and for a reused crypto reference one credit and one alert.
//
// Which of two settlements sharing a chain reference is credited depends
// on which arrives first; either is right, as long as exactly one is.
// Times are compared to the second, the precision of some providers; a
// subscription's updated_at to the microsecond when the receiver has it
// so.
func Billing(ctx context.Context, r Receiver, exp sim.Expected) ([]Difference, error) {
	var diffs []Difference
	diff := func(kind, id, got, want string) { diffs = append(diffs, Difference{kind, id, got, want}) }

	for _, p := range exp.Payments {
		got, err := r.Payment(ctx, p.ID)
		if errors.Is(err, payhook.ErrNotFound) {
			diff("payment", p.ID, missing, describePayment(p.Status, p.Amount, p.Currency, p.RefundedAmount, p.OrderID))
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read payment %s: %w", p.ID, err)
		}
		if got.Status != p.Status || got.RefundedAmount != p.RefundedAmount || got.Amount != p.Amount ||
			got.Currency != p.Currency || got.OrderID != p.OrderID {
			diff("payment", p.ID, describePayment(got.Status, got.Amount, got.Currency, got.RefundedAmount, got.OrderID),
				describePayment(p.Status, p.Amount, p.Currency, p.RefundedAmount, p.OrderID))
		}
	}

	// Crypto: credited invoices are settled, the others rejected; a reused
	// reference may have been won by either of its two invoices.
	orders := map[string]sim.ExpectedOrder{}
	var orderIDs []string
	for _, o := range exp.Orders {
		orders[o.ID] = o
		orderIDs = append(orderIDs, o.ID)
	}
	byRef := map[string][]sim.ExpectedInvoice{}
	var refs []string
	for _, inv := range exp.Invoices {
		if byRef[inv.ChainRef] == nil {
			refs = append(refs, inv.ChainRef)
		}
		byRef[inv.ChainRef] = append(byRef[inv.ChainRef], inv)
	}
	wantBalance := maps.Clone(exp.Balances)
	if wantBalance == nil {
		wantBalance = map[string]int64{}
	}
	var alerts []string
	alertsRead := false
	for _, ref := range refs {
		invs := byRef[ref]
		credited := 0
		for _, inv := range invs {
			got, err := r.Payment(ctx, inv.ID)
			if errors.Is(err, payhook.ErrNotFound) {
				diff("crypto_invoice", inv.ID, missing, fmt.Sprintf("%s %d %s order %s", inv.Status, inv.Amount, inv.Currency, inv.OrderID))
				continue
			} else if err != nil {
				return nil, fmt.Errorf("read crypto invoice %s: %w", inv.ID, err)
			}
			if got.Status == "settled" {
				credited++
				if !inv.Credited { // the receiver chose the other invoice of the pair
					wantBalance[inv.Currency] += inv.Amount
					if _, ok := orders[inv.OrderID]; !ok {
						orderIDs = append(orderIDs, inv.OrderID)
					}
					orders[inv.OrderID] = sim.ExpectedOrder{ID: inv.OrderID, Status: "paid", PaidBy: inv.ID}
				}
			} else if inv.Credited {
				wantBalance[inv.Currency] -= inv.Amount
				if _, ok := orders[inv.OrderID]; !ok {
					orderIDs = append(orderIDs, inv.OrderID)
				}
				orders[inv.OrderID] = sim.ExpectedOrder{ID: inv.OrderID, Status: "pending"}
			}
		}
		if credited != 1 {
			diff("chain_reference", ref, fmt.Sprintf("credited %d times", credited), "credited once")
		}
		if len(invs) > 1 {
			if !alertsRead {
				var err error
				if alerts, err = r.ReusedReferenceAlerts(ctx); err != nil {
					return nil, fmt.Errorf("read alerts: %w", err)
				}
				alertsRead = true
			}
			if n := countOf(alerts, ref); n != 1 {
				diff("chain_reference", ref, fmt.Sprintf("reused, %d alerts", n), "reused, 1 alert")
			}
		}
	}

	for _, id := range orderIDs {
		o := orders[id]
		got, err := r.Order(ctx, id)
		if errors.Is(err, payhook.ErrNotFound) {
			diff("order", id, missing, describeOrder(o.Status, o.PaidBy))
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read order %s: %w", id, err)
		}
		if got.Status != o.Status || (o.Status == "paid" && got.PaidBy != o.PaidBy) {
			diff("order", id, describeOrder(got.Status, got.PaidBy), describeOrder(o.Status, o.PaidBy))
		}
	}

	for _, s := range exp.Subscriptions {
		want := describeSubscription(s.Status, s.Plan, s.Customer, s.CurrentPeriodEnd, s.Status == "ended", s.UpdatedAt)
		got, err := r.Subscription(ctx, s.ID)
		if errors.Is(err, payhook.ErrNotFound) {
			diff("subscription", s.ID, missing, want)
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read subscription %s: %w", s.ID, err)
		}
		endedOK := (s.Status == "ended") == got.Ended
		// The state kept is the provider's last one: its updated_at to the
		// microsecond (what databases keep; the sim's Stripe API gives
		// updated_at_ns), or to the second where the receiver had only
		// whole seconds (Stripe payloads).
		version := s.UpdatedAt.Truncate(time.Microsecond)
		if got.ProviderUpdatedAt.Equal(got.ProviderUpdatedAt.Truncate(time.Second)) {
			version = s.UpdatedAt.Truncate(time.Second)
		}
		if got.Status != s.Status || got.Plan != s.Plan || got.Customer != s.Customer || !endedOK ||
			!got.CurrentPeriodEnd.Truncate(time.Second).Equal(s.CurrentPeriodEnd.Truncate(time.Second)) ||
			!got.ProviderUpdatedAt.Equal(version) {
			diff("subscription", s.ID, describeSubscription(got.Status, got.Plan, got.Customer, got.CurrentPeriodEnd,
				got.Ended, got.ProviderUpdatedAt), want)
		}
	}

	balances, err := r.Balances(ctx)
	if err != nil {
		return nil, fmt.Errorf("read balances: %w", err)
	}
	for _, cur := range slices.Sorted(maps.Keys(balances)) {
		if sum := balances[cur].Sum; sum != 0 {
			diff("ledger", cur, fmt.Sprintf("accounts sum to %d", sum), "0")
		}
	}
	for _, cur := range slices.Sorted(maps.Keys(wantBalance)) {
		if got, want := balances[cur].Kept, wantBalance[cur]; got != want {
			diff("balance", cur, fmt.Sprintf("%d kept", got), fmt.Sprintf("%d kept", want))
		}
	}
	return diffs, nil
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func describePayment(status string, amount int64, currency string, refunded int64, orderID string) string {
	return fmt.Sprintf("%s %d %s refunded %d order %s", status, amount, currency, refunded, orderID)
}

func describeOrder(status, paidBy string) string {
	if paidBy == "" {
		return status
	}
	return status + " by " + paidBy
}

func describeSubscription(status, plan, customer string, periodEnd time.Time, ended bool, updatedAt time.Time) string {
	s := fmt.Sprintf("%s %s %s until %s", status, plan, customer, periodEnd.UTC().Format(time.RFC3339))
	if ended {
		s += " ended"
	}
	return s + " as of " + updatedAt.UTC().Format(time.RFC3339Nano)
}
