package billing

import (
	"context"
	"fmt"
	"reflect"
	"time"
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
	// Facts lists the ids of the outbox facts this call wrote (see
	// package outbox and docs/facts.md).
	Facts []string
}

// Apply applies facts of source inside tx (the transaction that marks the
// event processed), stamped with tx's time; see ApplyOutcome for the
// rules. On SQLite tx holds the only connection: Apply uses tx only.
//
// It returns an error wrapping ErrNotSeenYet when a fact is about a payment
// or dispute not seen yet (the caller rolls back and retries the event
// later); an error wrapping payhook.ErrMalformed for a fact that fails
// Check or contradicts what is stored in a way no retry can change (a
// refund in another currency than its payment), so that the event fails
// at once; other errors for database failures. On any error the caller
// must roll tx back.
func Apply(ctx context.Context, tx *Tx, source string, facts []Fact) error {
	_, err := ApplyOutcome(ctx, tx, source, facts)
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
//     "chargeback_reverse:<reversal>", which binds it to the chargeback
//     it wins (one of its amount first, see chargebackReversed) and,
//     naming an amount, caps what that win gives back: it
//     moves nothing, or takes back what a win posted first by the
//     chargeback's own record gave beyond it.
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
//     index decides; stored rejected, AlertCryptoReferenceReused). An
//     invoice stored rejected is credited by a later Settled with a
//     reference no invoice holds, as in the other order (a conditional
//     UPDATE of the row still rejected decides). One
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
func ApplyOutcome(ctx context.Context, tx *Tx, source string, facts []Fact) (Outcome, error) {
	var out Outcome
	if err := tx.check(); err != nil {
		return out, err
	}
	if source == "" {
		return out, errNoSource
	}
	a := &applier{tx: tx, source: source, out: &out}
	return out, a.apply(ctx, facts, 0)
}

// apply applies facts, those of one event from its fact number first on
// (ApplyMany applied the ones before), one after the other.
func (a *applier) apply(ctx context.Context, facts []Fact, first int) error {
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
			return fmt.Errorf("apply fact %d (%T) of source %s: %w", first+i, f, a.source, err)
		}
	}
	return nil
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

// applier applies the facts of one ApplyOutcome call: the queries of every
// aggregate (ledger.go, payment.go, refund.go, chargeback.go, order.go,
// settle.go, subscription.go, alert.go) are its methods.
type applier struct {
	tx     *Tx
	source string
	out    *Outcome
	// locked holds the refs of the payments this call locked, which stay
	// locked until tx ends; claimed the orders it marked paid, with the
	// payment that paid them. Both save the queries of a second fact
	// about the same payment or order in one event.
	locked  map[string]bool
	claimed map[string]string
}

// t converts t for a timestamp column of the engine.
func (a *applier) t(t time.Time) any { return a.tx.timeValue(t) }
