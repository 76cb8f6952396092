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
	// AlertEventFailed: an event failed its last attempt (raised by the
	// job queue through RaiseAlert); subject is the event.
	AlertEventFailed = "event_failed"
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
// later), and other errors for facts that contradict what is stored (a
// refund in another currency than its payment) or database failures. On
// any error the caller must roll tx back.
func Apply(ctx context.Context, db *store.DB, tx *sql.Tx, source string, facts []Fact, now time.Time) error {
	_, err := ApplyOutcome(ctx, db, tx, source, facts, now)
	return err
}

// ApplyOutcome is Apply that also reports what the call changed for the
// first time. Each fact is idempotent and the final state does not depend
// on the order facts arrive in:
//
//   - Captured inserts the payment once per (source, ref) and posts
//     "capture:<ref>" once: +amount provider_receivable, -amount revenue.
//     The first capture decides the amount and currency: a later one (or
//     a snapshot in a refund or chargeback) that disagrees changes nothing
//     and raises AlertPaymentMismatch. The order id is filled in by the
//     first snapshot that knows it. The call that inserts the payment, or
//     fills in its order, marks the order paid if pending.
//   - Refunded places the payment (from Payment, or the stored row; else
//     ErrNotSeenYet) and posts "refund:<refund_ref>" once, reversing the
//     capture (reverses_id); refunded_amount grows by Amount only when the
//     posting is inserted. Duplicates change nothing. A refund in another
//     currency than its payment is an error.
//   - RefundFailed posts "refund_failed:<refund_ref>" once, reversing the
//     refund and subtracting its amount from refunded_amount. If no
//     refund was posted yet, it records the failure as a zero-amount
//     "refund:<refund_ref>" (so a success reported later changes nothing)
//     and a zero-amount "refund_failed:<refund_ref>"; no money moves.
//   - ChargedBack posts "chargeback:<dispute>" once, reversing the capture
//     for what is left of it (amount - refunded_amount) so that a charged
//     back payment keeps nothing.
//   - ChargebackWon posts "chargeback_won:<dispute>" once, reversing the
//     chargeback (reverses_id); an unknown dispute is ErrNotSeenYet.
//   - OrderPaid moves the order (of source) from pending to paid once; the
//     first time another payment tries to pay an order already paid, it
//     raises AlertOrderPaidTwice.
//   - Settled inserts the crypto invoice as settled and credits it
//     ("settle:<invoice>": +amount crypto_wallet, -amount revenue) unless
//     its chain reference already credits another invoice (the unique
//     index decides; stored rejected, AlertCryptoReferenceReused) or its
//     order is paid by another payment (rejected, AlertOrderPaidTwice).
//   - Subscription inserts the subscription or updates it only if
//     UpdatedAt is newer than provider_updated_at; status "ended" claims
//     ended_at once (Outcome.EndedClaimed).
//
// A crypto payment is final once settled: a Captured, Refunded,
// ChargedBack or RefundFailed about it (and a Settled about a fiat
// payment) is a success that changes nothing and raises
// AlertPaymentKindMismatch, never an error the provider would retry.
//
// The money of a fiat payment follows from three things only: its amount
// A, its net refunds R (refunds posted minus refunds failed) and whether a
// chargeback is open (posted and not won). The payment keeps
// kept = 0 if charged back, else A - R, and each posting moves
// provider_receivable (and revenue, opposite) by the change of kept it
// causes; that change, signed, is the posting's amount, and the amount the
// fact names (the refund's, the payment's) is its requested_amount. So the
// chargeback reverses A - R at the moment it is applied, and a refund
// reported after the chargeback (the provider made it before the dispute)
// is posted with amount 0, counted in refunded_amount, but moves nothing:
// the chargeback already took the payment to zero. The balances, refunded
// amounts, statuses and posting keys are therefore the same in every
// delivery order. The status is derived: charged_back while a chargeback
// is open, else refunded when R >= A, partially_refunded when R > 0, else
// succeeded.
func ApplyOutcome(ctx context.Context, db *store.DB, tx *sql.Tx, source string, facts []Fact, now time.Time) (Outcome, error) {
	var out Outcome
	if source == "" {
		return out, errors.New("apply billing facts: empty source")
	}
	a := &applier{db: db, tx: tx, source: source, now: now, out: &out}
	for i, f := range facts {
		var err error
		switch f := value(f).(type) {
		case Captured:
			_, err = a.captured(ctx, f.Payment)
		case Refunded:
			err = a.refunded(ctx, f)
		case RefundFailed:
			err = a.refundFailed(ctx, f)
		case ChargedBack:
			err = a.chargedBack(ctx, f)
		case ChargebackWon:
			err = a.chargebackWon(ctx, f)
		case OrderPaid:
			err = a.orderPaid(ctx, f)
		case Settled:
			err = a.settled(ctx, f)
		case Subscription:
			err = a.subscription(ctx, f)
		default:
			err = fmt.Errorf("unknown fact %T", f)
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

// payment is a payment row locked for the rest of the transaction.
type payment struct {
	ID       int64
	Ref      string
	Kind     string
	Amount   int64
	Currency string
	Refunded int64
	// ChargedBack: a chargeback is posted and not won.
	ChargedBack bool
}

// kept is what the payment keeps; see ApplyOutcome.
func kept(amount, refunded int64, chargedBack bool) int64 {
	if chargedBack {
		return 0
	}
	return amount - refunded
}

func fiatStatus(amount, refunded int64, chargedBack bool) string {
	switch {
	case chargedBack:
		return "charged_back"
	case refunded >= amount:
		return "refunded"
	case refunded > 0:
		return "partially_refunded"
	}
	return "succeeded"
}

// lockPayment locks the payment row (a row lock on PostgreSQL; SQLite's
// single writer already serialises) so that the facts of one payment are
// applied one after the other, and returns it; nil if there is none.
func (a *applier) lockPayment(ctx context.Context, ref string) (*payment, error) {
	p := &payment{Ref: ref}
	err := a.tx.QueryRowContext(ctx, `UPDATE payhook_payments SET refunded_amount = refunded_amount
		WHERE source = $1 AND ref = $2
		RETURNING id, kind, amount, currency, refunded_amount`, a.source, ref).
		Scan(&p.ID, &p.Kind, &p.Amount, &p.Currency, &p.Refunded)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock payment %s: %w", ref, err)
	}
	n, err := a.openChargebacks(ctx, ref, 0)
	if err != nil {
		return nil, err
	}
	p.ChargedBack = n > 0
	return p, nil
}

// openChargebacks counts the payment's chargebacks not won, leaving out
// the posting except (0: none).
func (a *applier) openChargebacks(ctx context.Context, ref string, except int64) (int, error) {
	var n int
	err := a.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_ledger_postings c
		WHERE c.source = $1 AND c.payment_ref = $2 AND c.kind = 'chargeback' AND c.id <> $3
		AND NOT EXISTS (SELECT 1 FROM payhook_ledger_postings w
			WHERE w.reverses_id = c.id AND w.kind = 'chargeback_won')`, a.source, ref, except).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count open chargebacks of payment %s: %w", ref, err)
	}
	return n, nil
}

// move posts the fact key of the locked fiat payment p once, taking p to
// net refunds refunded and chargeback state chargedBack. The posting's
// amount is the change of what p keeps (what its entries move on
// provider_receivable, 0 when nothing moves) and requested the amount the
// fact names. Only when the posting is inserted does it write the entries
// and store p's new state; it reports whether it did.
func (a *applier) move(ctx context.Context, p *payment, key, kind string, reverses, requested, refunded int64, chargedBack bool) (bool, error) {
	delta := kept(p.Amount, refunded, chargedBack) - kept(p.Amount, p.Refunded, p.ChargedBack)
	id, inserted, err := a.post(ctx, key, kind, p.Ref, reverses, delta, requested, p.Currency)
	if err != nil || !inserted {
		return false, err
	}
	if err := a.entries(ctx, id, p.Currency, AccountReceivable, delta, AccountRevenue); err != nil {
		return false, err
	}
	_, err = a.tx.ExecContext(ctx, `UPDATE payhook_payments SET refunded_amount = $2, status = $3, updated_at = $4
		WHERE id = $1`, p.ID, refunded, fiatStatus(p.Amount, refunded, chargedBack), a.t(a.now))
	if err != nil {
		return false, fmt.Errorf("update payment %s: %w", p.Ref, err)
	}
	p.Refunded, p.ChargedBack = refunded, chargedBack
	return true, nil
}

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

// captured places a fiat payment and posts its capture once. The first
// capture decides the amount and currency: a later snapshot that disagrees
// is applied with the stored row and raises AlertPaymentMismatch. The
// order id is filled in the first time a snapshot knows it, and the call
// that inserts the payment or fills its order id pays the order. It
// returns nil (and no error) when ref is a crypto payment: nothing to do.
func (a *applier) captured(ctx context.Context, pay Payment) (*payment, error) {
	switch {
	case pay.Ref == "":
		return nil, errors.New("captured payment without a ref")
	case pay.Amount <= 0:
		return nil, fmt.Errorf("captured payment %s: amount %d is not positive", pay.Ref, pay.Amount)
	case pay.Currency == "":
		return nil, fmt.Errorf("captured payment %s: no currency", pay.Ref)
	}
	// A row comes back when it is inserted, or when this snapshot is the
	// first to know the order of a payment stored without one.
	var id int64
	err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_payments
		(source, ref, kind, order_id, amount, currency, status, refunded_amount, captured_at, created_at, updated_at)
		VALUES ($1, $2, 'fiat', $3, $4, $5, 'succeeded', 0, $6, $7, $7)
		ON CONFLICT (source, ref) DO UPDATE SET order_id = excluded.order_id, updated_at = excluded.updated_at
			WHERE payhook_payments.order_id = '' AND excluded.order_id <> '' AND payhook_payments.kind = 'fiat'
		RETURNING id`,
		a.source, pay.Ref, pay.OrderID, pay.Amount, pay.Currency, a.t(pay.CapturedAt), a.t(a.now)).Scan(&id)
	orderNew := err == nil && pay.OrderID != ""
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("insert payment %s: %w", pay.Ref, err)
	}
	p, err := a.lockPayment(ctx, pay.Ref)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("payment %s vanished after its insert", pay.Ref)
	}
	if p.Kind != "fiat" {
		return nil, a.kindMismatch(ctx, pay.Ref, p.Kind, "capture")
	}
	if p.Amount != pay.Amount || p.Currency != pay.Currency {
		seen := fmt.Sprintf("%d %s", pay.Amount, pay.Currency)
		if err := a.alert(ctx, AlertPaymentMismatch, pay.Ref, seen,
			fmt.Sprintf("payment %s is %d %s (its first capture); an event says %s; kept %d %s",
				pay.Ref, p.Amount, p.Currency, seen, p.Amount, p.Currency)); err != nil {
			return nil, err
		}
	}
	postID, inserted, err := a.post(ctx, "capture:"+pay.Ref, "capture", pay.Ref, 0, p.Amount, p.Amount, p.Currency)
	if err != nil {
		return nil, err
	}
	if inserted {
		if err := a.entries(ctx, postID, p.Currency, AccountReceivable, p.Amount, AccountRevenue); err != nil {
			return nil, err
		}
	}
	if orderNew {
		if err := a.payOrder(ctx, pay.OrderID, pay.Ref); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// place returns the locked fiat payment a refund or chargeback is about,
// placing it from pay when given; ErrNotSeenYet when it is unknown. It
// returns nil (and no error) when the payment is a crypto one, final: the
// fact changes nothing.
func (a *applier) place(ctx context.Context, what string, pay *Payment, ref string) (*payment, error) {
	if pay != nil {
		if ref != "" && pay.Ref != ref {
			return nil, fmt.Errorf("%s: payment ref %q and the payment's ref %q differ", what, ref, pay.Ref)
		}
		p, err := a.lockPayment(ctx, pay.Ref)
		if err != nil || (p != nil && p.Kind != "fiat") {
			// Not even the snapshot's order is recorded on a final payment.
			if err == nil {
				err = a.kindMismatch(ctx, pay.Ref, p.Kind, what)
			}
			return nil, err
		}
		return a.captured(ctx, *pay)
	}
	if ref == "" {
		return nil, fmt.Errorf("%s: no payment ref", what)
	}
	p, err := a.lockPayment(ctx, ref)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%s: payment %s: %w", what, ref, ErrNotSeenYet)
	}
	if p.Kind != "fiat" {
		return nil, a.kindMismatch(ctx, ref, p.Kind, what)
	}
	return p, nil
}

func (a *applier) captureID(ctx context.Context, ref string) (int64, error) {
	id, _, _, err := a.posting(ctx, "capture:"+ref)
	if err == nil && id == 0 {
		err = fmt.Errorf("payment %s has no capture posting", ref)
	}
	return id, err
}

func (a *applier) refunded(ctx context.Context, f Refunded) error {
	what := "refund " + f.RefundRef
	switch {
	case f.RefundRef == "":
		return errors.New("refund without a refund ref")
	case f.Amount <= 0:
		return fmt.Errorf("%s: amount %d is not positive", what, f.Amount)
	}
	p, err := a.place(ctx, what, f.Payment, f.PaymentRef)
	if err != nil || p == nil {
		return err
	}
	if f.Currency != p.Currency {
		return fmt.Errorf("%s: currency %q differs from payment %s's %q", what, f.Currency, p.Ref, p.Currency)
	}
	capture, err := a.captureID(ctx, p.Ref)
	if err != nil {
		return err
	}
	// Posted before, or its failure recorded first: nothing changes.
	_, err = a.move(ctx, p, "refund:"+f.RefundRef, "refund", capture, f.Amount, p.Refunded+f.Amount, p.ChargedBack)
	return err
}

func (a *applier) refundFailed(ctx context.Context, f RefundFailed) error {
	if f.RefundRef == "" {
		return errors.New("refund failure without a refund ref")
	}
	what := "refund failure " + f.RefundRef
	var p *payment
	if f.PaymentRef != "" {
		var err error
		if p, err = a.lockPayment(ctx, f.PaymentRef); err != nil {
			return err
		}
		if p != nil && p.Kind != "fiat" {
			return a.kindMismatch(ctx, f.PaymentRef, p.Kind, what)
		}
	}
	currency := ""
	if p != nil {
		currency = p.Currency
	}
	// No refund posted yet: take its key with a zero-amount refund, so that
	// a success reported after the failure changes nothing.
	marker, inserted, err := a.post(ctx, "refund:"+f.RefundRef, "refund", f.PaymentRef, 0, 0, 0, currency)
	if err != nil {
		return err
	}
	if inserted {
		_, _, err = a.post(ctx, "refund_failed:"+f.RefundRef, "refund_failed", f.PaymentRef, marker, 0, 0, currency)
		return err
	}
	refund, payRef, requested, err := a.posting(ctx, "refund:"+f.RefundRef)
	if err != nil {
		return err
	}
	if f.PaymentRef != "" && payRef != f.PaymentRef {
		return fmt.Errorf("%s: of payment %s, but refund was posted on payment %s", what, f.PaymentRef, payRef)
	}
	if p == nil {
		// A refund posted concurrently, committed while we waited for its key.
		if p, err = a.lockPayment(ctx, payRef); err != nil {
			return err
		}
		if p == nil && requested != 0 {
			return fmt.Errorf("%s: refund posted on payment %s, which does not exist", what, payRef)
		}
		if p != nil {
			currency = p.Currency
		}
	}
	if requested == 0 {
		// The refund's key holds a failure recorded first: no money.
		_, _, err = a.post(ctx, "refund_failed:"+f.RefundRef, "refund_failed", payRef, refund, 0, 0, currency)
		return err
	}
	_, err = a.move(ctx, p, "refund_failed:"+f.RefundRef, "refund_failed", refund, requested, p.Refunded-requested, p.ChargedBack)
	return err
}

func (a *applier) chargedBack(ctx context.Context, f ChargedBack) error {
	if f.DisputeRef == "" {
		return errors.New("chargeback without a dispute ref")
	}
	p, err := a.place(ctx, "chargeback "+f.DisputeRef, f.Payment, f.PaymentRef)
	if err != nil || p == nil {
		return err
	}
	capture, err := a.captureID(ctx, p.Ref)
	if err != nil {
		return err
	}
	_, err = a.move(ctx, p, "chargeback:"+f.DisputeRef, "chargeback", capture, p.Amount, p.Refunded, true)
	return err
}

func (a *applier) chargebackWon(ctx context.Context, f ChargebackWon) error {
	what := "won chargeback " + f.DisputeRef
	if f.DisputeRef == "" {
		return errors.New("won chargeback without a dispute ref")
	}
	cb, payRef, _, err := a.posting(ctx, "chargeback:"+f.DisputeRef)
	if err != nil {
		return err
	}
	if cb == 0 {
		return fmt.Errorf("%s: chargeback: %w", what, ErrNotSeenYet)
	}
	if f.PaymentRef != "" && payRef != f.PaymentRef {
		return fmt.Errorf("%s: of payment %s, but the chargeback is of payment %s", what, f.PaymentRef, payRef)
	}
	p, err := a.lockPayment(ctx, payRef)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("%s: payment %s: %w", what, payRef, ErrNotSeenYet)
	}
	others, err := a.openChargebacks(ctx, payRef, cb)
	if err != nil {
		return err
	}
	_, err = a.move(ctx, p, "chargeback_won:"+f.DisputeRef, "chargeback_won", cb, p.Amount, p.Refunded, others > 0)
	return err
}

func (a *applier) orderPaid(ctx context.Context, f OrderPaid) error {
	if f.OrderID == "" || f.PaymentRef == "" {
		return fmt.Errorf("order paid: order %q, payment %q: both are required", f.OrderID, f.PaymentRef)
	}
	return a.payOrder(ctx, f.OrderID, f.PaymentRef)
}

// payOrder creates the order of the source as pending if unknown, then
// marks it paid by paidBy only if pending. The first time paidBy tries to
// pay an order paid by another payment, it raises AlertOrderPaidTwice.
func (a *applier) payOrder(ctx context.Context, orderID, paidBy string) error {
	ok, other, err := a.claimOrder(ctx, orderID, paidBy)
	if err != nil || ok || other == paidBy {
		return err
	}
	return a.alert(ctx, AlertOrderPaidTwice, orderID, paidBy,
		fmt.Sprintf("order %s is paid by %s; payment %s paid it again", orderID, other, paidBy))
}

// claimOrder marks the order of the source paid by paidBy if pending; else
// it returns who paid it.
func (a *applier) claimOrder(ctx context.Context, orderID, paidBy string) (claimed bool, paidByBefore string, err error) {
	if err := a.heardOfOrder(ctx, orderID); err != nil {
		return false, "", err
	}
	res, err := a.tx.ExecContext(ctx, `UPDATE payhook_orders SET status = 'paid', paid_by = $3, paid_at = $4
		WHERE source = $1 AND order_id = $2 AND status = 'pending'`, a.source, orderID, paidBy, a.t(a.now))
	if err != nil {
		return false, "", fmt.Errorf("mark order %s paid: %w", orderID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, "", fmt.Errorf("mark order %s paid: %w", orderID, err)
	} else if n == 1 {
		a.out.OrdersPaid = append(a.out.OrdersPaid, orderID)
		return true, paidBy, nil
	}
	err = a.tx.QueryRowContext(ctx, `SELECT paid_by FROM payhook_orders WHERE source = $1 AND order_id = $2`,
		a.source, orderID).Scan(&paidByBefore)
	if err != nil {
		return false, "", fmt.Errorf("read order %s: %w", orderID, err)
	}
	return false, paidByBefore, nil
}

// heardOfOrder creates the order of the source as pending unless it exists.
func (a *applier) heardOfOrder(ctx context.Context, orderID string) error {
	if _, err := a.tx.ExecContext(ctx, `INSERT INTO payhook_orders (source, order_id, status, paid_by, created_at)
		VALUES ($1, $2, 'pending', '', $3) ON CONFLICT (source, order_id) DO NOTHING`, a.source, orderID, a.t(a.now)); err != nil {
		return fmt.Errorf("insert order %s: %w", orderID, err)
	}
	return nil
}

func (a *applier) settled(ctx context.Context, f Settled) error {
	what := "settlement of invoice " + f.InvoiceRef
	switch {
	case f.InvoiceRef == "":
		return errors.New("settlement without an invoice ref")
	case f.ChainRef == "":
		return fmt.Errorf("%s: no chain ref", what)
	case f.Amount <= 0:
		return fmt.Errorf("%s: amount %d is not positive", what, f.Amount)
	case f.Currency == "":
		return fmt.Errorf("%s: no currency", what)
	}
	insert := func(status string) (bool, error) {
		var id int64
		err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_payments
			(source, ref, kind, order_id, amount, currency, status, refunded_amount, chain_ref, captured_at, created_at, updated_at)
			VALUES ($1, $2, 'crypto', $3, $4, $5, $6, 0, $7, $8, $9, $9)
			ON CONFLICT DO NOTHING
			RETURNING id`, a.source, f.InvoiceRef, f.OrderID, f.Amount, f.Currency, status, f.ChainRef,
			a.t(f.At), a.t(a.now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: insert payment: %w", what, err)
		}
		return true, nil
	}
	// Both unique indexes answer: (source, ref) for the same invoice again,
	// (source, chain_ref) of credited invoices for a reused reference.
	inserted, err := insert("settled")
	if err != nil {
		return err
	}
	if !inserted {
		var kind, chainRef string
		err := a.tx.QueryRowContext(ctx, `SELECT kind, COALESCE(chain_ref, '') FROM payhook_payments
			WHERE source = $1 AND ref = $2`, a.source, f.InvoiceRef).Scan(&kind, &chainRef)
		switch {
		case err == nil:
			if kind != "crypto" {
				return a.kindMismatch(ctx, f.InvoiceRef, kind, "settlement with "+f.ChainRef)
			}
			if chainRef != f.ChainRef {
				return a.alert(ctx, AlertCryptoSecondReference, f.InvoiceRef, f.ChainRef,
					fmt.Sprintf("invoice %s settled with %s, then again with %s; credited at most once", f.InvoiceRef, chainRef, f.ChainRef))
			}
			return nil // the same settlement again
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%s: read payment: %w", what, err)
		}
		// The chain reference credits another invoice.
		if inserted, err = insert("rejected"); err != nil || !inserted {
			return err
		}
		if f.OrderID != "" {
			if err := a.heardOfOrder(ctx, f.OrderID); err != nil {
				return err
			}
		}
		var holder string
		if err := a.tx.QueryRowContext(ctx, `SELECT ref FROM payhook_payments
			WHERE source = $1 AND chain_ref = $2 AND status = 'settled'`, a.source, f.ChainRef).Scan(&holder); err != nil {
			return fmt.Errorf("%s: find the invoice credited with %s: %w", what, f.ChainRef, err)
		}
		return a.alert(ctx, AlertCryptoReferenceReused, f.ChainRef, f.InvoiceRef,
			fmt.Sprintf("chain reference %s credits invoice %s; invoice %s settled with it again and was not credited", f.ChainRef, holder, f.InvoiceRef))
	}
	if f.OrderID != "" {
		ok, other, err := a.claimOrder(ctx, f.OrderID, f.InvoiceRef)
		if err != nil {
			return err
		}
		if !ok && other != f.InvoiceRef {
			if _, err := a.tx.ExecContext(ctx, `UPDATE payhook_payments SET status = 'rejected', updated_at = $3
				WHERE source = $1 AND ref = $2`, a.source, f.InvoiceRef, a.t(a.now)); err != nil {
				return fmt.Errorf("%s: reject: %w", what, err)
			}
			return a.alert(ctx, AlertOrderPaidTwice, f.OrderID, f.InvoiceRef,
				fmt.Sprintf("order %s is paid by %s; invoice %s settled for it too and was not credited", f.OrderID, other, f.InvoiceRef))
		}
	}
	id, inserted, err := a.post(ctx, "settle:"+f.InvoiceRef, "settle", f.InvoiceRef, 0, f.Amount, f.Amount, f.Currency)
	if err != nil || !inserted {
		return err
	}
	return a.entries(ctx, id, f.Currency, AccountCryptoWallet, f.Amount, AccountRevenue)
}

func (a *applier) subscription(ctx context.Context, f Subscription) error {
	if f.Ref == "" {
		return errors.New("subscription without a ref")
	}
	var id int64
	err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_subscriptions
		(source, ref, customer, plan, status, current_period_end, provider_updated_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
		ON CONFLICT (source, ref) DO NOTHING
		RETURNING id`, a.source, f.Ref, f.Customer, f.Plan, f.Status, a.t(f.CurrentPeriodEnd), a.t(f.UpdatedAt),
		a.t(a.now)).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Only a newer snapshot replaces the stored one.
		_, err = a.tx.ExecContext(ctx, `UPDATE payhook_subscriptions
			SET customer = $3, plan = $4, status = $5, current_period_end = $6, provider_updated_at = $7, updated_at = $8
			WHERE source = $1 AND ref = $2 AND (provider_updated_at IS NULL OR provider_updated_at < $7)`,
			a.source, f.Ref, f.Customer, f.Plan, f.Status, a.t(f.CurrentPeriodEnd), a.t(f.UpdatedAt), a.t(a.now))
		if err != nil {
			return fmt.Errorf("update subscription %s: %w", f.Ref, err)
		}
	case err != nil:
		return fmt.Errorf("insert subscription %s: %w", f.Ref, err)
	}
	if f.Status != "ended" {
		return nil
	}
	res, err := a.tx.ExecContext(ctx, `UPDATE payhook_subscriptions SET ended_at = $3
		WHERE source = $1 AND ref = $2 AND ended_at IS NULL`, a.source, f.Ref, a.t(a.now))
	if err != nil {
		return fmt.Errorf("claim the end of subscription %s: %w", f.Ref, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("claim the end of subscription %s: %w", f.Ref, err)
	} else if n == 1 {
		a.out.EndedClaimed = append(a.out.EndedClaimed, f.Ref)
	}
	return nil
}
