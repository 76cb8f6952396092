package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/payhook/payhook/outbox"
)

// The facts billing tells the application (package outbox) are written
// here, each where a unique index or a conditional UPDATE of the billing
// change said it happened for the first time; their ids come from the
// business fact, so the outbox's own unique index makes each one once
// even where billing could not tell (a fact written twice is dropped).

// emit writes the outbox fact of type typ about subject, whose business
// identity is key, in tx, and records what it wrote.
func (tx *Tx) emit(ctx context.Context, out *Outcome, typ, source, subject, key string, at time.Time, data any) error {
	f, err := tx.fact(typ, source, subject, key, at, data)
	if err != nil {
		return err
	}
	e, err := outbox.Emit(ctx, tx.db, tx.Tx, tx.box, f, tx.now)
	if err != nil {
		return err
	}
	tx.record(out, f, e)
	return nil
}

// fact makes the outbox fact emit writes: at is the transaction's time
// when zero.
func (tx *Tx) fact(typ, source, subject, key string, at time.Time, data any) (outbox.Fact, error) {
	if at.IsZero() {
		at = tx.now
	}
	return outbox.NewFact(typ, source, subject, key, at, data)
}

// record keeps what writing f wrote: its deliveries and untold fact for
// the caller, and f in out when it is new.
func (tx *Tx) record(out *Outcome, f outbox.Fact, e outbox.Emitted) {
	tx.deliveries = append(tx.deliveries, e.Deliveries...)
	if e.Untold != nil {
		tx.untold = append(tx.untold, *e.Untold)
	}
	if e.Written && out != nil {
		out.Facts = append(out.Facts, f.ID)
	}
}

func (a *applier) emit(ctx context.Context, typ, subject, key string, at time.Time, data any) error {
	return a.tx.emit(ctx, a.out, typ, a.source, subject, key, at, data)
}

// The data of each fact type, as docs/facts.md shows them.
type (
	orderPaidData struct {
		OrderID string `json:"order_id"`
		PaidBy  string `json:"paid_by"`
		Kind    string `json:"kind"`
	}
	paymentData struct {
		Payment  string    `json:"payment"`
		OrderID  string    `json:"order_id,omitempty"`
		Amount   int64     `json:"amount"`
		Currency string    `json:"currency"`
		At       time.Time `json:"captured_at,omitzero"`
	}
	refundData struct {
		Payment  string `json:"payment"`
		Refund   string `json:"refund"`
		Amount   int64  `json:"amount,omitempty"`
		Currency string `json:"currency,omitempty"`
		// Refunded is what the payment's refunds took after this one.
		Refunded int64 `json:"refunded_amount,omitempty"`
	}
	disputeData struct {
		Payment  string `json:"payment"`
		Dispute  string `json:"dispute"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	settledData struct {
		Invoice  string `json:"invoice"`
		OrderID  string `json:"order_id,omitempty"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		ChainRef string `json:"chain_ref"`
	}
	subscriptionData struct {
		Subscription     string    `json:"subscription"`
		Customer         string    `json:"customer"`
		Plan             string    `json:"plan"`
		Status           string    `json:"status"`
		CurrentPeriodEnd time.Time `json:"current_period_end,omitzero"`
		EndedAt          time.Time `json:"ended_at,omitzero"`
	}
	alertData struct {
		Kind    string `json:"kind"`
		Subject string `json:"subject"`
		Message string `json:"message"`
	}
)

func subscriptionFact(f Subscription, endedAt time.Time) subscriptionData {
	return subscriptionData{Subscription: f.Ref, Customer: f.Customer, Plan: f.Plan, Status: f.Status,
		CurrentPeriodEnd: f.CurrentPeriodEnd, EndedAt: endedAt}
}

// snapshotKey names a subscription snapshot: a subscription moves to a
// given snapshot at most once (snapshots only replace lower ones).
func snapshotKey(f Subscription, endedAt time.Time) string {
	return fmt.Sprintf("%s@%d/%s/%s/%s/%d/%d", f.Ref, f.UpdatedAt.UnixNano(), f.Status, f.Plan, f.Customer,
		f.CurrentPeriodEnd.UnixNano(), endedAt.UnixNano())
}
