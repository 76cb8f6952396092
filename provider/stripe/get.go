package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.ObjectGetter = (*Client)(nil)

// getPaths are Stripe's retrieve routes by object kind, "{id}" standing
// for the object's (path-escaped) id: a payment is its payment intent,
// as ListObjects names a charge by its payment_intent.
var getPaths = map[string]string{
	adapter.KindPayment:      "v1/payment_intents/{id}",
	adapter.KindSubscription: "v1/subscriptions/{id}",
}

// chargePaths retrieve a payment that has no payment intent (a ch_
// reference, the Charges API's: ListObjects names it by its charge id)
// as its charge.
var chargePaths = map[string]string{adapter.KindPayment: "v1/charges/{id}"}

// GetObject returns the object of kind whose reference is ref, read as
// ListObjects reads a listed one, in the pinned Stripe-Version if any
// (APIVersion the answer's Stripe-Version):
//
//   - a subscription: GET /v1/subscriptions/{id} (its status as payhook's
//     Stripe mapping says it, its plan or first price, created);
//   - a payment: GET /v1/payment_intents/{id}?expand[]=latest_charge, read
//     from its latest charge (captured amount, amount_refunded, the
//     status they give) with the payment intent's id; a ch_ reference
//     (a charge without a payment intent) GET /v1/charges/{id}. A payment
//     intent or charge that captured nothing is the payment at the
//     provider all the same: Status is Stripe's status of it ("failed",
//     "pending", "uncaptured" for an authorization never captured, or
//     the payment intent's own, such as "canceled", when it has no
//     charge), Amount 0.
//
// Its errors are adapter.ObjectGetter's: a 404 wraps payhook.ErrNotFound,
// another kind payhook.ErrInvalid, an answer that is not that object
// payhook.ErrMalformed.
func (c *Client) GetObject(ctx context.Context, kind, ref string) (adapter.Object, error) {
	routes, q := getPaths, url.Values(nil)
	switch {
	case kind == adapter.KindPayment && strings.HasPrefix(ref, "ch_"):
		routes = chargePaths
	case kind == adapter.KindPayment:
		q = url.Values{"expand[]": {"latest_charge"}}
	}
	o, err := adapter.GetObject(kind, ref, routes, func(path string) ([]byte, http.Header, error) {
		return apiget.ObjectWith(ctx, c.HTTP, c.BaseURL, c.Key, path, q, c.versionHeader())
	}, func(b []byte, h http.Header) (adapter.Object, error) {
		version := h.Get(VersionHeader)
		if kind == adapter.KindPayment && q != nil {
			return paymentIntent(b, version)
		}
		var l listed
		if err := json.Unmarshal(b, &l); err != nil {
			return adapter.Object{}, fmt.Errorf("the answer is not a Stripe object (%.100q): %w", b, payhook.ErrMalformed)
		}
		o, keep, err := l.object(kind, version)
		if err == nil && !keep {
			o = l.uncaptured(o)
		}
		return o, err
	})
	if err != nil {
		return adapter.Object{}, fmt.Errorf("stripe: %w", err)
	}
	return o, nil
}

// paymentIntent reads a retrieved payment intent whose latest_charge is
// expanded as the payment its charge is, named by the payment intent.
func paymentIntent(b []byte, version string) (adapter.Object, error) {
	var pi struct {
		ID           string          `json:"id"`
		Object       string          `json:"object"`
		Status       string          `json:"status"`
		Currency     string          `json:"currency"`
		Created      int64           `json:"created"`
		LatestCharge json.RawMessage `json:"latest_charge"`
	}
	if err := json.Unmarshal(b, &pi); err != nil || pi.Object != "payment_intent" || pi.ID == "" || pi.Created <= 0 {
		return adapter.Object{}, fmt.Errorf("the answer is not a Stripe payment intent with an id and created (%.100q): %w", b, payhook.ErrMalformed)
	}
	if len(pi.LatestCharge) == 0 || string(pi.LatestCharge) == "null" {
		// No charge: nothing was ever captured.
		return adapter.Object{Kind: adapter.KindPayment, Ref: pi.ID, Status: pi.Status, Currency: strings.ToUpper(pi.Currency),
			Created: time.Unix(pi.Created, 0).UTC(), APIVersion: version}, nil
	}
	var l listed
	if err := json.Unmarshal(pi.LatestCharge, &l); err != nil {
		return adapter.Object{}, fmt.Errorf("payment intent %s: latest_charge is not an expanded charge (%.100q): %w", pi.ID, pi.LatestCharge, payhook.ErrMalformed)
	}
	o, keep, err := l.object(adapter.KindPayment, version)
	if err != nil {
		return adapter.Object{}, fmt.Errorf("payment intent %s: latest_charge: %w", pi.ID, err)
	}
	if !keep {
		o = l.uncaptured(o)
	}
	o.Ref = pi.ID
	return o, nil
}

// uncaptured is the retrieved payment o of a charge that captured
// nothing (ListObjects leaves such charges out): Stripe's status of it,
// or "uncaptured" for an authorization Stripe says succeeded of, no
// amount.
func (l listed) uncaptured(o adapter.Object) adapter.Object {
	o.Status, o.Amount, o.RefundedAmount = l.Status, 0, 0
	if o.Status == "succeeded" {
		o.Status = "uncaptured"
	}
	if pay := idOf(l.PaymentIntent); pay != "" {
		o.Ref = pay
	}
	return o
}
