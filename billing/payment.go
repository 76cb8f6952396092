package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// payment is a payment row locked for the rest of the transaction, with
// the state its money follows from (see ApplyOutcome).
type payment struct {
	ID       int64
	Ref      string
	Kind     string
	Amount   int64
	Currency string
	money
}

// money is what a fiat payment's money follows from, besides its amount.
type money struct {
	// Refunds: refunds posted minus refunds failed, as asked (their sum
	// may exceed the amount; only the amount is ever taken).
	Refunds int64
	// Disputed: what the chargebacks still hold (what each took, less
	// what its win gave back); Open: how many are not won.
	Disputed int64
	Open     int
}

// refunded is what the refunds take: at most the amount.
func (m money) refunded(amount int64) int64 { return min(m.Refunds, amount) }

// kept is what a payment of amount keeps: what refunds and open disputes
// leave, never less than zero.
func (m money) kept(amount int64) int64 {
	return max(0, amount-m.refunded(amount)-m.Disputed)
}

func (m money) status(amount int64) string {
	switch r := m.refunded(amount); {
	case m.Open > 0 || m.Disputed > 0:
		// An open dispute, or a win that gave back only part.
		return "charged_back"
	case r > 0 && r >= amount:
		return "refunded"
	case r > 0:
		return "partially_refunded"
	}
	return "succeeded"
}

// lockPayment locks the payment row (a row lock on PostgreSQL; SQLite's
// single writer already serialises) so that the facts of one payment are
// applied one after the other, and returns it with its money; nil if
// there is none.
func (a *applier) lockPayment(ctx context.Context, ref string) (*payment, error) {
	p := &payment{Ref: ref}
	err := a.tx.QueryRowContext(ctx, `UPDATE payhook_payments SET refunded_amount = refunded_amount
		WHERE source = $1 AND ref = $2
		RETURNING id, kind, amount, currency`, a.source, ref).
		Scan(&p.ID, &p.Kind, &p.Amount, &p.Currency)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock payment %s: %w", ref, err)
	}
	if p.money, err = a.moneyOf(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// moneyOf sums the refunds and open chargebacks posted on p, with checked
// arithmetic.
func (a *applier) moneyOf(ctx context.Context, p *payment) (money, error) {
	// A chargeback's win is its "chargeback_won:<dispute>" posting, whose
	// requested amount is what it gave back ("chargeback_reverse:" postings
	// bind a reversal and move nothing).
	rows, err := a.tx.QueryContext(ctx, `SELECT c.kind, c.requested_amount,
			CASE WHEN w.id IS NULL THEN 0 ELSE 1 END, COALESCE(w.requested_amount, 0)
		FROM payhook_ledger_postings c
		LEFT JOIN payhook_ledger_postings w ON w.reverses_id = c.id AND w.kind = 'chargeback_won'
			AND substr(w.fact_key, 1, 15) = 'chargeback_won:' AND c.kind = 'chargeback'
		WHERE c.source = $1 AND c.payment_ref = $2 AND c.kind IN ('refund', 'refund_failed', 'chargeback')`,
		a.source, p.Ref)
	if err != nil {
		return money{}, fmt.Errorf("read the postings of payment %s: %w", p.Ref, err)
	}
	defer rows.Close()
	var m money
	for rows.Next() {
		var kind string
		var requested int64
		var won int
		var givenBack int64
		if err := rows.Scan(&kind, &requested, &won, &givenBack); err != nil {
			return money{}, fmt.Errorf("read the postings of payment %s: %w", p.Ref, err)
		}
		what := "refunds of payment " + p.Ref
		switch {
		case kind == "refund":
			m.Refunds, err = add(what, m.Refunds, requested)
		case kind == "refund_failed":
			m.Refunds, err = add(what, m.Refunds, -requested)
		case won == 0:
			m.Open++
			m.Disputed, err = add("chargebacks of payment "+p.Ref, m.Disputed, requested)
		case givenBack < requested:
			// Won, but the win gave back less than the chargeback took.
			m.Disputed, err = add("chargebacks of payment "+p.Ref, m.Disputed, requested-givenBack)
		}
		if err != nil {
			return money{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return money{}, fmt.Errorf("read the postings of payment %s: %w", p.Ref, err)
	}
	return m, nil
}

// move posts the fact key of the locked fiat payment p once, taking p's
// money to next. The posting's amount is the change of what p keeps (what
// its entries move on provider_receivable, 0 when nothing moves) and
// requested the amount the fact names. Only when the posting is inserted
// does it write the entries and store p's new state; it reports whether
// it did.
func (a *applier) move(ctx context.Context, p *payment, key, kind string, reverses, requested int64, next money) (bool, error) {
	delta := next.kept(p.Amount) - p.kept(p.Amount)
	id, inserted, err := a.post(ctx, key, kind, p.Ref, reverses, delta, requested, p.Currency)
	if err != nil || !inserted {
		return false, err
	}
	if err := a.entries(ctx, id, p.Currency, AccountReceivable, delta, AccountRevenue); err != nil {
		return false, err
	}
	_, err = a.tx.ExecContext(ctx, `UPDATE payhook_payments SET refunded_amount = $2, status = $3, updated_at = $4
		WHERE id = $1`, p.ID, next.refunded(p.Amount), next.status(p.Amount), a.t(a.now))
	if err != nil {
		return false, fmt.Errorf("update payment %s: %w", p.Ref, err)
	}
	p.money = next
	return true, nil
}

// captured places a fiat payment and posts its capture once. The first
// capture decides the amount and currency: a later snapshot that disagrees
// is applied with the stored row and raises AlertPaymentMismatch. The
// order id is filled in the first time a snapshot knows it, and the call
// that inserts the payment or fills its order id pays the order. A zero
// amount (a 100% discount) stores the payment and pays its order with no
// posting. It returns nil (and no error) when ref is a crypto payment:
// nothing to do.
func (a *applier) captured(ctx context.Context, pay Payment) (*payment, error) {
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
	if p.Amount > 0 {
		postID, inserted, err := a.post(ctx, "capture:"+pay.Ref, "capture", pay.Ref, 0, p.Amount, p.Amount, p.Currency)
		if err != nil {
			return nil, err
		}
		if inserted {
			if err := a.entries(ctx, postID, p.Currency, AccountReceivable, p.Amount, AccountRevenue); err != nil {
				return nil, err
			}
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
			return nil, malformed("%s: payment ref %q and the payment's ref %q differ", what, ref, pay.Ref)
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

// captureID is the id of p's capture posting, which refunds and
// chargebacks reverse; 0 for a payment of zero, which has none.
func (a *applier) captureID(ctx context.Context, p *payment) (int64, error) {
	if p.Amount == 0 {
		return 0, nil
	}
	id, _, _, err := a.posting(ctx, "capture:"+p.Ref)
	if err == nil && id == 0 {
		err = fmt.Errorf("payment %s has no capture posting", p.Ref)
	}
	return id, err
}

func (a *applier) refunded(ctx context.Context, f Refunded) error {
	what := "refund " + f.RefundRef
	p, err := a.place(ctx, what, f.Payment, f.PaymentRef)
	if err != nil || p == nil {
		return err
	}
	if f.Currency != p.Currency {
		return malformed("%s: currency %q differs from payment %s's %q", what, f.Currency, p.Ref, p.Currency)
	}
	capture, err := a.captureID(ctx, p)
	if err != nil {
		return err
	}
	next := p.money
	if next.Refunds, err = add("refunds of payment "+p.Ref, p.Refunds, f.Amount); err != nil {
		return err
	}
	// Posted before, or its failure recorded first: nothing changes.
	inserted, err := a.move(ctx, p, "refund:"+f.RefundRef, "refund", capture, f.Amount, next)
	if err != nil || !inserted || next.Refunds <= p.Amount {
		return err
	}
	return a.alert(ctx, AlertRefundExceedsPayment, p.Ref, f.RefundRef,
		fmt.Sprintf("payment %s of %d %s: refund %s of %d brings its refunds to %d; refunded at most the payment",
			p.Ref, p.Amount, p.Currency, f.RefundRef, f.Amount, next.Refunds))
}

func (a *applier) refundFailed(ctx context.Context, f RefundFailed) error {
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
		return malformed("%s: of payment %s, but refund was posted on payment %s", what, f.PaymentRef, payRef)
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
	next := p.money
	if next.Refunds, err = add("refunds of payment "+p.Ref, p.Refunds, -requested); err != nil {
		return err
	}
	_, err = a.move(ctx, p, "refund_failed:"+f.RefundRef, "refund_failed", refund, requested, next)
	return err
}

func (a *applier) chargedBack(ctx context.Context, f ChargedBack) error {
	p, err := a.place(ctx, "chargeback "+f.DisputeRef, f.Payment, f.PaymentRef)
	if err != nil || p == nil {
		return err
	}
	capture, err := a.captureID(ctx, p)
	if err != nil {
		return err
	}
	disputed := p.Amount
	if f.Amount > 0 && f.Amount < p.Amount {
		disputed = f.Amount
	}
	next := p.money
	next.Open++
	if next.Disputed, err = add("chargebacks of payment "+p.Ref, p.Disputed, disputed); err != nil {
		return err
	}
	_, err = a.move(ctx, p, "chargeback:"+f.DisputeRef, "chargeback", capture, disputed, next)
	return err
}

func (a *applier) chargebackWon(ctx context.Context, f ChargebackWon) error {
	if f.DisputeRef == "" {
		return a.chargebackReversed(ctx, f)
	}
	what := "won chargeback " + f.DisputeRef
	cb, payRef, disputed, err := a.posting(ctx, "chargeback:"+f.DisputeRef)
	if err != nil {
		return err
	}
	if cb == 0 {
		// A won dispute of a crypto payment: the chargeback was never
		// posted (the payment is final) and never will be.
		if f.PaymentRef != "" {
			p, err := a.lockPayment(ctx, f.PaymentRef)
			if err != nil {
				return err
			}
			if p != nil && p.Kind != "fiat" {
				return a.kindMismatch(ctx, f.PaymentRef, p.Kind, what)
			}
		}
		return fmt.Errorf("%s: chargeback: %w", what, ErrNotSeenYet)
	}
	if f.PaymentRef != "" && payRef != f.PaymentRef {
		return malformed("%s: of payment %s, but the chargeback is of payment %s", what, f.PaymentRef, payRef)
	}
	return a.win(ctx, what, payRef, cb, f.DisputeRef, disputed, f.Amount)
}

// win posts "chargeback_won:<dispute>" once, reversing the chargeback
// posting cb of payRef, which took disputed; it gives back limit when
// above zero and below disputed, else disputed.
func (a *applier) win(ctx context.Context, what, payRef string, cb int64, dispute string, disputed, limit int64) error {
	back := disputed
	if limit > 0 && limit < disputed {
		back = limit
	}
	p, err := a.lockPayment(ctx, payRef)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("%s: payment %s: %w", what, payRef, ErrNotSeenYet)
	}
	next := p.money
	next.Open--
	if next.Disputed, err = add("chargebacks of payment "+p.Ref, p.Disputed, -back); err != nil {
		return err
	}
	if next.Open < 0 || next.Disputed < 0 {
		// Already won: its posting exists, so move changes nothing.
		next = p.money
	}
	_, err = a.move(ctx, p, "chargeback_won:"+dispute, "chargeback_won", cb, back, next)
	return err
}

// chargebackReversed applies a win reported as a record of its own
// (ReversalRef): it binds the reversal, once ("chargeback_reverse:<ref>",
// a posting that moves nothing), to a chargeback of the payment not bound
// to another reversal: first one already won by its own record (Paddle
// reports a win both ways: the chargeback's adjustment reversed, and a
// chargeback_reverse adjustment), else the oldest open one, which it wins.
func (a *applier) chargebackReversed(ctx context.Context, f ChargebackWon) error {
	what := "chargeback reversal " + f.ReversalRef
	p, err := a.lockPayment(ctx, f.PaymentRef)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("%s: payment %s: %w", what, f.PaymentRef, ErrNotSeenYet)
	}
	if p.Kind != "fiat" {
		return a.kindMismatch(ctx, f.PaymentRef, p.Kind, what)
	}
	key := "chargeback_reverse:" + f.ReversalRef
	if id, _, _, err := a.posting(ctx, key); err != nil || id != 0 {
		return err // applied before (the payment's lock orders us after it)
	}
	// Chargebacks won by their own record first (this reversal is the
	// other report of such a win), then the oldest open one.
	var cb, disputed int64
	var cbKey string
	err = a.tx.QueryRowContext(ctx, `SELECT c.id, c.fact_key, c.requested_amount FROM payhook_ledger_postings c
		WHERE c.source = $1 AND c.payment_ref = $2 AND c.kind = 'chargeback'
		AND NOT EXISTS (SELECT 1 FROM payhook_ledger_postings b
			WHERE b.reverses_id = c.id AND substr(b.fact_key, 1, 19) = 'chargeback_reverse:')
		ORDER BY CASE WHEN EXISTS (SELECT 1 FROM payhook_ledger_postings w
			WHERE w.reverses_id = c.id AND w.kind = 'chargeback_won') THEN 0 ELSE 1 END, c.id
		LIMIT 1`, a.source, p.Ref).Scan(&cb, &cbKey, &disputed)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: a chargeback of payment %s to reverse: %w", what, p.Ref, ErrNotSeenYet)
	}
	if err != nil {
		return fmt.Errorf("%s: find the chargeback it reverses: %w", what, err)
	}
	dispute := cbKey[len("chargeback:"):]
	if err := a.win(ctx, what, p.Ref, cb, dispute, disputed, f.Amount); err != nil {
		return err
	}
	_, _, err = a.post(ctx, key, "chargeback_won", p.Ref, cb, 0, 0, p.Currency)
	return err
}
