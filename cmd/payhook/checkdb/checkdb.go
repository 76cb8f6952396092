// Package checkdb is payhook's database as the simulator's check sees it
// (sim/check.Receiver): the events and billing state of one source.
//
// It lives under cmd because only cmd may depend on both the simulator
// and the server's parts (architecture_test.go); payhook sim check, the
// demo and the deterministic simulation's tests (internal/dst) read
// through it.
package checkdb

import (
	"context"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/sim/check"
	"github.com/payhook/payhook/store"
)

// Receiver reads the events and billing state of Source in DB.
type Receiver struct {
	// DB is payhook's database.
	DB *store.DB
	// Source is the source (the webhook endpoint's name) whose events are
	// read; payments, orders and subscriptions are read by ref within it.
	Source string
}

var _ check.Receiver = Receiver{}

// Events lists every event stored for the source.
func (r Receiver) Events(ctx context.Context) ([]*payhook.Event, error) {
	return r.DB.ListEvents(ctx, store.Filter{Source: r.Source, Limit: 1 << 30})
}

// Payment reads billing's payment (or crypto settlement) ref id; billing's
// not-found error when there is none.
func (r Receiver) Payment(ctx context.Context, id string) (check.Payment, error) {
	p, err := billing.GetPayment(ctx, r.DB, r.Source, id)
	if err != nil {
		return check.Payment{}, err
	}
	return check.Payment{Status: p.Status, Amount: p.Amount, Currency: p.Currency,
		RefundedAmount: p.RefundedAmount, OrderID: p.OrderID}, nil
}

// Order reads billing's order id; billing's not-found error when there is
// none.
func (r Receiver) Order(ctx context.Context, id string) (check.Order, error) {
	o, err := billing.GetOrder(ctx, r.DB, r.Source, id)
	if err != nil {
		return check.Order{}, err
	}
	return check.Order{Status: o.Status, PaidBy: o.PaidBy}, nil
}

// Subscription reads billing's subscription ref id; billing's not-found
// error when there is none.
func (r Receiver) Subscription(ctx context.Context, id string) (check.Subscription, error) {
	s, err := billing.GetSubscription(ctx, r.DB, r.Source, id)
	if err != nil {
		return check.Subscription{}, err
	}
	return check.Subscription{Status: s.Status, Plan: s.Plan, Customer: s.Customer, CurrentPeriodEnd: s.CurrentPeriodEnd,
		Ended: !s.EndedAt.IsZero(), ProviderUpdatedAt: s.ProviderUpdatedAt}, nil
}

// ReusedReferenceAlerts lists the subjects of the crypto_reference_reused
// alerts.
func (r Receiver) ReusedReferenceAlerts(ctx context.Context) ([]string, error) {
	alerts, err := billing.ListAlerts(ctx, r.DB, billing.AlertFilter{Kind: billing.AlertCryptoReferenceReused})
	if err != nil {
		return nil, err
	}
	subjects := make([]string, len(alerts))
	for i, a := range alerts {
		subjects[i] = a.Subject
	}
	return subjects, nil
}

// Balances are those of the source's postings (Kept per currency, and
// the sum of its accounts, zero when it balances): another source's
// money in the same database is not the simulated provider's.
func (r Receiver) Balances(ctx context.Context) (map[string]check.Balance, error) {
	balances, err := billing.SourceBalances(ctx, r.DB, r.Source)
	if err != nil {
		return nil, err
	}
	out := make(map[string]check.Balance, len(balances))
	for cur, accounts := range balances {
		b := check.Balance{Kept: Kept(accounts)}
		for _, n := range accounts {
			b.Sum += n
		}
		out[cur] = b
	}
	return out, nil
}

// Kept is the money kept in one currency of the ledger, given its
// accounts' balances: what the provider owes the merchant plus the crypto
// wallet (minus revenue, the same number). The demo, sim check and payhook
// ledger balances agree through it.
func Kept(accounts map[string]int64) int64 {
	return accounts[billing.AccountReceivable] + accounts[billing.AccountCryptoWallet]
}
