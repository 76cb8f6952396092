package mapping

import (
	"github.com/payhook/payhook/billing"
)

// paddle maps Paddle Billing notifications: the entity in data, amounts
// as strings of minor units, the application's metadata in custom_data.
// A payment is known by its transaction: the simulator's payment_id when
// the transaction carries one, else the transaction's id, which
// adjustments name in transaction_id.
func paddle(e *event) ([]billing.Fact, error) {
	d, err := e.root.child("data")
	if err != nil {
		return nil, err
	}
	switch e.typ {
	case "transaction.completed", "transaction.paid":
		return paddleTransaction(e, d)
	case "adjustment.created", "adjustment.updated":
		return paddleAdjustment(e, d)
	case "subscription.created", "subscription.updated", "subscription.canceled":
		return paddleSubscription(e, d)
	}
	// notification.test and any type payhook does not know.
	return ignore()
}

// paddleOrder is custom_data.order_id.
func paddleOrder(d obj) (string, error) {
	c, err := d.child("custom_data")
	if err != nil {
		return "", err
	}
	return c.str("order_id")
}

func paddleTransaction(e *event, d obj) ([]billing.Fact, error) {
	if d.has("chain_ref") {
		// The simulator's crypto invoice rendered as a transaction: not a
		// Paddle payment, and Paddle sources do not credit crypto.
		return ignore()
	}
	ref, err := d.first("payment_id", "id")
	if err == nil && ref == "" {
		err = malformed("field %q is missing", d.name("id"))
	}
	if err != nil {
		return nil, err
	}
	order, err := paddleOrder(d)
	if err != nil {
		return nil, err
	}
	totals, err := d.dig("details", "totals")
	if err != nil {
		return nil, err
	}
	at, err := d.timeOr(e.at, "billed_at", "updated_at")
	if err != nil {
		return nil, err
	}
	currency, err := needCurrency("currency_code", d, totals)
	if err != nil {
		return nil, err
	}
	amount, err := totals.needAmount("total")
	if err != nil {
		return nil, err
	}
	return captured(billing.Payment{Ref: ref, OrderID: order, Amount: amount, Currency: currency, CapturedAt: at}), nil
}

// paddleAdjustment maps refunds (approved, or rejected) and chargebacks
// (reversed: won).
// Adjustments do not carry the transaction's total, so there is no
// Payment snapshot.
func paddleAdjustment(e *event, d obj) ([]billing.Fact, error) {
	action, err := d.str("action")
	if err != nil {
		return nil, err
	}
	status, err := d.str("status")
	if err != nil {
		return nil, err
	}
	if action != "refund" && action != "chargeback" {
		// credit, chargeback_warning, chargeback_reverse (whose id is not
		// the chargeback's), credit_reverse: nothing payhook tracks.
		return ignore()
	}
	pay, err := d.need("transaction_id")
	if err != nil {
		return nil, err
	}
	id, err := d.need("id")
	if err != nil {
		return nil, err
	}
	if action == "chargeback" {
		switch status {
		case "rejected":
			return ignore()
		case "reversed":
			// The dispute was won: the same adjustment, so the same
			// DisputeRef as its ChargedBack.
			at, err := d.timeOr(e.at, "updated_at")
			if err != nil {
				return nil, err
			}
			return []billing.Fact{billing.ChargebackWon{PaymentRef: pay, DisputeRef: id, At: at}}, nil
		}
		at, err := d.timeOr(e.at, "created_at")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.ChargedBack{PaymentRef: pay, DisputeRef: id, At: at}}, nil
	}
	// A refund: the simulator names the refund in refund_id; Paddle's own
	// refunds are the adjustment.
	ref, err := d.str("refund_id")
	if err != nil {
		return nil, err
	}
	if ref == "" {
		ref = id
	}
	switch status {
	case "approved":
		totals, err := d.child("totals")
		if err != nil {
			return nil, err
		}
		amount, err := totals.needAmount("total")
		if err != nil {
			return nil, err
		}
		cur, err := needCurrency("currency_code", d, totals)
		if err != nil {
			return nil, err
		}
		at, err := d.timeOr(e.at, "created_at")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.Refunded{PaymentRef: pay, RefundRef: ref, Amount: amount, Currency: cur, At: at}}, nil
	case "rejected":
		at, err := d.timeOr(e.at, "updated_at")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.RefundFailed{PaymentRef: pay, RefundRef: ref, At: at}}, nil
	case "pending_approval", "reversed":
		return ignore()
	case "":
		return nil, malformed("field %q is missing", d.name("status"))
	}
	return nil, errStatus(d, "status", status)
}

func paddleSubscription(e *event, d obj) ([]billing.Fact, error) {
	s, err := subscriptionBase(d, "id", "customer_id")
	if err != nil {
		return nil, err
	}
	items, err := d.list("items")
	if err != nil {
		return nil, err
	}
	if len(items) > 0 {
		price, err := items[0].child("price")
		if err != nil {
			return nil, err
		}
		if s.Plan, err = price.str("id"); err != nil {
			return nil, err
		}
	}
	change, err := d.child("scheduled_change")
	if err != nil {
		return nil, err
	}
	action, err := change.str("action")
	if err != nil {
		return nil, err
	}
	period, err := d.child("current_billing_period")
	if err != nil {
		return nil, err
	}
	if s.CurrentPeriodEnd, err = period.timeOr(timeZero, "ends_at"); err != nil {
		return nil, err
	}
	if s.CurrentPeriodEnd.IsZero() && action == "cancel" {
		if s.CurrentPeriodEnd, err = change.timeOr(timeZero, "effective_at"); err != nil {
			return nil, err
		}
	}
	if s.UpdatedAt, err = d.timeOr(e.at, "updated_at"); err != nil {
		return nil, err
	}
	status, err := d.need("status")
	if err != nil {
		return nil, err
	}
	switch {
	case e.typ == "subscription.canceled":
		s.Status = "ended"
	case action == "cancel":
		s.Status = "canceled"
	case status == "canceled" || status == "ended":
		s.Status = "ended"
	case status == "active" || status == "trialing" || status == "past_due" || status == "paused":
		s.Status = "active"
	default:
		return nil, errStatus(d, "status", status)
	}
	return []billing.Fact{s}, nil
}
