package billing

import (
	"context"
	"fmt"

	"github.com/payhook/payhook/outbox"
)

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
	if err != nil || !inserted {
		return err
	}
	if err := a.emit(ctx, outbox.PaymentRefunded, f.RefundRef, f.RefundRef, f.At, refundData{Payment: p.Ref,
		Refund: f.RefundRef, Amount: f.Amount, Currency: p.Currency, Refunded: next.refunded(p.Amount)}); err != nil {
		return err
	}
	if next.Refunds <= p.Amount {
		return nil
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
		return a.refundFailedPosted(ctx, f, f.PaymentRef, marker, 0, currency, nil)
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
		return a.refundFailedPosted(ctx, f, payRef, refund, 0, currency, nil)
	}
	next := p.money
	if next.Refunds, err = add("refunds of payment "+p.Ref, p.Refunds, -requested); err != nil {
		return err
	}
	return a.refundFailedPosted(ctx, f, payRef, refund, requested, currency, func() (bool, error) {
		return a.move(ctx, p, "refund_failed:"+f.RefundRef, "refund_failed", refund, requested, next)
	})
}

// refundFailedPosted posts "refund_failed:<refund>" of payRef once (with
// move when the failure gives money back, else moving nothing) and, when
// it is new, emits payment.refund_failed.
func (a *applier) refundFailedPosted(ctx context.Context, f RefundFailed, payRef string, refund, requested int64,
	currency string, move func() (bool, error)) error {
	if move == nil {
		move = func() (bool, error) {
			_, inserted, err := a.post(ctx, "refund_failed:"+f.RefundRef, "refund_failed", payRef, refund, 0, 0, currency)
			return inserted, err
		}
	}
	inserted, err := move()
	if err != nil || !inserted {
		return err
	}
	return a.emit(ctx, outbox.PaymentRefundFailed, f.RefundRef, f.RefundRef, f.At, refundData{Payment: payRef,
		Refund: f.RefundRef, Amount: requested, Currency: currency})
}
