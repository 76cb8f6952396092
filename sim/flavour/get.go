package flavour

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Kinds of objects a Getter retrieves beside a Lister's.
const (
	// ObjectCheckout is a checkout (Stripe: a Checkout Session).
	ObjectCheckout = "checkout"
	// ObjectCharge is a payment rendered as the charge that captured it
	// (Stripe; the sim's payment is both its payment intent and its
	// charge).
	ObjectCharge = "charge"
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
// dispute's is its payment's; a charge's also holds "refunds", the
// neutral data of the payment's refunds), and, for a subscription, Type
// the neutral type of its last change.
type Getter interface {
	// GetPaths maps each retrieve route, with an {id} wildcard, e.g.
	// "/v1/disputes/{id}", to the kind of object it returns
	// (ObjectPayment, ObjectCharge, ObjectRefund, ObjectDispute,
	// ObjectCheckout, ObjectSubscription).
	GetPaths() map[string]string
	// GetObject renders one object of kind. expand are the request's
	// expand[] values (Stripe: "refunds" on a charge).
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
// intent stays succeeded once captured, whatever was refunded since (the
// charge says that); a charge lists its refunds only when expand holds
// "refunds", as Stripe's API versions from 2022-11-15 do; a dispute is
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
		o = stripeObject(Event{Type: PaymentSucceeded, Data: d})
		o["status"] = "succeeded"
		o["created"] = obj.CreatedAt.Unix()
	case ObjectCharge:
		refunds, _ := d["refunds"].([]map[string]any)
		o = stripeListed(ObjectPayment, obj)
		if slices.Contains(expand, "refunds") {
			data := make([]any, len(refunds))
			for i, r := range refunds {
				data[i] = stripeListed(ObjectRefund, Event{CreatedAt: obj.CreatedAt, Data: r})
				if at, ok := r["created_at"]; ok {
					data[i].(map[string]any)["created"] = unix(at)
				}
			}
			o["refunds"] = map[string]any{"object": "list", "data": data, "has_more": false,
				"url": "/v1/charges/" + str(d, "id") + "/refunds"}
		}
	case ObjectRefund, ObjectDispute:
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
