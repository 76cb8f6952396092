package mapping

import (
	"time"

	"github.com/payhook/payhook/billing"
)

// timeZero is the zero time: a field with no fallback.
var timeZero time.Time

// billete maps the simulator's provider: the neutral vocabulary, the
// resource in "data".
func billete(e *event) ([]billing.Fact, error) {
	d, err := e.root.child("data")
	if err != nil {
		return nil, err
	}
	switch e.typ {
	case "checkout.completed":
		return billeteCheckout(e, d)
	case "payment.succeeded":
		ref, err := d.need("id")
		if err != nil {
			return nil, err
		}
		order, err := d.str("order_id")
		if err != nil {
			return nil, err
		}
		at, err := d.timeOr(e.at, "created_at")
		if err != nil {
			return nil, err
		}
		p, err := d.payment(ref, order, "amount", "currency", at)
		if err != nil {
			return nil, err
		}
		return captured(p), nil
	case "payment.refunded":
		return billeteRefund(e, d)
	case "refund.failed":
		pay, err := d.need("payment_id")
		if err != nil {
			return nil, err
		}
		ref, err := d.need("id")
		if err != nil {
			return nil, err
		}
		at, err := d.timeOr(e.at, "updated_at", "created_at")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.RefundFailed{PaymentRef: pay, RefundRef: ref, At: at}}, nil
	case "payment.charged_back":
		return billeteChargeback(e, d)
	case "payment.chargeback_won":
		return billeteChargebackWon(e, d)
	case "subscription.created", "subscription.updated", "subscription.renewed",
		"subscription.canceled", "subscription.ended":
		return billeteSubscription(e, d)
	case "invoice.settled":
		return billeteSettled(e, d)
	}
	// webhook_endpoint.test and any type payhook does not know.
	return ignore("%s events change no billing state", e.typ)
}

// billeteCheckout: the checkout carries its payment's id, amount and
// currency, so it captures the payment and pays the order.
func billeteCheckout(e *event, d obj) ([]billing.Fact, error) {
	pay, err := d.need("payment_id")
	if err != nil {
		return nil, err
	}
	meta, err := d.child("metadata")
	if err != nil {
		return nil, err
	}
	order, err := meta.str("order_id")
	if err != nil {
		return nil, err
	}
	at, err := d.timeOr(e.at, "completed_at", "updated_at")
	if err != nil {
		return nil, err
	}
	p, err := d.payment(pay, order, "amount", "currency", at)
	if err != nil {
		return nil, err
	}
	return captured(p), nil
}

// billetePaymentSnapshot is the payment in data, nil when it lacks its
// amount or currency.
func billetePaymentSnapshot(e *event, d obj, ref string) (*billing.Payment, error) {
	order, err := d.str("order_id")
	if err != nil {
		return nil, err
	}
	at, err := d.timeOr(e.at, "created_at")
	if err != nil {
		return nil, err
	}
	return d.snapshot(ref, order, "amount", "currency", at)
}

// billeteRefund: data is the payment after the refund, data.refund the
// refund.
func billeteRefund(e *event, d obj) ([]billing.Fact, error) {
	pay, err := d.need("id")
	if err != nil {
		return nil, err
	}
	r, err := d.child("refund")
	if err != nil {
		return nil, err
	}
	ref, err := r.need("id")
	if err != nil {
		return nil, err
	}
	// The refund as fetched now may have failed since the event.
	if status, err := r.str("status"); err != nil {
		return nil, err
	} else if status == "failed" {
		at, err := r.timeOr(e.at, "updated_at", "created_at")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.RefundFailed{PaymentRef: pay, RefundRef: ref, At: at}}, nil
	}
	amount, err := r.needAmount("amount")
	if err != nil {
		return nil, err
	}
	cur, err := needCurrency("currency", r, d)
	if err != nil {
		return nil, err
	}
	at, err := r.timeOr(e.at, "created_at")
	if err != nil {
		return nil, err
	}
	snap, err := billetePaymentSnapshot(e, d, pay)
	if err != nil {
		return nil, err
	}
	return []billing.Fact{billing.Refunded{
		Payment: snap, PaymentRef: pay, RefundRef: ref, Amount: amount, Currency: cur, At: at,
	}}, nil
}

// billeteDispute returns the payment (data.id) and the dispute a
// chargeback event is about: data.dispute_id, else data.dispute.id, else
// "dp_" + the payment id, which stands for the payment's one chargeback
// (the simulator sets dispute_id to just that).
func billeteDispute(d obj) (pay, dispute string, err error) {
	if pay, err = d.need("id"); err != nil {
		return "", "", err
	}
	if dispute, err = d.str("dispute_id"); err != nil {
		return "", "", err
	}
	if dispute == "" {
		dd, err := d.child("dispute")
		if err != nil {
			return "", "", err
		}
		if dispute, err = dd.str("id"); err != nil {
			return "", "", err
		}
	}
	if dispute == "" {
		dispute = "dp_" + pay
	}
	return pay, dispute, nil
}

// billeteChargeback: data is the payment, status charged_back.
func billeteChargeback(e *event, d obj) ([]billing.Fact, error) {
	pay, dispute, err := billeteDispute(d)
	if err != nil {
		return nil, err
	}
	at, err := d.timeOr(e.at, "charged_back_at", "updated_at")
	if err != nil {
		return nil, err
	}
	snap, err := billetePaymentSnapshot(e, d, pay)
	if err != nil {
		return nil, err
	}
	facts := []billing.Fact{billing.ChargedBack{Payment: snap, PaymentRef: pay, DisputeRef: dispute, At: at}}
	// The payment as fetched now may be back to succeeded (or partially
	// refunded) with its dispute: the dispute was won since the event.
	status, err := d.str("status")
	if err != nil {
		return nil, err
	}
	if status == "succeeded" || status == "partially_refunded" {
		won, err := d.timeOr(e.at, "updated_at")
		if err != nil {
			return nil, err
		}
		facts = append(facts, billing.ChargebackWon{PaymentRef: pay, DisputeRef: dispute, At: won})
	}
	return facts, nil
}

// billeteChargebackWon: data is the payment after its dispute was won,
// with the dispute id of its chargeback (the same fallbacks as
// billeteChargeback, so that the two name one dispute).
func billeteChargebackWon(e *event, d obj) ([]billing.Fact, error) {
	pay, dispute, err := billeteDispute(d)
	if err != nil {
		return nil, err
	}
	at, err := d.timeOr(e.at, "updated_at")
	if err != nil {
		return nil, err
	}
	return []billing.Fact{billing.ChargebackWon{PaymentRef: pay, DisputeRef: dispute, At: at}}, nil
}

func billeteSubscription(e *event, d obj) ([]billing.Fact, error) {
	s, err := subscriptionBase(d, "id", "customer")
	if err != nil {
		return nil, err
	}
	if s.Plan, err = d.str("plan"); err != nil {
		return nil, err
	}
	status, err := d.need("status")
	if err != nil {
		return nil, err
	}
	switch status {
	case "active", "canceled", "ended":
		s.Status = status
	default:
		return nil, errStatus(d, "status", status)
	}
	if e.typ == "subscription.ended" {
		s.Status = "ended"
	}
	if s.CurrentPeriodEnd, err = d.timeOr(timeZero, "current_period_end"); err != nil {
		return nil, err
	}
	if s.UpdatedAt, err = d.timeOr(e.at, "updated_at"); err != nil {
		return nil, err
	}
	if s.Status == "ended" {
		if s.EndedAt, err = d.timeOr(timeZero, "ended_at"); err != nil {
			return nil, err
		}
	}
	return []billing.Fact{s}, nil
}

// subscriptionBase reads the subscription's id and customer.
func subscriptionBase(d obj, idField, customerField string) (billing.Subscription, error) {
	ref, err := d.need(idField)
	if err != nil {
		return billing.Subscription{}, err
	}
	cus, err := d.ref(customerField)
	if err != nil {
		return billing.Subscription{}, err
	}
	return billing.Subscription{Ref: ref, Customer: cus}, nil
}

func billeteSettled(e *event, d obj) ([]billing.Fact, error) {
	inv, err := d.need("id")
	if err != nil {
		return nil, err
	}
	order, err := d.str("order_id")
	if err != nil {
		return nil, err
	}
	chain, err := d.need("chain_ref")
	if err != nil {
		return nil, err
	}
	at, err := d.timeOr(e.at, "settled_at", "updated_at")
	if err != nil {
		return nil, err
	}
	return settled(d, inv, order, chain, "amount", "currency", at)
}

// settled returns Settled with the amount and currency of d's fields.
func settled(d obj, inv, order, chain, amountField, currencyField string, at time.Time) ([]billing.Fact, error) {
	p, err := d.payment(inv, order, amountField, currencyField, at)
	if err != nil {
		return nil, err
	}
	return []billing.Fact{billing.Settled{
		InvoiceRef: inv, OrderID: order, Amount: p.Amount, Currency: p.Currency, ChainRef: chain, At: at,
	}}, nil
}
