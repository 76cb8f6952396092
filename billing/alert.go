package billing

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// Alert kinds raised by Apply. Apply raises an alert only for something
// new: each distinct occurrence (this payment paying that order, this
// snapshot of that payment...) counts once, so a duplicate or a replay of
// the same event never counts again nor makes an acknowledged alert
// unacknowledged.
const (
	// AlertCryptoReferenceReused: a settlement used a chain reference
	// already bound to another credited invoice; subject is the chain ref.
	AlertCryptoReferenceReused = "crypto_reference_reused"
	// AlertCryptoSecondReference: an invoice already settled was settled
	// again with another chain reference; subject is the invoice.
	AlertCryptoSecondReference = "crypto_second_reference"
	// AlertOrderPaidTwice: a second payment paid an order already paid by
	// another; subject is the order id.
	AlertOrderPaidTwice = "order_paid_twice"
	// AlertOrderPaymentMismatch: an OrderPaid names a stored payment that
	// cannot pay the order: of another kind (a crypto invoice pays its
	// order by its settlement), or one that records another order. The
	// order stays as it was; subject is the order id.
	AlertOrderPaymentMismatch = "order_payment_mismatch"
	// AlertPaymentMismatch: a snapshot of a payment (the payment a refund
	// or chargeback event carries, or a capture reported again) disagrees
	// with the stored payment on its amount or currency. The stored row
	// (the first capture) stays; subject is the payment ref.
	AlertPaymentMismatch = "payment_mismatch"
	// AlertPaymentKindMismatch: an event treats a payment as another kind
	// than the stored one (a refund, chargeback or capture of a crypto
	// payment, whose settlement is final; a settlement of a fiat
	// payment). Nothing changes; subject is the payment ref.
	AlertPaymentKindMismatch = "payment_kind_mismatch"
	// AlertChargebackReversalAmbiguous: a chargeback reversal, which
	// names no chargeback (Paddle's chargeback_reverse), was bound to
	// the oldest of several chargebacks of the payment alike (the same
	// amount, none or all won by their own record): if the provider won
	// another, that one's own record wins it too later. Subject is the
	// payment ref, raised once per reversal.
	AlertChargebackReversalAmbiguous = "chargeback_reversal_ambiguous"
	// AlertRefundExceedsPayment: refunds of a fiat payment (net of failed
	// ones) add up to more than its amount; only what the payment still
	// held was taken. Subject is the payment ref, raised once per refund
	// that went beyond.
	AlertRefundExceedsPayment = "refund_exceeds_payment"
	// AlertEventFailed: an event failed its last attempt (raised by the
	// job queue through RaiseAlert); subject is the event.
	AlertEventFailed = "event_failed"
	// AlertEventBodyConflict: a redelivery of a stored event carried
	// another signed body; the first is kept, the message names both
	// SHA-256 digests. Raised once per event by the store at ingest;
	// subject is source/event id.
	AlertEventBodyConflict = store.AlertEventBodyConflict
	// AlertEnvironmentMismatch: an event of another environment than its
	// source's (or saying none) was stored as ignored, not processed.
	// Raised by the store at ingest, counted once per such event stored;
	// subject is the source.
	AlertEnvironmentMismatch = store.AlertEnvironmentMismatch
	// AlertAPIVersionDrift: an event or a listed object came in another
	// API version than its source pins; it is stored and processed all
	// the same. Subject is the source, raised once per version seen.
	AlertAPIVersionDrift = "api_version_drift"
)

// Alert kinds raised outside Apply, by the packages that watch sources
// and sinks, so that AlertKinds can list them: the outbox's is its own
// (billing imports outbox); reconcile's are defined here and named again
// there (reconcile imports billing, not the other way round).
const (
	// AlertSinkPaused: a sink answered 410 Gone and is paused until
	// payhook deliveries resend (outbox.AlertSinkPaused); subject is the
	// sink.
	AlertSinkPaused = outbox.AlertSinkPaused
	// AlertSourceSilent: nothing was received from a source for longer
	// than its silence setting (reconcile.AlertSilence); subject is the
	// source.
	AlertSourceSilent = "source_silent"
	// AlertSignatureFailures: a burst of deliveries to a source had their
	// signature refused (reconcile.AlertSignatureFailures); subject is
	// the source.
	AlertSignatureFailures = "signature_failures"
	// AlertReconcileDifference: the provider and payhook disagree about
	// an object (reconcile.AlertDifference); subject is source/kind/ref.
	AlertReconcileDifference = "reconcile_difference"
)

// AlertKinds lists every alert kind payhook raises, sorted: what a filter
// by kind (payhook alerts list --kind, /api/v1/alerts?kind=, the
// console's alerts page) may name besides an application's own kinds
// once an alert of one is stored (ListAlerts). TestAlertKindsComplete
// finds every Alert constant of the module in it.
var AlertKinds = []string{
	AlertAPIVersionDrift,
	AlertChargebackReversalAmbiguous,
	AlertCryptoReferenceReused,
	AlertCryptoSecondReference,
	AlertEnvironmentMismatch,
	AlertEventBodyConflict,
	AlertEventFailed,
	AlertOrderPaidTwice,
	AlertOrderPaymentMismatch,
	AlertPaymentKindMismatch,
	AlertPaymentMismatch,
	AlertReconcileDifference,
	AlertRefundExceedsPayment,
	AlertSignatureFailures,
	AlertSinkPaused,
	AlertSourceSilent,
}

// RaiseVersionDrift raises AlertAPIVersionDrift for source inside tx:
// what (an event, a listed object) came in version seen, not pinned.
// Once per version seen: it reports whether this call raised it.
// A version that is no reference (over payhook.MaxRefBytes, control
// characters: a sender's mistake, or a signed payload crafted to be one)
// is named by its length and digest, so that the alert's keys fit every
// index and a warning can never fail the event it is about.
func RaiseVersionDrift(ctx context.Context, tx *Tx, source, pinned, seen, what string) (bool, error) {
	if payhook.CheckRef("api version", seen) != nil {
		sum := sha256.Sum256([]byte(seen))
		seen = fmt.Sprintf("unreadable (%d bytes, sha256 %x)", len(seen), sum[:8])
	}
	return RaiseAlertOnce(ctx, tx, AlertAPIVersionDrift, source, source+"/"+seen,
		fmt.Sprintf("source %s pins API version %s, but %s came in version %s (stored all the same)", source, pinned, what, seen))
}

// RaiseAlert raises the alert (kind, subject) inside tx, at tx's time.
// The first time it inserts it; again, it counts one more, moves
// last_seen, keeps the newest message and makes it unacknowledged. The
// unique (kind, subject) index decides, so concurrent raises count each.
//
// Each raise emits an alert.raised fact (package outbox), whose id is the
// alert and its count: the n-th raise of (kind, subject) is one fact.
func RaiseAlert(ctx context.Context, tx *Tx, kind, subject, message string) error {
	count, err := raise(ctx, tx, kind, subject, message)
	if err != nil {
		return err
	}
	return tx.emit(ctx, nil, outbox.AlertRaised, "", subject, fmt.Sprintf("%s\x00%s\x00#%d", kind, subject, count), tx.now,
		alertData{Kind: kind, Subject: subject, Message: message})
}

// raise is RaiseAlert without its fact; it returns the alert's count.
func raise(ctx context.Context, tx *Tx, kind, subject, message string) (int, error) {
	if err := tx.check(); err != nil {
		return 0, err
	}
	if kind == "" {
		return 0, errors.New("raise alert: empty kind")
	}
	var count int
	err := tx.QueryRowContext(ctx, `INSERT INTO payhook_alerts
		(kind, subject, message, first_seen, last_seen, count, acknowledged)
		VALUES ($1, $2, $3, $4, $4, 1, FALSE)
		ON CONFLICT (kind, subject) DO UPDATE SET
			count = payhook_alerts.count + 1,
			last_seen = excluded.last_seen,
			message = excluded.message,
			acknowledged = FALSE
		RETURNING count`, kind, subject, message, tx.timeValue(tx.now)).Scan(&count)
	if err != nil {
		return 0, fmt.Errorf("raise alert %s %s: %w", kind, subject, err)
	}
	return count, nil
}

// alert raises the alert (kind, subject) for occurrence, once per
// source (RaiseAlertOnce), and records it in the outcome.
func (a *applier) alert(ctx context.Context, kind, subject, occurrence, message string) error {
	raised, err := raiseOnce(ctx, a.tx, a.out, a.source, kind, subject, a.source+"/"+occurrence, "source "+a.source+": "+message)
	if raised {
		a.out.Alerts = append(a.out.Alerts, kind+":"+subject)
	}
	return err
}

// RaiseAlertOnce raises the alert (kind, subject) for occurrence, once:
// only the call that records the occurrence raises it (RaiseAlert), so
// that seeing the same thing again (a duplicate, a replay, the same
// reconciliation difference found by the next run) changes nothing. It
// reports whether it raised. The unique index of
// payhook_alert_occurrences decides, also between concurrent calls. The
// raise emits one alert.raised fact, whose id is the occurrence.
func RaiseAlertOnce(ctx context.Context, tx *Tx, kind, subject, occurrence, message string) (bool, error) {
	return raiseOnce(ctx, tx, nil, "", kind, subject, occurrence, message)
}

// raiseOnce is RaiseAlertOnce, its fact of source recorded in out.
func raiseOnce(ctx context.Context, tx *Tx, out *Outcome, source, kind, subject, occurrence, message string) (bool, error) {
	if err := tx.check(); err != nil {
		return false, err
	}
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO payhook_alert_occurrences (kind, subject, occurrence, seen_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (kind, subject, occurrence) DO NOTHING
		RETURNING id`, kind, subject, occurrence, tx.timeValue(tx.now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record alert %s %s: %w", kind, subject, err)
	}
	count, err := raise(ctx, tx, kind, subject, message)
	if err != nil {
		return false, err
	}
	// With the alert's count: the same occurrence raised again after
	// ResolveAlert is another fact.
	return true, tx.emit(ctx, out, outbox.AlertRaised, source, subject, fmt.Sprintf("%s\x00%s\x00%s\x00#%d", kind, subject, occurrence, count), tx.now,
		alertData{Kind: kind, Subject: subject, Message: message})
}

// ResolveAlert acknowledges, inside tx, the open alert id of kind because
// what it reported is fixed (not because someone saw it: that is
// AckAlert), and forgets its subject's occurrences, so that the same
// occurrence seen again (RaiseAlertOnce) raises the alert again. The
// UPDATE's condition (still open, of that kind) decides: it reports
// whether this call resolved it.
func ResolveAlert(ctx context.Context, tx *Tx, kind string, id int64) (bool, error) {
	if err := tx.check(); err != nil {
		return false, err
	}
	var subject string
	err := tx.QueryRowContext(ctx, `UPDATE payhook_alerts SET acknowledged = TRUE
		WHERE id = $1 AND kind = $2 AND acknowledged = FALSE RETURNING subject`, id, kind).Scan(&subject)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resolve alert %d: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM payhook_alert_occurrences WHERE kind = $1 AND subject = $2`, kind, subject); err != nil {
		return false, fmt.Errorf("resolve alert %d: forget its occurrences: %w", id, err)
	}
	return true, nil
}

// AlertView is one alert.
type AlertView struct {
	ID           int64     `json:"id"`
	Kind         string    `json:"kind"`
	Subject      string    `json:"subject"`
	Message      string    `json:"message"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
	Count        int       `json:"count"`
	Acknowledged bool      `json:"acknowledged"`
}

// AlertFilter selects alerts for ListAlerts. Zero fields match everything.
type AlertFilter struct {
	Kind string
	// Unacknowledged, if set, returns only alerts not acknowledged.
	Unacknowledged bool
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListAlerts returns matching alerts, most recently seen first.
func ListAlerts(ctx context.Context, db *store.DB, f AlertFilter) ([]AlertView, error) {
	var q query
	if f.Kind != "" {
		q.where("kind = $%d", f.Kind)
	}
	if f.Unacknowledged {
		q.where("acknowledged = $%d", false)
	}
	as, err := list(ctx, db, "list alerts", func(row scanner) (v AlertView, err error) {
		err = row.Scan(&v.ID, &v.Kind, &v.Subject, &v.Message, store.ScanTime(&v.FirstSeen),
			store.ScanTime(&v.LastSeen), &v.Count, &v.Acknowledged)
		return v, err
	}, `SELECT id, kind, subject, message, first_seen, last_seen, count, acknowledged
		FROM payhook_alerts`+q.sql("last_seen DESC, id DESC", f.Limit), q.args...)
	if err != nil || len(as) > 0 || f.Kind == "" || slices.Contains(AlertKinds, f.Kind) {
		return as, err
	}
	// A kind neither payhook's nor stored is most likely misspelt: an
	// empty list would read as "none of that kind".
	var stored bool
	if err := db.SQL.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM payhook_alerts WHERE kind = $1)`, f.Kind).Scan(&stored); err != nil {
		return nil, fmt.Errorf("list alerts: kind %q: %w", f.Kind, err)
	}
	if !stored {
		return nil, fmt.Errorf("%w: alert kind %q: want one of %s (or an application's own kind, once one is raised)",
			payhook.ErrInvalid, f.Kind, strings.Join(AlertKinds, ", "))
	}
	return as, nil
}

// AckAlert acknowledges the alert with the id. It returns an error
// wrapping payhook.ErrNotFound if there is none.
func AckAlert(ctx context.Context, db *store.DB, id int64) error {
	return AckAlertSeen(ctx, db, id, 0)
}

// AckAlertSeen acknowledges the alert with the id as an operator saw it:
// raised count times (0: whatever its count). When it has been raised
// again since, it is left open, so that an acknowledgement of what was
// seen never hides an occurrence that was not, and the error wraps
// payhook.ErrConflict. It returns an error wrapping payhook.ErrNotFound
// if there is no such alert.
func AckAlertSeen(ctx context.Context, db *store.DB, id int64, count int) error {
	if count < 0 {
		return fmt.Errorf("%w: acknowledge alert %d: count %d: want the count seen", payhook.ErrInvalid, id, count)
	}
	res, err := db.SQL.ExecContext(ctx, `UPDATE payhook_alerts SET acknowledged = TRUE WHERE id = $1 AND ($2 = 0 OR count = $2)`, id, count)
	if err != nil {
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	if n > 0 {
		return nil
	}
	var now int
	switch err := db.SQL.QueryRowContext(ctx, `SELECT count FROM payhook_alerts WHERE id = $1`, id).Scan(&now); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("alert %d: %w", id, payhook.ErrNotFound)
	case err != nil:
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	return fmt.Errorf("alert %d was raised again since it was seen (count %d, seen %d): it stays open; look at it again: %w",
		id, now, count, payhook.ErrConflict)
}
