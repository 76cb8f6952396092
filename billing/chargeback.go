package billing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook/outbox"
)

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
	inserted, err := a.move(ctx, p, "chargeback:"+f.DisputeRef, "chargeback", capture, disputed, next)
	if err != nil || !inserted {
		return err
	}
	return a.emit(ctx, outbox.PaymentChargedBack, f.DisputeRef, f.DisputeRef, f.At,
		disputeData{Payment: p.Ref, Dispute: f.DisputeRef, Amount: disputed, Currency: p.Currency})
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
	return a.win(ctx, what, payRef, cb, f.DisputeRef, disputed, f.Amount, f.At)
}

// win posts "chargeback_won:<dispute>" once, reversing the chargeback
// posting cb of payRef, which took disputed; it gives back limit when
// above zero and below disputed, else disputed.
func (a *applier) win(ctx context.Context, what, payRef string, cb int64, dispute string, disputed, limit int64, at time.Time) error {
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
	inserted, err := a.move(ctx, p, "chargeback_won:"+dispute, "chargeback_won", cb, back, next)
	if err != nil || !inserted {
		return err
	}
	return a.emit(ctx, outbox.PaymentChargebackWon, dispute, dispute, at,
		disputeData{Payment: p.Ref, Dispute: dispute, Amount: back, Currency: p.Currency})
}

// chargebackReversed applies a win reported as a record of its own
// (ReversalRef): it binds the reversal, once ("chargeback_reverse:<ref>",
// whose requested amount is the reversal's), to a chargeback of the
// payment not bound to another reversal: first one of exactly the
// reversal's amount, then one already won by its own record (Paddle
// reports a win both ways: the chargeback's adjustment reversed, and a
// chargeback_reverse adjustment), else the oldest open one, which it
// wins. The win gives back at most the reversal's amount in
// either order: bound to a win posted for more, the binding takes the
// difference back.
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
	// A reversal names no chargeback, and its binding caps the win: first
	// a chargeback of exactly its amount (a reversal gives back the whole
	// of the chargeback it wins, but for a partial win), so that the full
	// reversal of a second chargeback never caps the first's win; then
	// chargebacks won by their own record (this reversal is the other
	// report of such a win), then the oldest open one.
	cands, err := a.reversible(ctx, p.Ref, f.Amount)
	if err != nil {
		return fmt.Errorf("%s: find the chargeback it reverses: %w", what, err)
	}
	if len(cands) == 0 {
		return fmt.Errorf("%s: a chargeback of payment %s to reverse: %w", what, p.Ref, ErrNotSeenYet)
	}
	cb, disputed, dispute := cands[0].id, cands[0].disputed, cands[0].dispute
	if err := a.win(ctx, what, p.Ref, cb, dispute, disputed, f.Amount, f.At); err != nil {
		return err
	}
	// The binding names what the reversal gives back (its amount, 0 for
	// all the chargeback took): a win its chargeback's own record posted
	// first, for all of it, gives back no more than the reversal says
	// (moneyOf), so the payment keeps what it keeps in the other order.
	if p, err = a.lockPayment(ctx, p.Ref); err != nil {
		return err
	}
	next := p.money
	if f.Amount > 0 {
		_, _, back, err := a.posting(ctx, "chargeback_won:"+dispute)
		if err != nil {
			return err
		}
		if back > f.Amount {
			if next.Disputed, err = add("chargebacks of payment "+p.Ref, next.Disputed, back-f.Amount); err != nil {
				return err
			}
		}
	}
	if _, err = a.move(ctx, p, key, "chargeback_won", cb, f.Amount, next); err != nil {
		return err
	}
	// An open chargeback chosen among others alike (as open, the
	// reversal's amount or not): the reversal may be another's, and if
	// that one's own record says it was won later, both are given back.
	// (Chosen among chargebacks won by their own record, it caps a win
	// already told: any of them gives the same.)
	var alike []string
	for _, c := range cands[1:] {
		if c.rank == cands[0].rank && c.rank%2 == 1 {
			alike = append(alike, c.dispute)
		}
	}
	if len(alike) == 0 {
		return nil
	}
	return a.alert(ctx, AlertChargebackReversalAmbiguous, p.Ref, f.ReversalRef,
		fmt.Sprintf("payment %s: reversal %s names no chargeback; it won %s, the oldest of the chargebacks alike (also %s): "+
			"check at the provider which one was won, and if it was another, whether the payment keeps what it should",
			p.Ref, f.ReversalRef, dispute, strings.Join(alike, ", ")))
}

// reversibleChargeback is a chargeback a reversal may bind to, and its
// rank among them (lower first): 0 or 1 of the reversal's amount, 2 or 3
// not; even when won by its own record, odd when open.
type reversibleChargeback struct {
	id, disputed int64
	dispute      string
	rank         int
}

// reversible returns the chargebacks of payRef not bound to a reversal
// yet, in the order chargebackReversed binds one: of the reversal's
// amount first, then those won by their own record, then the oldest.
func (a *applier) reversible(ctx context.Context, payRef string, amount int64) ([]reversibleChargeback, error) {
	rows, err := a.tx.QueryContext(ctx, `SELECT c.id, c.fact_key, c.requested_amount,
			CASE WHEN c.requested_amount = $3 THEN 0 ELSE 2 END +
			CASE WHEN EXISTS (SELECT 1 FROM payhook_ledger_postings w
				WHERE w.reverses_id = c.id AND w.kind = 'chargeback_won') THEN 0 ELSE 1 END AS rank
		FROM payhook_ledger_postings c
		WHERE c.source = $1 AND c.payment_ref = $2 AND c.kind = 'chargeback'
		AND NOT EXISTS (SELECT 1 FROM payhook_ledger_postings b
			WHERE b.reverses_id = c.id AND substr(b.fact_key, 1, 19) = 'chargeback_reverse:')
		ORDER BY rank, c.id`, a.source, payRef, amount)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []reversibleChargeback
	for rows.Next() {
		var c reversibleChargeback
		var key string
		if err := rows.Scan(&c.id, &key, &c.disputed, &c.rank); err != nil {
			return nil, err
		}
		c.dispute = strings.TrimPrefix(key, "chargeback:")
		out = append(out, c)
	}
	return out, rows.Err()
}
