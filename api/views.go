package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/store"
)

// The views below are shared by the HTTP API and the payhook CLI, so that
// `payhook payments show --json` prints what GET /api/v1/payments/{id}
// answers.

// ErrAmbiguous: a provider reference (or an application's order id)
// exists in several sources and no source was given. The API answers it with 409; test for it with
// errors.Is and read the sources with errors.As(*AmbiguousError).
var ErrAmbiguous = errors.New("ambiguous reference")

// AmbiguousError says which sources hold the reference.
type AmbiguousError struct {
	// What is "payment", "subscription" or "order".
	What    string
	Ref     string
	Sources []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s %s exists in several sources: %s", e.What, e.Ref, strings.Join(e.Sources, ", "))
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// PaymentDetail is a payment with its ledger postings (oldest first).
type PaymentDetail struct {
	billing.PaymentView
	Postings []billing.PostingView `json:"postings"`
}

// Payment returns the payment with the provider reference ref, with its
// postings. With source empty it looks the reference up in every source:
// none is an error wrapping payhook.ErrNotFound, several an
// *AmbiguousError.
func Payment(ctx context.Context, db *store.DB, source, ref string) (*PaymentDetail, error) {
	if source == "" {
		s, err := onlySource(ctx, db, "payment", "payhook_payments", "ref", ref)
		if err != nil {
			return nil, err
		}
		source = s
	}
	p, err := billing.GetPayment(ctx, db, source, ref)
	if err != nil {
		return nil, err
	}
	ps, err := billing.ListPostings(ctx, db, source, ref)
	if err != nil {
		return nil, err
	}
	return &PaymentDetail{PaymentView: *p, Postings: ps}, nil
}

// Subscription returns the subscription with the provider reference ref;
// source empty as for Payment.
func Subscription(ctx context.Context, db *store.DB, source, ref string) (*billing.SubscriptionView, error) {
	if source == "" {
		s, err := onlySource(ctx, db, "subscription", "payhook_subscriptions", "ref", ref)
		if err != nil {
			return nil, err
		}
		source = s
	}
	return billing.GetSubscription(ctx, db, source, ref)
}

// Order returns the order with the application's order id orderID; source
// empty as for Payment (the same order id in several sources, such as a
// test and a live account, is an *AmbiguousError).
func Order(ctx context.Context, db *store.DB, source, orderID string) (*billing.OrderView, error) {
	if source == "" {
		s, err := onlySource(ctx, db, "order", "payhook_orders", "order_id", orderID)
		if err != nil {
			return nil, err
		}
		source = s
	}
	return billing.GetOrder(ctx, db, source, orderID)
}

// onlySource returns the one source whose table holds ref in column. table
// and column are payhook's own names, never user input.
func onlySource(ctx context.Context, db *store.DB, what, table, column, ref string) (string, error) {
	rows, err := db.SQL.QueryContext(ctx, `SELECT DISTINCT source FROM `+table+` WHERE `+column+` = $1 ORDER BY source`, ref)
	if err != nil {
		return "", fmt.Errorf("find %s %s: %w", what, ref, err)
	}
	defer rows.Close()
	var sources []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", fmt.Errorf("find %s %s: %w", what, ref, err)
		}
		sources = append(sources, s)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("find %s %s: %w", what, ref, err)
	}
	switch len(sources) {
	case 0:
		return "", fmt.Errorf("%s %s: %w", what, ref, payhook.ErrNotFound)
	case 1:
		return sources[0], nil
	}
	return "", &AmbiguousError{What: what, Ref: ref, Sources: sources}
}

// CurrencyBalance is the ledger of one currency: the balance of every
// account in minor units, and their sum, which is always 0 (a client can
// check it).
type CurrencyBalance struct {
	Accounts map[string]int64 `json:"accounts"`
	Sum      int64            `json:"sum"`
}

// BalancesView is the ledger's balances per currency.
type BalancesView struct {
	Balances map[string]CurrencyBalance `json:"balances"`
}

// Currencies returns the currencies, sorted.
func (b BalancesView) Currencies() []string {
	out := make([]string, 0, len(b.Balances))
	for c := range b.Balances {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Unbalanced returns the currencies whose accounts do not sum to zero
// (none, unless the ledger is broken), sorted.
func (b BalancesView) Unbalanced() []string {
	var out []string
	for _, c := range b.Currencies() {
		if b.Balances[c].Sum != 0 {
			out = append(out, c)
		}
	}
	return out
}

// Balances returns the ledger's balances per currency and account, with
// each currency's sum.
func Balances(ctx context.Context, db *store.DB) (BalancesView, error) {
	bal, err := billing.Balances(ctx, db)
	if err != nil {
		return BalancesView{}, err
	}
	out := BalancesView{Balances: make(map[string]CurrencyBalance, len(bal))}
	for cur, accounts := range bal {
		var sum int64
		for _, v := range accounts {
			sum += v
		}
		out.Balances[cur] = CurrencyBalance{Accounts: accounts, Sum: sum}
	}
	return out, nil
}

// EventView is a stored event with its payload inline as JSON (it always
// is JSON for stored events; a payload that is not is left out).
type EventView struct {
	*payhook.Event
	Payload json.RawMessage `json:"payload,omitempty"`
}

// EventViews returns the views of evs, never nil.
func EventViews(evs []*payhook.Event) []EventView {
	out := make([]EventView, len(evs))
	for i, ev := range evs {
		out[i] = EventView{Event: ev}
		if json.Valid(ev.Payload) {
			out[i].Payload = ev.Payload
		}
	}
	return out
}

// PaymentStatuses lists the statuses a payment can have.
var PaymentStatuses = []string{"succeeded", "partially_refunded", "refunded", "charged_back", "settled", "rejected"}

// OrderStatuses lists the statuses an order can have.
var OrderStatuses = []string{"pending", "paid"}
