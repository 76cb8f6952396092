package flavour

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Kinds of objects a Getter retrieves beside a Lister's.
const (
	// ObjectCheckout is a checkout (Stripe: a Checkout Session).
	ObjectCheckout = "checkout"
	// ObjectCharge is a payment rendered as the charge that captured it
	// (Stripe; the sim's payment is both its payment intent and its
	// charge).
	ObjectCharge = "charge"
	// ObjectTransaction is a payment, a checkout or a crypto invoice by
	// its id, Paddle's one entity for the three: the Event's Type says
	// which (ObjectPayment, ObjectCheckout or ObjectInvoice); a payment's
	// Data also holds "refunds", as a charge's.
	ObjectTransaction = "transaction"
	// ObjectInvoice is a crypto invoice (an ObjectTransaction's Type).
	ObjectInvoice = "invoice"
)

// Getter is implemented by flavours whose API retrieves one object by id,
// in the provider's shape, for each kind of object their events are about:
// what a receiver fetches to act on the object's current state rather
// than on the event's snapshot. The sim's API adds these routes when its
// flavour has them (billete's own routes, GET /payments/{id} and the
// others, serve its neutral objects).
//
// The object comes as an Event, as a Lister's: ID its id (a dispute's is
// its DisputeID), CreatedAt when it was created, Data its neutral data (a
// dispute's is its payment's; a payment's and a charge's also hold
// "refunds", the neutral data of the payment's refunds), and, for a subscription, Type
// the neutral type of its last change.
type Getter interface {
	// GetPaths maps each retrieve route, with an {id} wildcard, e.g.
	// "/v1/disputes/{id}", to the kind of object it returns
	// (ObjectPayment, ObjectCharge, ObjectRefund, ObjectDispute,
	// ObjectCheckout, ObjectTransaction, ObjectSubscription).
	GetPaths() map[string]string
	// GetObject renders one object of kind. expand are the request's
	// expand[] values (Stripe: "refunds" on a charge), or its include
	// values (Paddle: "adjustments" on a transaction).
	GetObject(kind string, obj Event, expand []string) ([]byte, error)
}

// GetPaths: Stripe's retrieve routes of checkout sessions, payment
// intents, charges, refunds and disputes (subscriptions are Retriever's).
func (stripeFlavour) GetPaths() map[string]string {
	return map[string]string{
		"/v1/checkout/sessions/{id}": ObjectCheckout,
		"/v1/payment_intents/{id}":   ObjectPayment,
		"/v1/charges/{id}":           ObjectCharge,
		"/v1/refunds/{id}":           ObjectRefund,
		"/v1/disputes/{id}":          ObjectDispute,
	}
}

// GetObject renders an object as Stripe's retrieve answers it: a payment
// intent stays succeeded once captured, whatever was refunded since (its
// latest_charge says that, expanded with expand "latest_charge" or
// "latest_charge.refunds"); a charge lists its refunds only when expand
// holds "refunds", as Stripe's API versions from 2022-11-15 do; a refund
// names its charge, expanded when expand holds "charge" or
// "charge.refunds" (with the charge's refunds); a dispute is
// needs_response while its payment is charged back, else won; a checkout
// session is complete and paid once completed, else open and unpaid.
func (stripeFlavour) GetObject(kind string, obj Event, expand []string) ([]byte, error) {
	d := obj.Data
	var o map[string]any
	switch kind {
	case ObjectCheckout:
		o = stripeObject(Event{Type: CheckoutCompleted, Data: d})
		if str(d, "status") != "completed" {
			o["status"], o["payment_status"] = "open", "unpaid"
		}
		o["created"] = obj.CreatedAt.Unix()
	case ObjectPayment:
		pd := clone(d)
		delete(pd, "refunds")
		o = stripeObject(Event{Type: PaymentSucceeded, Data: pd})
		o["status"] = "succeeded"
		o["created"] = obj.CreatedAt.Unix()
		o["latest_charge"] = d["id"]
		if slices.Contains(expand, "latest_charge") || slices.Contains(expand, "latest_charge.refunds") {
			o["latest_charge"] = stripeCharge(obj, slices.Contains(expand, "latest_charge.refunds"))
		}
	case ObjectCharge:
		o = stripeCharge(obj, slices.Contains(expand, "refunds"))
	case ObjectRefund:
		// Data's "payment" (its payment, with "refunds") is rendered as
		// the expanded charge only when expand asks.
		rd := clone(d)
		switch pay, _ := rd["payment"].(map[string]any); {
		case pay == nil:
		case slices.Contains(expand, "charge.refunds"):
		case slices.Contains(expand, "charge"):
			pay = clone(pay)
			delete(pay, "refunds")
			rd["payment"] = pay
		default:
			delete(rd, "payment")
		}
		o = stripeListed(kind, Event{CreatedAt: obj.CreatedAt, Data: rd})
	case ObjectDispute:
		o = stripeListed(kind, obj)
	default:
		return nil, fmt.Errorf("stripe: no retrieve route for %s objects", kind)
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("stripe: render %s %s: %w", kind, obj.ID, err)
	}
	return b, nil
}

// expandedRefunds is how many refunds Stripe lists on a charge whose
// refunds are expanded; has_more says more follow.
const expandedRefunds = 10

// stripeCharge renders a payment as its charge, with its refunds when
// refunds is true (Data's "refunds"): the first expandedRefunds, in the
// order GET /v1/refunds lists them.
func stripeCharge(obj Event, refunds bool) map[string]any {
	d := obj.Data
	o := stripeListed(ObjectPayment, obj)
	if refunds {
		rs, _ := d["refunds"].([]map[string]any)
		data := make([]any, len(rs))
		for i, r := range rs {
			ro := stripeListed(ObjectRefund, Event{CreatedAt: obj.CreatedAt, Data: r})
			if at, ok := r["created_at"]; ok {
				ro["created"] = unix(at)
			}
			data[i] = ro
		}
		// Stripe expands the first 10 only; GET /v1/refunds?charge=
		// lists the rest.
		more := len(data) > expandedRefunds
		if more {
			data = data[:expandedRefunds]
		}
		o["refunds"] = map[string]any{"object": "list", "data": data, "has_more": more,
			"url": "/v1/charges/" + str(d, "id") + "/refunds"}
	}
	return o
}

// GetPaths: Paddle's get-a-transaction and get-a-subscription routes.
// Paddle has no route of one adjustment: a transaction lists its
// adjustments with include=adjustments.
func (paddleFlavour) GetPaths() map[string]string {
	return map[string]string{"/transactions/{id}": ObjectTransaction, "/subscriptions/{id}": ObjectSubscription}
}

// GetObject renders an entity as Paddle's get routes answer it,
// {"data": entity, "meta": {"request_id"}}: a payment as a completed
// transaction, a checkout as its completed transaction (ready while
// open), a crypto invoice as its transaction with chain_ref, a
// subscription as of its last change. With expand "adjustments" a
// payment's transaction lists its adjustments as the adjustments list
// renders them (a refund's, its chargeback's, reversed once won) plus, once
// won, the chargeback_reverse adjustment its event carries.
func (paddleFlavour) GetObject(kind string, obj Event, expand []string) ([]byte, error) {
	d := obj.Data
	var o map[string]any
	switch {
	case kind == ObjectSubscription:
		o = paddleListed(ObjectSubscription, obj)
	case kind != ObjectTransaction:
		return nil, fmt.Errorf("paddle: no get route for %s objects", kind)
	case obj.Type == ObjectPayment:
		o = paddleListed(ObjectPayment, obj)
		if slices.Contains(expand, "adjustments") {
			adjustments := []any{}
			refunds, _ := d["refunds"].([]map[string]any)
			for _, r := range refunds {
				at, _ := time.Parse(time.RFC3339Nano, str(r, "created_at"))
				adjustments = append(adjustments, paddleListed(ObjectAdjustment, Event{Type: ObjectRefund, CreatedAt: at, Data: r}))
			}
			if str(d, "dispute_id") != "" {
				at, _ := time.Parse(time.RFC3339Nano, str(d, "charged_back_at"))
				adjustments = append(adjustments, paddleListed(ObjectAdjustment, Event{Type: ObjectDispute, CreatedAt: at, Data: d}))
				if str(d, "status") != "charged_back" {
					won, _ := time.Parse(time.RFC3339Nano, str(d, "updated_at"))
					adjustments = append(adjustments, paddleEntity(Event{Type: ChargebackWon, CreatedAt: won, Data: d}))
				}
			}
			o["adjustments"] = adjustments
		}
	case obj.Type == ObjectCheckout:
		o = paddleEntity(Event{Type: CheckoutCompleted, Data: d})
		if str(d, "status") != "completed" {
			o["status"] = "ready"
		}
	default:
		o = paddleEntity(Event{Type: InvoiceSettled, Data: d})
		if str(d, "status") != "settled" {
			o["status"] = "ready"
		}
	}
	b, err := json.Marshal(map[string]any{"data": o, "meta": map[string]any{"request_id": paddleRequestID()}})
	if err != nil {
		return nil, fmt.Errorf("paddle: render %s %s: %w", kind, obj.ID, err)
	}
	return b, nil
}
