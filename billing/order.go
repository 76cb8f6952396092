package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

func (a *applier) orderPaid(ctx context.Context, f OrderPaid) error {
	// Lock the payment, if stored, so that its order id and kind cannot
	// change under the decision (captures of it lock it too). A payment
	// this call locked already (the event's capture) stays locked.
	if !a.locked[f.PaymentRef] {
		if _, err := a.lockPayment(ctx, f.PaymentRef); err != nil {
			return err
		}
	}
	return a.payOrder(ctx, f.OrderID, f.PaymentRef, false)
}

// payOrder creates the order of the source as pending if unknown, then
// marks it paid by the fiat payment (or other reference) paidBy only if
// pending. The first time paidBy tries to pay an order paid by another
// payment, it raises AlertOrderPaidTwice; when paidBy is a stored payment
// that cannot pay it (see claimOrder), AlertOrderPaymentMismatch. mayPay
// says this transaction holds paidBy locked as a fiat payment of orderID
// (the capture that just recorded it): nothing to check.
func (a *applier) payOrder(ctx context.Context, orderID, paidBy string, mayPay bool) error {
	if a.claimed[orderID] == paidBy {
		// This call marked it paid by paidBy (the event's capture), and
		// holds it locked: paying it again by the same payment changes
		// nothing and raises nothing.
		return nil
	}
	ok, other, err := a.claimOrder(ctx, orderID, paidBy, "fiat", mayPay)
	switch {
	case err != nil || ok:
		return err
	case other == "":
		return a.alert(ctx, AlertOrderPaymentMismatch, orderID, paidBy,
			fmt.Sprintf("order %s: payment %s cannot pay it (another kind, or recorded for another order); the order is left as it was", orderID, paidBy))
	case other == paidBy:
		return nil
	}
	return a.alert(ctx, AlertOrderPaidTwice, orderID, paidBy,
		fmt.Sprintf("order %s is paid by %s; payment %s paid it again", orderID, other, paidBy))
}

// claimOrder marks the order of the source paid by paidBy if pending and
// paidBy may pay it: a reference that is no stored payment, or a stored
// payment of kind whose order id is empty or orderID (known when mayPay);
// one upsert's WHERE decides, on the order as it is once any other claim
// of it ended, and creates the order if unknown (pending when paidBy may
// not pay it). Else it returns who paid the order: "" when it is still
// pending, because paidBy may not pay it.
func (a *applier) claimOrder(ctx context.Context, orderID, paidBy, kind string, mayPay bool) (claimed bool, paidByBefore string, err error) {
	var status string
	if mayPay {
		err = a.tx.QueryRowContext(ctx, `INSERT INTO payhook_orders (source, order_id, status, paid_by, paid_at, created_at)
			VALUES ($1, $2, 'paid', $3, $4, $4)
			ON CONFLICT (source, order_id) DO UPDATE SET status = 'paid', paid_by = excluded.paid_by, paid_at = excluded.paid_at
				WHERE payhook_orders.status = 'pending'
			RETURNING status`,
			a.source, orderID, paidBy, a.t(a.tx.now)).Scan(&status)
	} else {
		at := "$4"
		if a.tx.db.Engine == store.Postgres {
			at = "CAST($4 AS TIMESTAMPTZ)"
		}
		// m is read once (MATERIALIZED: not once per use).
		err = a.tx.QueryRowContext(ctx, `WITH m AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM payhook_payments p
				WHERE p.source = $1 AND p.ref = $3 AND (p.kind <> $5 OR (p.order_id <> '' AND p.order_id <> $2))) AS bad)
			INSERT INTO payhook_orders (source, order_id, status, paid_by, paid_at, created_at)
			SELECT $1, $2, CASE WHEN m.bad THEN 'pending' ELSE 'paid' END, CASE WHEN m.bad THEN '' ELSE $3 END,
				CASE WHEN m.bad THEN NULL ELSE `+at+` END, `+at+`
			FROM m
			WHERE TRUE
			ON CONFLICT (source, order_id) DO UPDATE SET status = 'paid', paid_by = excluded.paid_by, paid_at = excluded.paid_at
				WHERE payhook_orders.status = 'pending' AND excluded.status = 'paid'
			RETURNING status`,
			a.source, orderID, paidBy, a.t(a.tx.now), kind).Scan(&status)
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, "", fmt.Errorf("mark order %s paid: %w", orderID, err)
	}
	if err == nil && status == "pending" {
		return false, "", nil // created pending: paidBy may not pay it
	}
	if err == nil {
		a.out.OrdersPaid = append(a.out.OrdersPaid, orderID)
		if a.claimed == nil {
			a.claimed = map[string]string{}
		}
		a.claimed[orderID] = paidBy
		err := a.emit(ctx, outbox.OrderPaid, orderID, orderID, a.tx.now,
			orderPaidData{OrderID: orderID, PaidBy: paidBy, Kind: kind})
		return err == nil, paidBy, err
	}
	err = a.tx.QueryRowContext(ctx, `SELECT CASE WHEN status = 'pending' THEN '' ELSE paid_by END
		FROM payhook_orders WHERE source = $1 AND order_id = $2`,
		a.source, orderID).Scan(&paidByBefore)
	if err != nil {
		return false, "", fmt.Errorf("read order %s: %w", orderID, err)
	}
	return false, paidByBefore, nil
}

// heardOfOrder creates the order of the source as pending unless it exists.
func (a *applier) heardOfOrder(ctx context.Context, orderID string) error {
	if _, err := a.tx.ExecContext(ctx, `INSERT INTO payhook_orders (source, order_id, status, paid_by, created_at)
		VALUES ($1, $2, 'pending', '', $3) ON CONFLICT (source, order_id) DO NOTHING`, a.source, orderID, a.t(a.tx.now)); err != nil {
		return fmt.Errorf("insert order %s: %w", orderID, err)
	}
	return nil
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

func scanOrder(row scanner) (OrderView, error) {
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
	return list(ctx, db, "list orders", scanOrder,
		`SELECT `+orderColumns+` FROM payhook_orders`+q.sql("id DESC", f.Limit), q.args...)
}

// OrderStatuses lists the statuses an order can have.
var OrderStatuses = []string{"pending", "paid"}

// LookupOrder returns the order with the application's order id orderID;
// source empty as for LookupPayment (the same order id in several
// sources, such as a test and a live account, is an *AmbiguousError).
func LookupOrder(ctx context.Context, db *store.DB, source, orderID string) (*OrderView, error) {
	if source == "" {
		s, err := onlySource(ctx, db, "order", "payhook_orders", "order_id", orderID)
		if err != nil {
			return nil, err
		}
		source = s
	}
	return GetOrder(ctx, db, source, orderID)
}
