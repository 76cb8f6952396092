package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/payhook/payhook/store"
)

// Ledger accounts. Every posting's entries sum to zero, so every currency
// sums to zero across all accounts.
const (
	// AccountReceivable is what the provider owes for fiat payments kept:
	// captures minus refunds and chargebacks.
	AccountReceivable = "provider_receivable"
	// AccountRevenue is credited by captures and settlements and debited
	// back by refunds and chargebacks.
	AccountRevenue = "revenue"
	// AccountCryptoWallet holds credited crypto settlements.
	AccountCryptoWallet = "crypto_wallet"
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
)

// Outcome says what one Apply call changed for the first time, so that the
// caller can emit each downstream fact once (it is empty for facts already
// applied).
type Outcome struct {
	// Posted lists the fact keys of the postings this call inserted.
	Posted []string
	// OrdersPaid lists the orders this call moved from pending to paid.
	OrdersPaid []string
	// EndedClaimed lists the subscriptions whose end this call claimed.
	EndedClaimed []string
	// Alerts lists the alerts raised, as "kind:subject".
	Alerts []string
}

// Apply applies facts of source inside tx (the transaction that marks the
// event processed) at time now; see ApplyOutcome for the rules. On SQLite
// tx holds the only connection: Apply uses tx only.
//
// It returns an error wrapping ErrNotSeenYet when a fact is about a payment
// or dispute not seen yet (the caller rolls back and retries the event
// later); an error wrapping payhook.ErrMalformed for a fact that fails
// Check or contradicts what is stored in a way no retry can change (a
// refund in another currency than its payment), so that the event fails
// at once; other errors for database failures. On any error the caller
// must roll tx back.
func Apply(ctx context.Context, db *store.DB, tx *sql.Tx, source string, facts []Fact, now time.Time) error {
	_, err := ApplyOutcome(ctx, db, tx, source, facts, now)
	return err
}

// ApplyOutcome is Apply that also reports what the call changed for the
// first time. Each fact is idempotent and the final state does not depend
// on the order facts arrive in:
//
//   - Captured inserts the payment once per (source, ref) and posts
//     "capture:<ref>" once: +amount provider_receivable, -amount revenue
//     (nothing for a capture of zero, which only pays its order). The
//     first capture decides the amount and currency: a later one (or a
//     snapshot in a refund or chargeback) that disagrees changes nothing
//     and raises AlertPaymentMismatch. The order id is filled in by the
//     first snapshot that knows it. The call that inserts the payment, or
//     fills in its order, marks the order paid if pending.
//   - Refunded places the payment (from Payment, or the stored row; else
//     ErrNotSeenYet) and posts "refund:<refund_ref>" once, reversing the
//     capture (reverses_id). Duplicates change nothing. Refunds beyond the
//     amount take only what is left and raise AlertRefundExceedsPayment.
//     A refund in another currency than its payment is malformed.
//   - RefundFailed posts "refund_failed:<refund_ref>" once, reversing the
//     refund. If no refund was posted yet, it records the failure as a
//     zero-amount "refund:<refund_ref>" (so a success reported later
//     changes nothing) and a zero-amount "refund_failed:<refund_ref>"; no
//     money moves.
//   - ChargedBack posts "chargeback:<dispute>" once, reversing the capture
//     for the disputed amount (the whole payment when not given), at most
//     what is left of it.
//   - ChargebackWon posts "chargeback_won:<dispute>" once, reversing the
//     chargeback (reverses_id); an unknown dispute is ErrNotSeenYet, a
//     won dispute of a crypto payment AlertPaymentKindMismatch. A win
//     reported by a reversal of its own (ReversalRef) also posts
//     "chargeback_reverse:<reversal>", moving nothing, which binds it to
//     the chargeback it wins.
//   - OrderPaid moves the order (of source) from pending to paid once; the
//     first time another payment tries to pay an order already paid, it
//     raises AlertOrderPaidTwice. When its PaymentRef names a stored
//     payment, that payment must be fiat and record no order or this one;
//     else the order stays pending and AlertOrderPaymentMismatch is
//     raised. An OrderPaid whose capture in the same event hit a payment
//     of another kind is skipped.
//   - Settled inserts the crypto invoice as settled and credits it
//     ("settle:<invoice>": +amount crypto_wallet, -amount revenue) unless
//     its chain reference already credits another invoice (the unique
//     index decides; stored rejected, AlertCryptoReferenceReused). One
//     whose order is paid by another payment is credited too, as a fiat
//     capture is, and raises AlertOrderPaidTwice.
//   - Subscription inserts the subscription or replaces it only with a
//     snapshot that ranks higher: ended first (an ended subscription never
//     comes back), then the newer UpdatedAt, then for snapshots of the
//     same time the status (ended, canceled, active), the later period
//     end, then plan and customer (greater wins). So the final state is
//     the highest snapshot whatever the order, and ended_at is set exactly
//     when the status is ended: to the provider's EndedAt (else its
//     UpdatedAt), claimed once (Outcome.EndedClaimed).
//
// A crypto payment is final once settled: a Captured, Refunded,
// ChargedBack, RefundFailed or ChargebackWon about it (and a Settled about
// a fiat payment) is a success that changes nothing and raises
// AlertPaymentKindMismatch, never an error the provider would retry.
//
// The money of a fiat payment follows from three things only: its amount
// A, its net refunds R (refunds posted minus refunds failed, as asked) and
// the amounts D of its open chargebacks (posted and not won). The payment
// keeps kept = max(0, A - min(R, A) - D), and each posting moves
// provider_receivable (and revenue, opposite) by the change of kept it
// causes; that change, signed, is the posting's amount, and the amount the
// fact names (the refund's, the dispute's) is its requested_amount. So a
// refund reported after a chargeback of the whole payment (the provider
// made it before the dispute) is posted with amount 0, counted in
// refunded_amount, but moves nothing, and refunds beyond A move only what
// was left. The balances, refunded amounts (min(R, A)), statuses and
// posting keys are therefore the same in every delivery order. The status
// is derived: charged_back while a chargeback is open, else refunded when
// R >= A > 0, partially_refunded when R > 0, else succeeded. Every sum is
// checked: one that would overflow is malformed.
func ApplyOutcome(ctx context.Context, db *store.DB, tx *sql.Tx, source string, facts []Fact, now time.Time) (Outcome, error) {
	var out Outcome
	if source == "" {
		return out, errNoSource
	}
	a := &applier{db: db, tx: tx, source: source, now: now, out: &out}
	// The refs whose capture in this event hit a payment of another kind:
	// the event's OrderPaid for them is skipped (the alert is raised).
	var mismatched map[string]bool
	for i, f := range facts {
		err := Check(f)
		if err == nil {
			switch f := value(f).(type) {
			case Captured:
				var p *payment
				if p, err = a.captured(ctx, f.Payment); err == nil && p == nil {
					if mismatched == nil {
						mismatched = map[string]bool{}
					}
					mismatched[f.Payment.Ref] = true
				}
			case Refunded:
				err = a.refunded(ctx, f)
			case RefundFailed:
				err = a.refundFailed(ctx, f)
			case ChargedBack:
				err = a.chargedBack(ctx, f)
			case ChargebackWon:
				err = a.chargebackWon(ctx, f)
			case OrderPaid:
				if !mismatched[f.PaymentRef] {
					err = a.orderPaid(ctx, f)
				}
			case Settled:
				err = a.settled(ctx, f)
			case Subscription:
				err = a.subscription(ctx, f)
			}
		}
		if err != nil {
			return out, fmt.Errorf("apply fact %d (%T) of source %s: %w", i, f, source, err)
		}
	}
	return out, nil
}

// value returns the fact a non-nil pointer to a fact points at, else f:
// facts are applied by value whichever way they are passed.
func value(f Fact) Fact {
	if v := reflect.ValueOf(f); v.Kind() == reflect.Pointer && !v.IsNil() {
		if deref, ok := v.Elem().Interface().(Fact); ok {
			return deref
		}
	}
	return f
}

type applier struct {
	db     *store.DB
	tx     *sql.Tx
	source string
	now    time.Time
	out    *Outcome
}

func (a *applier) t(t time.Time) any { return a.db.TimeValue(t) }

// post inserts the posting of one business fact unless it exists, and
// reports whether it did. The unique (source, fact_key) index decides.
// amount is what its entries will move on the receivable side (signed),
// requested the amount the fact names.
func (a *applier) post(ctx context.Context, key, kind, paymentRef string, reverses, amount, requested int64, currency string) (int64, bool, error) {
	var rev any
	if reverses != 0 {
		rev = reverses
	}
	var id int64
	err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_ledger_postings
		(source, fact_key, kind, payment_ref, reverses_id, amount, requested_amount, currency, posted_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (source, fact_key) DO NOTHING
		RETURNING id`, a.source, key, kind, paymentRef, rev, amount, requested, currency, a.t(a.now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("post %s: %w", key, err)
	}
	a.out.Posted = append(a.out.Posted, key)
	return id, true, nil
}

// posting returns the id, payment and requested amount of the posting of
// key; id 0 if there is none.
func (a *applier) posting(ctx context.Context, key string) (id int64, paymentRef string, requested int64, err error) {
	err = a.tx.QueryRowContext(ctx, `SELECT id, payment_ref, requested_amount FROM payhook_ledger_postings
		WHERE source = $1 AND fact_key = $2`, a.source, key).Scan(&id, &paymentRef, &requested)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", 0, nil
	}
	if err != nil {
		return 0, "", 0, fmt.Errorf("find posting %s: %w", key, err)
	}
	return id, paymentRef, requested, nil
}

// entries writes +amount on debit and -amount on credit; nothing when
// amount is zero.
func (a *applier) entries(ctx context.Context, postingID int64, currency, debit string, amount int64, credit string) error {
	if amount == 0 {
		return nil
	}
	_, err := a.tx.ExecContext(ctx, `INSERT INTO payhook_ledger_entries (posting_id, account, currency, amount)
		VALUES ($1, $2, $3, $4), ($1, $5, $3, $6)`, postingID, debit, currency, amount, credit, -amount)
	if err != nil {
		return fmt.Errorf("write entries of posting %d: %w", postingID, err)
	}
	return nil
}

// alert raises the alert (kind, subject) for occurrence, once: only the
// call that records the occurrence (per source) raises it, so a duplicate
// or a replay of what raised it changes nothing. The unique index of
// payhook_alert_occurrences decides, also between concurrent calls.
func (a *applier) alert(ctx context.Context, kind, subject, occurrence, message string) error {
	var id int64
	err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_alert_occurrences (kind, subject, occurrence, seen_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (kind, subject, occurrence) DO NOTHING
		RETURNING id`, kind, subject, a.source+"/"+occurrence, a.t(a.now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record alert %s %s: %w", kind, subject, err)
	}
	if err := RaiseAlert(ctx, a.db, a.tx, kind, subject, "source "+a.source+": "+message, a.now); err != nil {
		return err
	}
	a.out.Alerts = append(a.out.Alerts, kind+":"+subject)
	return nil
}

// kindMismatch makes an event about a payment stored as another kind a
// success with no change, and raises AlertPaymentKindMismatch once per
// what (the fact it tried).
func (a *applier) kindMismatch(ctx context.Context, ref, storedKind, what string) error {
	return a.alert(ctx, AlertPaymentKindMismatch, ref, what,
		fmt.Sprintf("%s: payment %s is a %s payment; nothing changed", what, ref, storedKind))
}
