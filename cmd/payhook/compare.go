package main

import (
	"context"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/check"
	"github.com/payhook/payhook/store"
)

// dbReceiver is payhook's database as the simulator's check sees it: the
// events and billing state of one source.
type dbReceiver struct {
	db     *store.DB
	source string
}

var _ check.Receiver = dbReceiver{}

// Events lists every event stored for the source.
func (r dbReceiver) Events(ctx context.Context) ([]*payhook.Event, error) {
	return r.db.ListEvents(ctx, store.Filter{Source: r.source, Limit: 1 << 30})
}

// Payment reads billing's payment (or crypto settlement) ref id.
func (r dbReceiver) Payment(ctx context.Context, id string) (check.Payment, error) {
	p, err := billing.GetPayment(ctx, r.db, r.source, id)
	if err != nil {
		return check.Payment{}, err
	}
	return check.Payment{Status: p.Status, Amount: p.Amount, Currency: p.Currency,
		RefundedAmount: p.RefundedAmount, OrderID: p.OrderID}, nil
}

// Order reads billing's order id.
func (r dbReceiver) Order(ctx context.Context, id string) (check.Order, error) {
	o, err := billing.GetOrder(ctx, r.db, r.source, id)
	if err != nil {
		return check.Order{}, err
	}
	return check.Order{Status: o.Status, PaidBy: o.PaidBy}, nil
}

// Subscription reads billing's subscription ref id.
func (r dbReceiver) Subscription(ctx context.Context, id string) (check.Subscription, error) {
	s, err := billing.GetSubscription(ctx, r.db, r.source, id)
	if err != nil {
		return check.Subscription{}, err
	}
	return check.Subscription{Status: s.Status, Plan: s.Plan, Customer: s.Customer, CurrentPeriodEnd: s.CurrentPeriodEnd,
		Ended: !s.EndedAt.IsZero(), ProviderUpdatedAt: s.ProviderUpdatedAt}, nil
}

// ReusedReferenceAlerts lists the subjects of the crypto_reference_reused alerts.
func (r dbReceiver) ReusedReferenceAlerts(ctx context.Context) ([]string, error) {
	alerts, err := billing.ListAlerts(ctx, r.db, billing.AlertFilter{Kind: billing.AlertCryptoReferenceReused})
	if err != nil {
		return nil, err
	}
	subjects := make([]string, len(alerts))
	for i, a := range alerts {
		subjects[i] = a.Subject
	}
	return subjects, nil
}

// Balances are the whole ledger's, every source together: what the
// merchant kept is the provider's receivable plus the crypto wallet.
func (r dbReceiver) Balances(ctx context.Context) (map[string]check.Balance, error) {
	balances, err := billing.Balances(ctx, r.db)
	if err != nil {
		return nil, err
	}
	out := make(map[string]check.Balance, len(balances))
	for cur, accounts := range balances {
		b := check.Balance{Kept: keptOf(accounts)}
		for _, n := range accounts {
			b.Sum += n
		}
		out[cur] = b
	}
	return out, nil
}

// compareBilling returns, one line each, the differences between
// payhook's billing state for source and the provider's final state
// (check.Billing); none when payhook agrees.
func compareBilling(ctx context.Context, db *store.DB, source string, exp sim.Expected) ([]string, error) {
	diffs, err := check.Billing(ctx, dbReceiver{db, source}, exp)
	if err != nil {
		return nil, err
	}
	lines := make([]string, len(diffs))
	for i, d := range diffs {
		lines[i] = d.String()
	}
	return lines, nil
}
