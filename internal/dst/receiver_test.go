package dst

import (
	"context"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/sim/check"
	"github.com/payhook/payhook/store"
)

// dbReceiver is payhook's database as the simulator's check sees it (as
// cmd/payhook's, which a test cannot import).
type dbReceiver struct {
	db     *store.DB
	source string
}

var _ check.Receiver = dbReceiver{}

func (r dbReceiver) Events(ctx context.Context) ([]*payhook.Event, error) {
	return r.db.ListEvents(ctx, store.Filter{Source: r.source, Limit: 1 << 30})
}

func (r dbReceiver) Payment(ctx context.Context, id string) (check.Payment, error) {
	p, err := billing.GetPayment(ctx, r.db, r.source, id)
	if err != nil {
		return check.Payment{}, err
	}
	return check.Payment{Status: p.Status, Amount: p.Amount, Currency: p.Currency,
		RefundedAmount: p.RefundedAmount, OrderID: p.OrderID}, nil
}

func (r dbReceiver) Order(ctx context.Context, id string) (check.Order, error) {
	o, err := billing.GetOrder(ctx, r.db, r.source, id)
	if err != nil {
		return check.Order{}, err
	}
	return check.Order{Status: o.Status, PaidBy: o.PaidBy}, nil
}

func (r dbReceiver) Subscription(ctx context.Context, id string) (check.Subscription, error) {
	s, err := billing.GetSubscription(ctx, r.db, r.source, id)
	if err != nil {
		return check.Subscription{}, err
	}
	return check.Subscription{Status: s.Status, Plan: s.Plan, Customer: s.Customer, CurrentPeriodEnd: s.CurrentPeriodEnd,
		Ended: !s.EndedAt.IsZero(), ProviderUpdatedAt: s.ProviderUpdatedAt}, nil
}

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

func (r dbReceiver) Balances(ctx context.Context) (map[string]check.Balance, error) {
	balances, err := billing.Balances(ctx, r.db)
	if err != nil {
		return nil, err
	}
	out := make(map[string]check.Balance, len(balances))
	for cur, accounts := range balances {
		b := check.Balance{Kept: accounts[billing.AccountReceivable] + accounts[billing.AccountCryptoWallet]}
		for _, n := range accounts {
			b.Sum += n
		}
		out[cur] = b
	}
	return out, nil
}
