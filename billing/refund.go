package billing

import (
	"context"
	"fmt"
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
