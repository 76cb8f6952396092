package mapping

import (
	"errors"
	"strings"

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
	case "subscription.created", "subscription.updated", "subscription.canceled",
		// Status changes of their own, and a subscription brought in from
		// elsewhere: each carries the subscription as subscription.updated
		// does, and is that snapshot.
		"subscription.activated", "subscription.past_due", "subscription.paused",
		"subscription.resumed", "subscription.trialing", "subscription.imported":
		return paddleSubscription(e, d)
	}
	// notification.test and any type payhook does not know.
	return ignore("%s events change no billing state", e.typ)
}

// paddleOrder is custom_data.order_id (a string, or an integer: the
// application's custom_data is any JSON), "" for a transaction Paddle
// created from a subscription (origin subscription_recurring, _update,
// _charge, _payment_method_change): Paddle copies the subscription's
// custom_data, the checkout's, to each of them, yet they pay the
// subscription, not the checkout's order again.
func paddleOrder(d obj) (string, error) {
	if origin, err := d.str("origin"); err != nil || strings.HasPrefix(origin, "subscription_") {
		return "", err
	}
	c, err := d.child("custom_data")
	if err != nil {
		return "", err
	}
	return c.id("order_id")
}

func paddleTransaction(e *event, d obj) ([]billing.Fact, error) {
	if crypto, err := d.has("chain_ref"); err != nil {
		return nil, err
	} else if crypto {
		// The simulator's crypto invoice rendered as a transaction: not a
		// Paddle payment, and Paddle sources do not credit crypto.
		return ignore("a transaction with a chain_ref is a crypto invoice, which a Paddle source does not credit")
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
	amount, err := paddlePaid(totals)
	if err != nil {
		return nil, err
	}
	facts := captured(billing.Payment{Ref: ref, OrderID: order, Amount: amount, Currency: currency, CapturedAt: at})
	// Fetched now with include=adjustments, the transaction also lists
	// what was refunded or charged back since: each adjustment as its
	// adjustment.* event maps it (the same references, so once). A won
	// chargeback's reversal goes after every chargeback, whatever order
	// Paddle lists them in: it needs its chargeback applied first.
	adjustments, err := d.list("adjustments")
	if err != nil {
		return nil, err
	}
	var won []billing.Fact
	for _, a := range adjustments {
		more, err := listed(paddleAdjustment(e, a))
		var ign ignored
		if errors.As(err, &ign) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, f := range more {
			if _, ok := f.(billing.ChargebackWon); ok {
				won = append(won, f)
			} else {
				facts = append(facts, f)
			}
		}
	}
	return append(facts, won...), nil
}

// paddlePaid is what the customer paid for a transaction: its totals'
// grand_total, which is total less the credit Paddle applied from the
// customer's balance; when grand_total is absent (the simulator sends only
// total), total less credit. A credit above the total is malformed.
func paddlePaid(totals obj) (int64, error) {
	if ok, err := totals.has("grand_total"); err != nil || ok {
		return totals.needAmount("grand_total")
	}
	total, err := totals.needAmount("total")
	if err != nil {
		return 0, err
	}
	credit, _, err := totals.amount("credit")
	if err != nil {
		return 0, err
	}
	if credit > total {
		return 0, malformed("field %q is %d, above %q %d", totals.name("credit"), credit, totals.name("total"), total)
	}
	return total - credit, nil
}

// paddleAdjustment maps refunds (approved, or rejected), chargebacks and
// their wins: Paddle creates a chargeback_reverse adjustment of its own
// and marks the chargeback's adjustment reversed, and either wins it.
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
	id, err := d.need("id")
	if err != nil {
		return nil, err
	}
	switch action {
	case "refund", "chargeback", "chargeback_reverse":
	case "chargeback_warning":
		return ignore("a Paddle chargeback warning (adjustment %s) moves no money; a chargeback adjustment follows if the dispute goes ahead", id)
	case "credit", "credit_reverse":
		return ignore("a Paddle %s (adjustment %s) changes the customer's credit balance, not money payhook tracks", action, id)
	default:
		return ignore("Paddle adjustment action %q (adjustment %s) moves no money payhook tracks", action, id)
	}
	pay, err := d.need("transaction_id")
	if err != nil {
		return nil, err
	}
	switch action {
	case "chargeback":
		return paddleChargeback(e, d, pay, id, status)
	case "chargeback_reverse":
		switch status {
		case "approved":
		case "rejected":
			return ignore("a rejected Paddle chargeback reversal (adjustment %s) gives nothing back", id)
		case "pending_approval":
			return ignore("a Paddle chargeback reversal pending approval (adjustment %s) has given nothing back yet", id)
		case "":
			return nil, malformed("field %q is missing", d.name("status"))
		default:
			return nil, errStatus(d, "status", status)
		}
		totals, err := d.child("totals")
		if err != nil {
			return nil, err
		}
		// What the reversal gives back: a win never gives back more.
		amount, _, err := totals.amount("total")
		if err != nil {
			return nil, err
		}
		at, err := d.timeOr(e.at, "created_at")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.ChargebackWon{PaymentRef: pay, ReversalRef: id, Amount: amount, At: at}}, nil
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
	case "pending_approval":
		return ignore("a Paddle refund pending approval (adjustment %s) has not refunded anything yet", id)
	case "reversed":
		return ignore("a reversed Paddle refund (adjustment %s): its reversal adjustment reports it", id)
	case "":
		return nil, malformed("field %q is missing", d.name("status"))
	}
	return nil, errStatus(d, "status", status)
}

// paddleChargeback maps a chargeback adjustment by the status rules of
// refunds: approved is a ChargedBack for totals.total (when given),
// reversed that ChargedBack and its win (the same adjustment, so the same
// DisputeRef: a chargeback fetched reversed, whose approved event was
// never applied, still takes and gives back once), rejected or
// pending_approval nothing (yet), any other status malformed.
func paddleChargeback(e *event, d obj, pay, id, status string) ([]billing.Fact, error) {
	var won []billing.Fact
	switch status {
	case "approved":
	case "rejected":
		return ignore("a rejected Paddle chargeback (adjustment %s) takes no money", id)
	case "pending_approval":
		return ignore("a Paddle chargeback pending approval (adjustment %s) has taken no money yet", id)
	case "":
		return nil, malformed("field %q is missing", d.name("status"))
	default:
		return nil, errStatus(d, "status", status)
	case "reversed":
		at, err := d.timeOr(e.at, "updated_at")
		if err != nil {
			return nil, err
		}
		won = []billing.Fact{billing.ChargebackWon{PaymentRef: pay, DisputeRef: id, At: at}}
	}
	totals, err := d.child("totals")
	if err != nil {
		return nil, err
	}
	amount, _, err := totals.amount("total")
	if err != nil {
		return nil, err
	}
	at, err := d.timeOr(e.at, "created_at")
	if err != nil {
		return nil, err
	}
	return append([]billing.Fact{billing.ChargedBack{PaymentRef: pay, DisputeRef: id, Amount: amount, At: at}}, won...), nil
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
	case status == "past_due" || status == "paused":
		// Not paid for: no access, whether or not it is set to cancel.
		s.Status = status
	case action == "cancel":
		s.Status = "canceled"
	case status == "canceled" || status == "ended":
		s.Status = "ended"
	case status == "active" || status == "trialing":
		s.Status = "active"
	default:
		return nil, errStatus(d, "status", status)
	}
	if s.Status == "ended" {
		if s.EndedAt, err = d.timeOr(timeZero, "canceled_at"); err != nil {
			return nil, err
		}
	}
	return []billing.Fact{s}, nil
}
