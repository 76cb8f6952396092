package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// The read API: what applications and operators see. Every function reads
// through db.SQL (never while a transaction is open on SQLite) and returns
// errors wrapping payhook.ErrNotFound for what does not exist.

// PaymentView is one payment.
type PaymentView struct {
	Source   string `json:"source"`
	Ref      string `json:"ref"`
	Kind     string `json:"kind"` // fiat | crypto
	OrderID  string `json:"order_id,omitempty"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"`
	// RefundedAmount is what refunds (net of failed ones) took: never more
	// than Amount, however much was asked.
	RefundedAmount int64 `json:"refunded_amount"`
	// ChainRef is the on-chain reference of a crypto payment.
	ChainRef   string    `json:"chain_ref,omitempty"`
	CapturedAt time.Time `json:"captured_at,omitzero"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

const paymentColumns = `source, ref, kind, order_id, amount, currency, status, refunded_amount,
	COALESCE(chain_ref, ''), captured_at, created_at, updated_at`

func scanPayment(row interface{ Scan(...any) error }) (PaymentView, error) {
	var v PaymentView
	err := row.Scan(&v.Source, &v.Ref, &v.Kind, &v.OrderID, &v.Amount, &v.Currency, &v.Status, &v.RefundedAmount,
		&v.ChainRef, store.ScanTime(&v.CapturedAt), store.ScanTime(&v.CreatedAt), store.ScanTime(&v.UpdatedAt))
	return v, err
}

// GetPayment returns the payment of source with the provider reference
// ref, or an error wrapping payhook.ErrNotFound.
func GetPayment(ctx context.Context, db *store.DB, source, ref string) (*PaymentView, error) {
	v, err := scanPayment(db.SQL.QueryRowContext(ctx, `SELECT `+paymentColumns+` FROM payhook_payments
		WHERE source = $1 AND ref = $2`, source, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("payment %s of %s: %w", ref, source, payhook.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get payment %s of %s: %w", ref, source, err)
	}
	return &v, nil
}

// PaymentFilter selects payments for ListPayments. Zero fields match
// everything.
type PaymentFilter struct {
	Source  string
	Kind    string
	Status  string
	OrderID string
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListPayments returns matching payments, newest first.
func ListPayments(ctx context.Context, db *store.DB, f PaymentFilter) ([]PaymentView, error) {
	var q query
	if f.Source != "" {
		q.where("source = $%d", f.Source)
	}
	if f.Kind != "" {
		q.where("kind = $%d", f.Kind)
	}
	if f.Status != "" {
		q.where("status = $%d", f.Status)
	}
	if f.OrderID != "" {
		q.where("order_id = $%d", f.OrderID)
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT `+paymentColumns+` FROM payhook_payments`+q.sql("id DESC", f.Limit), q.args...)
	if err != nil {
		return nil, fmt.Errorf("list payments: %w", err)
	}
	defer rows.Close()
	out := []PaymentView{}
	for rows.Next() {
		v, err := scanPayment(rows)
		if err != nil {
			return nil, fmt.Errorf("list payments: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list payments: %w", err)
	}
	return out, nil
}

// OrderView is one application order of a source: the same order id in
// two sources (a test and a live account) is two orders.
type OrderView struct {
	Source  string `json:"source"`
	OrderID string `json:"order_id"`
	Status  string `json:"status"` // pending | paid
	// PaidBy is the payment or crypto invoice that paid it.
	PaidBy    string    `json:"paid_by,omitempty"`
	PaidAt    time.Time `json:"paid_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
}

const orderColumns = `source, order_id, status, paid_by, paid_at, created_at`

func scanOrder(row interface{ Scan(...any) error }) (OrderView, error) {
	var v OrderView
	err := row.Scan(&v.Source, &v.OrderID, &v.Status, &v.PaidBy, store.ScanTime(&v.PaidAt), store.ScanTime(&v.CreatedAt))
	return v, err
}

// GetOrder returns the order of source with the application's order id
// orderID, or an error wrapping payhook.ErrNotFound.
func GetOrder(ctx context.Context, db *store.DB, source, orderID string) (*OrderView, error) {
	v, err := scanOrder(db.SQL.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM payhook_orders
		WHERE source = $1 AND order_id = $2`, source, orderID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("order %s of %s: %w", orderID, source, payhook.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get order %s of %s: %w", orderID, source, err)
	}
	return &v, nil
}

// OrderFilter selects orders for ListOrders. Zero fields match everything.
type OrderFilter struct {
	Source string
	Status string
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListOrders returns matching orders, newest first.
func ListOrders(ctx context.Context, db *store.DB, f OrderFilter) ([]OrderView, error) {
	var q query
	if f.Source != "" {
		q.where("source = $%d", f.Source)
	}
	if f.Status != "" {
		q.where("status = $%d", f.Status)
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT `+orderColumns+` FROM payhook_orders`+q.sql("id DESC", f.Limit), q.args...)
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	defer rows.Close()
	out := []OrderView{}
	for rows.Next() {
		v, err := scanOrder(rows)
		if err != nil {
			return nil, fmt.Errorf("list orders: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	return out, nil
}

// SubscriptionView is one subscription.
type SubscriptionView struct {
	Source           string    `json:"source"`
	Ref              string    `json:"ref"`
	Customer         string    `json:"customer"`
	Plan             string    `json:"plan"`
	Status           string    `json:"status"`
	CurrentPeriodEnd time.Time `json:"current_period_end,omitzero"`
	// ProviderUpdatedAt is the provider's time of the snapshot shown.
	ProviderUpdatedAt time.Time `json:"provider_updated_at,omitzero"`
	// EndedAt is when the provider says the subscription ended (else the
	// provider time of the snapshot that ended it); zero while not ended.
	EndedAt   time.Time `json:"ended_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

const subscriptionColumns = `source, ref, customer, plan, status, current_period_end, provider_updated_at,
	ended_at, created_at, updated_at`

func scanSubscription(row interface{ Scan(...any) error }) (SubscriptionView, error) {
	var v SubscriptionView
	err := row.Scan(&v.Source, &v.Ref, &v.Customer, &v.Plan, &v.Status, store.ScanTime(&v.CurrentPeriodEnd),
		store.ScanTime(&v.ProviderUpdatedAt), store.ScanTime(&v.EndedAt), store.ScanTime(&v.CreatedAt),
		store.ScanTime(&v.UpdatedAt))
	return v, err
}

// GetSubscription returns the subscription of source with the provider
// reference ref, or an error wrapping payhook.ErrNotFound.
func GetSubscription(ctx context.Context, db *store.DB, source, ref string) (*SubscriptionView, error) {
	v, err := scanSubscription(db.SQL.QueryRowContext(ctx, `SELECT `+subscriptionColumns+` FROM payhook_subscriptions
		WHERE source = $1 AND ref = $2`, source, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("subscription %s of %s: %w", ref, source, payhook.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get subscription %s of %s: %w", ref, source, err)
	}
	return &v, nil
}

// SubscriptionFilter selects subscriptions for ListSubscriptions. Zero
// fields match everything.
type SubscriptionFilter struct {
	Source   string
	Status   string
	Customer string
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListSubscriptions returns matching subscriptions, newest first.
func ListSubscriptions(ctx context.Context, db *store.DB, f SubscriptionFilter) ([]SubscriptionView, error) {
	var q query
	if f.Source != "" {
		q.where("source = $%d", f.Source)
	}
	if f.Status != "" {
		q.where("status = $%d", f.Status)
	}
	if f.Customer != "" {
		q.where("customer = $%d", f.Customer)
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT `+subscriptionColumns+` FROM payhook_subscriptions`+
		q.sql("id DESC", f.Limit), q.args...)
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	defer rows.Close()
	out := []SubscriptionView{}
	for rows.Next() {
		v, err := scanSubscription(rows)
		if err != nil {
			return nil, fmt.Errorf("list subscriptions: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	return out, nil
}

// Balances returns the balance of every account per currency:
// balances[currency][account], in minor units. Each currency's accounts
// sum to zero. The money kept in a currency is its provider_receivable
// plus its crypto_wallet (minus revenue, the same number). The database
// sums, with checked arithmetic: a balance beyond the int64 range (about
// 9,224 captures of payhook.MaxAmount in one currency) is an error ("ledger
// balances: ..."), never a wrapped total.
func Balances(ctx context.Context, db *store.DB) (map[string]map[string]int64, error) {
	rows, err := db.SQL.QueryContext(ctx, `SELECT currency, account, CAST(COALESCE(SUM(amount), 0) AS BIGINT)
		FROM payhook_ledger_entries GROUP BY currency, account`)
	if err != nil {
		return nil, fmt.Errorf("ledger balances: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for rows.Next() {
		var cur, account string
		var sum int64
		if err := rows.Scan(&cur, &account, &sum); err != nil {
			return nil, fmt.Errorf("ledger balances: %w", err)
		}
		if out[cur] == nil {
			out[cur] = map[string]int64{}
		}
		out[cur][account] = sum
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger balances: %w", err)
	}
	return out, nil
}

// PostingView is one ledger posting with its entries.
type PostingView struct {
	ID         int64  `json:"id"`
	Source     string `json:"source"`
	FactKey    string `json:"fact_key"`
	Kind       string `json:"kind"`
	PaymentRef string `json:"payment_ref"`
	// ReversesID is the posting this one reverses; 0 if none.
	ReversesID int64 `json:"reverses_id,omitempty"`
	// Amount is what the posting's entries move on the receivable side
	// (provider_receivable for fiat, crypto_wallet for crypto), signed:
	// positive for captures, settlements, failed refunds and won
	// chargebacks, negative for refunds and chargebacks, 0 when nothing
	// moves (a refund reported after its payment was charged back).
	Amount int64 `json:"amount"`
	// RequestedAmount is the amount the fact names, >= 0: the payment's for
	// a capture, settlement or chargeback, the refund's for a refund and
	// for its failure.
	RequestedAmount int64       `json:"requested_amount"`
	Currency        string      `json:"currency"`
	PostedAt        time.Time   `json:"posted_at"`
	Entries         []EntryView `json:"entries"`
}

// EntryView is one ledger entry: a signed amount on an account.
type EntryView struct {
	Account  string `json:"account"`
	Currency string `json:"currency"`
	Amount   int64  `json:"amount"`
}

// ListPostings returns the postings of source (all sources if empty) and,
// if paymentRef is given, of that payment only, oldest first, with their
// entries.
func ListPostings(ctx context.Context, db *store.DB, source, paymentRef string) ([]PostingView, error) {
	var q query
	if source != "" {
		q.where("p.source = $%d", source)
	}
	if paymentRef != "" {
		q.where("p.payment_ref = $%d", paymentRef)
	}
	where := ""
	if len(q.conds) > 0 {
		where = " WHERE " + strings.Join(q.conds, " AND ")
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT p.id, p.source, p.fact_key, p.kind, p.payment_ref,
		COALESCE(p.reverses_id, 0), p.amount, p.requested_amount, p.currency, p.posted_at,
		COALESCE(e.account, ''), COALESCE(e.currency, ''), COALESCE(e.amount, 0)
		FROM payhook_ledger_postings p LEFT JOIN payhook_ledger_entries e ON e.posting_id = p.id`+where+`
		ORDER BY p.id, e.id`, q.args...)
	if err != nil {
		return nil, fmt.Errorf("list postings: %w", err)
	}
	defer rows.Close()
	out := []PostingView{}
	for rows.Next() {
		var p PostingView
		var e EntryView
		if err := rows.Scan(&p.ID, &p.Source, &p.FactKey, &p.Kind, &p.PaymentRef, &p.ReversesID, &p.Amount,
			&p.RequestedAmount, &p.Currency, store.ScanTime(&p.PostedAt), &e.Account, &e.Currency, &e.Amount); err != nil {
			return nil, fmt.Errorf("list postings: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].ID != p.ID {
			p.Entries = []EntryView{}
			out = append(out, p)
		}
		if e.Account != "" {
			last := &out[len(out)-1]
			last.Entries = append(last.Entries, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list postings: %w", err)
	}
	return out, nil
}
