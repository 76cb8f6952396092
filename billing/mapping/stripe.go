package mapping

import (
	"cmp"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/stripecapture"
)

// stripe maps Stripe events: the object in data.object. Payments are
// known by their PaymentIntent id, which checkout sessions, charges,
// refunds and disputes all name; a charge made without one (the Charges
// API of older integrations, "payment_intent": null) is known by its own
// id, which its refunds and disputes name in "charge".
func stripe(e *event) ([]billing.Fact, error) {
	o, err := e.root.dig("data", "object")
	if err != nil {
		return nil, err
	}
	switch e.typ {
	case "checkout.session.completed", "checkout.session.async_payment_succeeded":
		return stripeCheckout(e, o)
	case "payment_intent.succeeded":
		ref, err := o.need("id")
		if err != nil {
			return nil, err
		}
		order, err := stripeOrder(o)
		if err != nil {
			return nil, err
		}
		// A PaymentIntent's "created" is when it was created, not when it
		// succeeded: without the simulator's created_at, the event's time.
		at, err := o.timeOr(e.at, "created_at")
		if err != nil {
			return nil, err
		}
		field := "amount"
		if ok, err := o.has("amount_received"); err != nil || ok {
			field = "amount_received" // whose read reports err
		}
		p, err := o.payment(ref, order, field, "currency", at)
		if err != nil {
			return nil, err
		}
		facts := captured(p)
		// Fetched now with its latest charge's refunds expanded
		// (latest_charge.refunds), the payment intent also says what was
		// refunded since: each refund by its status, as charge.refunded.
		if kind, err := o.kind("latest_charge"); err != nil {
			return nil, err
		} else if kind == '{' {
			charge, err := o.child("latest_charge")
			if err != nil {
				return nil, err
			}
			_, list, err := stripeRefundsOf(charge)
			if err != nil {
				return nil, err
			}
			release, err := stripePartialRelease(charge, list)
			if err != nil {
				return nil, err
			}
			more, err := stripeRefundList(e, charge, list, ref, nil, release, true)
			if err != nil {
				return nil, err
			}
			facts = append(facts, more...)
		}
		return facts, nil
	case "charge.succeeded", "charge.captured":
		return stripeCharge(e, o)
	case "charge.refunded":
		return stripeRefunds(e, o)
	case "refund.created", "refund.updated", "refund.failed", "charge.refund.updated":
		return stripeRefund(e, o)
	case "charge.dispute.created", "charge.dispute.funds_withdrawn":
		if e.typ == "charge.dispute.created" {
			// An inquiry (warning_needs_response, warning_under_review,
			// warning_closed) takes no money, nor does a dispute Stripe
			// prevented (blocked, or resolved by a refund that refund.*
			// report) before it became a chargeback; a real dispute does.
			status, err := o.str("status")
			if err != nil {
				return nil, err
			}
			switch {
			case strings.HasPrefix(status, "warning_"):
				return ignore("a Stripe dispute inquiry (status %s) takes no money", status)
			case status == "prevented":
				return ignore("a Stripe dispute prevented before it became a chargeback takes no money")
			}
		}
		pay, dispute, err := stripeDispute(o)
		if err != nil {
			return nil, err
		}
		amount, _, err := o.amount("amount")
		if err != nil {
			return nil, err
		}
		at, err := o.timeOr(e.at, "updated_at", "created")
		if err != nil {
			return nil, err
		}
		facts := []billing.Fact{billing.ChargedBack{PaymentRef: pay, DisputeRef: dispute, Amount: amount, At: at}}
		// The dispute as fetched now may have been won since the event:
		// the money came back too.
		if status, err := o.str("status"); err != nil {
			return nil, err
		} else if status == "won" {
			facts = append(facts, billing.ChargebackWon{PaymentRef: pay, DisputeRef: dispute, At: e.at})
		}
		return facts, nil
	case "charge.dispute.closed", "charge.dispute.funds_reinstated":
		if e.typ == "charge.dispute.closed" {
			status, err := o.str("status")
			if err != nil {
				return nil, err
			}
			if status != "won" {
				return ignore("a Stripe dispute closed with status %q gives nothing back", status)
			}
		}
		pay, dispute, err := stripeDispute(o)
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.ChargebackWon{PaymentRef: pay, DisputeRef: dispute, At: e.at}}, nil
	case "customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted",
		// A pause and a resume carry the subscription as .updated does.
		"customer.subscription.paused", "customer.subscription.resumed":
		return stripeSubscription(e, o)
	case "invoice.paid":
		return ignore("a Stripe invoice is paid through its PaymentIntent or subscription events, not invoice.paid")
	case "ping":
		return ignore("ping events change no billing state")
	}
	return ignore("%s events change no billing state", e.typ)
}

// stripePaymentRef is the payment an object is about: its payment_intent,
// else (the Charges API) the charge in field charge.
func stripePaymentRef(o obj, charge string) (string, error) {
	pi, err := o.ref("payment_intent")
	if err != nil || pi != "" {
		return pi, err
	}
	ch, err := o.ref(charge)
	if err == nil && ch == "" {
		err = malformed("fields %q and %q are missing", o.name("payment_intent"), o.name(charge))
	}
	return ch, err
}

// stripeCharge maps a charge made with the Charges API (no payment
// intent): Captured{id, amount_captured or amount} + OrderPaid
// (metadata.order_id). A charge of a PaymentIntent is captured by
// payment_intent.succeeded; one only authorized by charge.captured.
func stripeCharge(e *event, o obj) ([]billing.Fact, error) {
	pi, err := o.ref("payment_intent")
	if err != nil {
		return nil, err
	}
	if pi != "" {
		return ignore("a charge of PaymentIntent %s: payment_intent.succeeded captures it", pi)
	}
	if ok, err := o.has("captured"); err != nil || ok {
		if ok, err := o.flag("captured"); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			return ignore("a charge authorized, not captured yet: charge.captured will say")
		}
	}
	ref, err := o.need("id")
	if err != nil {
		return nil, err
	}
	order, err := stripeOrder(o)
	if err != nil {
		return nil, err
	}
	at, err := o.timeOr(e.at, "created_at")
	if err != nil {
		return nil, err
	}
	p, err := o.payment(ref, order, stripeChargeAmount(o), "currency", at)
	if err != nil {
		return nil, err
	}
	return captured(p), nil
}

// stripeUncaptured reports whether charge o says it was never captured
// (captured false, or amount_captured 0): an authorization, whose
// refunds Stripe makes itself to release it (reason
// expired_uncaptured_charge, or a PaymentIntent cancelled before its
// capture), moving no money.
func stripeUncaptured(o obj) (bool, error) {
	if ok, err := o.has("captured"); err != nil || ok {
		if err != nil {
			return false, err
		}
		if captured, err := o.flag("captured"); err != nil || !captured {
			return err == nil, err
		}
	}
	n, ok, err := o.amount("amount_captured")
	return err == nil && ok && n == 0, err
}

// stripeChargeAmount is the field of a charge's amount: amount_captured
// (what a partial capture booked) when there and not zero, else amount.
func stripeChargeAmount(o obj) string {
	if n, ok, err := o.amount("amount_captured"); err == nil && ok && n > 0 {
		return "amount_captured"
	}
	return "amount"
}

// stripeOrder is the application's order id: metadata.order_id, else the
// simulator's order_id.
func stripeOrder(o obj) (string, error) {
	meta, err := o.child("metadata")
	if err != nil {
		return "", err
	}
	order, err := meta.str("order_id")
	if err != nil || order != "" {
		return order, err
	}
	return o.str("order_id")
}

func stripeCheckout(e *event, o obj) ([]billing.Fact, error) {
	mode, err := o.str("mode")
	if err != nil {
		return nil, err
	}
	if mode == "setup" {
		return ignore("a setup Checkout Session moves no money")
	}
	status, err := o.str("payment_status")
	if err != nil {
		return nil, err
	}
	if status == "unpaid" {
		// An asynchronous payment method has not paid yet
		// (checkout.session.async_payment_succeeded will say when).
		return ignore("a Checkout Session not paid yet (payment_status unpaid)")
	}
	order, err := stripeOrder(o)
	if err == nil && order == "" {
		order, err = o.str("client_reference_id")
	}
	if err != nil {
		return nil, err
	}
	at, err := o.timeOr(e.at, "updated_at")
	if err != nil {
		return nil, err
	}
	pay, err := o.ref("payment_intent")
	if err != nil {
		return nil, err
	}
	if mode == "subscription" || (pay == "" && status == "no_payment_required") {
		// No one-off payment (customer.subscription.* and the invoices tell
		// the rest; a session of zero has none): the order is paid by the
		// subscription, else by the session.
		if order == "" {
			return ignore("a %s Checkout Session without an order id moves no money of its own", cmp.Or(mode, "payment"))
		}
		by, err := o.ref("subscription")
		if err == nil && by == "" {
			by, err = o.need("id")
		}
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.OrderPaid{OrderID: order, PaymentRef: by, At: at}}, nil
	}
	if pay == "" {
		return nil, malformed("field %q is missing", o.name("payment_intent"))
	}
	p, err := o.payment(pay, order, "amount_total", "currency", at)
	if err != nil {
		return nil, err
	}
	return captured(p), nil
}

// stripeRefunds maps the charge's listed refunds by the rules of
// refund.* (stripeRefund): succeeded or pending is a Refunded, failed or
// canceled a RefundFailed, requires_action nothing yet, any other status
// malformed. The charge itself is the Refunded's payment snapshot:
// amount_captured (what a partial capture booked) when there, else amount.
func stripeRefunds(e *event, o obj) ([]billing.Fact, error) {
	_, list, err := stripeRefundsOf(o)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		// API versions from 2022-11-15 no longer include the refunds: the
		// refund.* events carry them.
		return ignore("charge.refunded without refunds.data: the refund.* events count its refunds")
	}
	if uncaptured, err := stripeUncaptured(o); err != nil || uncaptured {
		if err != nil {
			return nil, err
		}
		return ignore("the refunds of a charge never captured release its authorization: no money moved")
	}
	pay, err := stripePaymentRef(o, "id")
	if err != nil {
		return nil, err
	}
	order, err := stripeOrder(o)
	if err != nil {
		return nil, err
	}
	snapAt, err := o.timeOr(e.at, "created_at", "created")
	if err != nil {
		return nil, err
	}
	if _, _, err := o.amount("amount_captured"); err != nil {
		return nil, err
	}
	snap, err := o.snapshot(pay, order, stripeChargeAmount(o), "currency", snapAt)
	if err != nil {
		return nil, err
	}
	release, err := stripePartialRelease(o, list)
	if err != nil {
		return nil, err
	}
	facts, err := stripeRefundList(e, o, list, pay, snap, release, false)
	if err != nil {
		return nil, err
	}
	if len(facts) == 0 {
		if release != "" {
			return ignore("the only refund of the charge (%s) released what its partial capture left uncaptured: no money moved", release)
		}
		return ignore("no refund of the charge has succeeded or failed yet")
	}
	return facts, nil
}

// stripeRefundList maps the refunds listed on charge o (refunds.data) of
// payment pay by the rules of refund.* (stripeRefund): succeeded or
// pending is a Refunded with the payment snapshot snap (nil: none), failed
// or canceled a RefundFailed, requires_action nothing yet, any other
// status malformed, or, when onPayment (the list is on a payment's own
// event), left out as listed says. The refund release (stripePartialRelease:
// the one that released what a partial capture left) moves no money and
// is left out.
func stripeRefundList(e *event, o obj, list []obj, pay string, snap *billing.Payment, release string, onPayment bool) ([]billing.Fact, error) {
	var facts []billing.Fact
	for _, r := range list {
		if released, err := stripeReleased(r); err != nil || released {
			if err != nil {
				return nil, err
			}
			continue
		}
		if release != "" {
			if id, err := r.str("id"); err != nil || id == release {
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		status, err := r.need("status")
		if err != nil {
			return nil, err
		}
		ref, err := r.need("id")
		if err != nil {
			return nil, err
		}
		switch status {
		case "succeeded", "pending":
		case "requires_action":
			continue
		case "failed", "canceled":
			at, err := r.timeOr(e.at, "updated_at", "created_at")
			if err != nil {
				return nil, err
			}
			facts = append(facts, billing.RefundFailed{PaymentRef: pay, RefundRef: ref, At: at})
			continue
		default:
			if onPayment {
				continue // left out, as listed says
			}
			return nil, errStatus(r, "status", status)
		}
		amount, err := r.needAmount("amount")
		if err != nil {
			return nil, err
		}
		cur, err := needCurrency("currency", r, o)
		if err != nil {
			return nil, err
		}
		at, err := r.timeOr(e.at, "created_at", "created")
		if err != nil {
			return nil, err
		}
		facts = append(facts, billing.Refunded{
			Payment: snap, PaymentRef: pay, RefundRef: ref, Amount: amount, Currency: cur, At: at,
		})
	}
	return facts, nil
}

// stripeRefund maps a Refund object (refund.created, refund.updated,
// refund.failed, charge.refund.updated): succeeded or pending is a
// Refunded (no Payment snapshot: a refund does not carry its payment's
// amount), failed or canceled a RefundFailed, requires_action nothing yet.
func stripeRefund(e *event, o obj) ([]billing.Fact, error) {
	if released, err := stripeReleased(o); err != nil || released {
		if err != nil {
			return nil, err
		}
		return ignore("a refund Stripe made to release an authorization never captured (expired_uncaptured_charge) moves no money")
	}
	if kind, err := o.kind("charge"); err != nil {
		return nil, err
	} else if kind == '{' {
		// Fetched with its charge expanded (and the charge's refunds): a
		// charge captured in part says which of its refunds released the
		// rest, as charge.refunded does.
		charge, err := o.child("charge")
		if err != nil {
			return nil, err
		}
		refunds, list, err := stripeRefundsOf(charge)
		if err != nil {
			return nil, err
		}
		if ok, err := refunds.has("data"); err != nil {
			return nil, err
		} else if !ok {
			// The charge's refunds not listed: this one decides alone only
			// while the charge counts no other refund (amount_refunded is
			// what the partial capture left uncaptured).
			list = nil
			a, _, err1 := charge.amount("amount")
			x, _, err2 := charge.amount("amount_captured")
			r, _, err3 := charge.amount("amount_refunded")
			if err := cmp.Or(err1, err2, err3); err != nil {
				return nil, err
			}
			if x < a && r == a-x {
				list = []obj{o}
			}
		}
		release, err := stripePartialRelease(charge, list)
		if err != nil {
			return nil, err
		}
		if id, err := o.str("id"); err != nil {
			return nil, err
		} else if release != "" && id == release {
			return ignore("refund %s released what the partial capture of charge %s left uncaptured: no money moved", id, release)
		}
	}
	status, err := o.need("status")
	if err != nil {
		return nil, err
	}
	if status == "requires_action" {
		return ignore("a refund that requires action has not refunded anything yet")
	}
	pay, err := stripePaymentRef(o, "charge")
	if err != nil {
		return nil, err
	}
	ref, err := o.need("id")
	if err != nil {
		return nil, err
	}
	switch status {
	case "succeeded", "pending":
		amount, err := o.needAmount("amount")
		if err != nil {
			return nil, err
		}
		cur, err := needCurrency("currency", o)
		if err != nil {
			return nil, err
		}
		at, err := o.timeOr(e.at, "created_at", "created")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.Refunded{PaymentRef: pay, RefundRef: ref, Amount: amount, Currency: cur, At: at}}, nil
	case "failed", "canceled":
		at, err := o.timeOr(e.at, "updated_at", "created_at")
		if err != nil {
			return nil, err
		}
		return []billing.Fact{billing.RefundFailed{PaymentRef: pay, RefundRef: ref, At: at}}, nil
	}
	return nil, errStatus(o, "status", status)
}

// stripeReleased reports whether refund r is one Stripe made itself to
// release an authorization never captured: reason
// expired_uncaptured_charge.
func stripeReleased(r obj) (bool, error) {
	reason, err := r.str("reason")
	return reason == stripecapture.ReasonReleased, err
}

// stripePartialRelease returns the id of the refund of list (the refunds
// of charge o, as listed on it) that released what a partial capture left
// uncaptured, "" when there is none: stripecapture.Release decides, as it
// does for the Stripe client's refund list (reconciliation), from the
// charge's amount, amount_captured and captured and each refund's amount,
// reason, status and created. That refund moves no money payhook booked
// (the payment is captured at amount_captured). A list that says more
// follow (has_more) has none: the release is the oldest refund.
func stripePartialRelease(o obj, list []obj) (string, error) {
	if uncaptured, err := stripeUncaptured(o); err != nil || uncaptured {
		return "", err
	}
	authorized, ok, err := o.amount("amount")
	if err != nil || !ok {
		return "", err
	}
	captured, ok, err := o.amount("amount_captured")
	if err != nil || !ok {
		return "", err
	}
	remainder := stripecapture.Remainder(authorized, captured, true)
	if remainder == 0 {
		return "", nil
	}
	// A list cut short (has_more: Stripe embeds a charge's newest refunds
	// only) does not have the release, the oldest, made at the capture:
	// a refund of its amount listed is one of captured money.
	embedded, err := o.child("refunds")
	if err != nil {
		return "", err
	}
	listed, err := embedded.has("data")
	if err != nil {
		return "", err
	}
	if more, err := embedded.flag("has_more"); err != nil || (more && listed) {
		return "", err
	}
	refunds := make([]stripecapture.Refund, len(list))
	for i, r := range list {
		reason, err1 := r.str("reason")
		status, err2 := r.str("status")
		amount, _, err3 := r.amount("amount")
		created, _, err4 := r.integer("created")
		if err := cmp.Or(err1, err2, err3, err4); err != nil {
			return "", err
		}
		refunds[i] = stripecapture.Refund{Amount: amount, Reason: reason, Status: status, Created: created}
	}
	i := stripecapture.Release(remainder, refunds)
	if i < 0 {
		return "", nil
	}
	return list[i].need("id")
}

// stripeRefundsOf returns charge o's embedded refunds (an empty object
// when it has none) and their list (refunds.data).
func stripeRefundsOf(o obj) (obj, []obj, error) {
	refunds, err := o.child("refunds")
	if err != nil {
		return obj{}, nil, err
	}
	list, err := refunds.list("data")
	return refunds, list, err
}

// stripeDispute returns a dispute's payment and id.
func stripeDispute(o obj) (pay, dispute string, err error) {
	if pay, err = stripePaymentRef(o, "charge"); err != nil {
		return "", "", err
	}
	if dispute, err = o.need("id"); err != nil {
		return "", "", err
	}
	return pay, dispute, nil
}

func stripeSubscription(e *event, o obj) ([]billing.Fact, error) {
	s, err := subscriptionBase(o, "id", "customer")
	if err != nil {
		return nil, err
	}
	items, err := o.child("items")
	if err != nil {
		return nil, err
	}
	list, err := items.list("data")
	if err != nil {
		return nil, err
	}
	var item obj
	if len(list) > 0 {
		item = list[0]
	}
	// plan.id (the simulator, older API versions), else the first item's
	// price.
	plan, err := o.child("plan")
	if err == nil {
		s.Plan, err = plan.str("id")
	}
	if err == nil && s.Plan == "" {
		var price obj
		if price, err = item.child("price"); err == nil {
			s.Plan, err = price.str("id")
		}
	}
	if err != nil {
		return nil, err
	}
	// current_period_end moved to the items in API version 2025-03-31.
	if s.CurrentPeriodEnd, err = o.timeOr(timeZero, "current_period_end"); err != nil {
		return nil, err
	}
	if s.CurrentPeriodEnd.IsZero() {
		if s.CurrentPeriodEnd, err = item.timeOr(timeZero, "current_period_end"); err != nil {
			return nil, err
		}
	}
	if s.UpdatedAt, err = stripeUpdatedAt(e, o); err != nil {
		return nil, err
	}
	if s.Status, err = stripeStatus(e, o, s); err != nil {
		return nil, err
	}
	if s.Status == "ended" {
		if s.EndedAt, err = o.timeOr(timeZero, "ended_at"); err != nil {
			return nil, err
		}
	}
	return []billing.Fact{s}, nil
}

// stripeUpdatedAt is when the subscription took the state o describes:
// updated_at_ns (unix nanoseconds, which the simulator adds to the
// subscriptions its API returns, so that a fetched state orders against
// the others even within one second), else updated_at (the simulator's
// events, whole seconds), else the event's time.
func stripeUpdatedAt(e *event, o obj) (time.Time, error) {
	ns, ok, err := o.integer("updated_at_ns")
	switch {
	case err != nil:
		return time.Time{}, malformed("field %q is not an integer of unix nanoseconds", o.name("updated_at_ns"))
	case ok:
		t := time.Unix(0, ns).UTC()
		return t, payhook.CheckTime(o.name("updated_at_ns"), t)
	}
	return o.timeOr(e.at, "updated_at")
}

// stripeStatus maps a Stripe subscription status to active, canceled or
// ended, or keeps a status of a subscription not paid for (past_due,
// unpaid, incomplete, paused), which grants no access.
func stripeStatus(e *event, o obj, s billing.Subscription) (string, error) {
	if e.typ == "customer.subscription.deleted" {
		return "ended", nil
	}
	status, err := o.need("status")
	if err != nil {
		return "", err
	}
	endsAtPeriodEnd, err := o.flag("cancel_at_period_end")
	if err != nil {
		return "", err
	}
	cancelAt, err := o.has("cancel_at")
	if err != nil {
		return "", err
	}
	ended, err := o.has("ended_at")
	if err != nil {
		return "", err
	}
	switch status {
	case "active", "trialing":
		if endsAtPeriodEnd || cancelAt {
			return "canceled", nil
		}
		return "active", nil
	case "past_due", "unpaid", "incomplete", "paused":
		// Not paid for: no access, whether or not it is set to cancel.
		return status, nil
	case "canceled":
		// Canceled but still running until its period ends; with ended_at,
		// or once the period is over, it has ended.
		if !ended && (endsAtPeriodEnd || s.CurrentPeriodEnd.After(e.at)) {
			return "canceled", nil
		}
		return "ended", nil
	case "incomplete_expired", "ended":
		return "ended", nil
	}
	return "", errStatus(o, "status", status)
}
