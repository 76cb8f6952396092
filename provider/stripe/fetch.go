package stripe

import (
	"context"
	"net/url"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

// object is where every Stripe event carries its object.
var object = []string{"data", "object"}

// resources are the objects Stripe's events are about, by event type, and
// the routes that retrieve them. A charge is fetched with its refunds
// (expand[]=refunds: API versions from 2022-11-15 leave them out), so that
// charge.refunded maps each refund by its current status; a payment
// intent with its latest charge's (expand[]=latest_charge.refunds), so
// that a payment_intent.succeeded delivered after a refund applies it too.
var resources = adapter.Resources{
	"checkout.session.completed":               {Path: object, Route: "v1/checkout/sessions/{id}"},
	"checkout.session.async_payment_succeeded": {Path: object, Route: "v1/checkout/sessions/{id}"},
	"payment_intent.succeeded": {Path: object, Route: "v1/payment_intents/{id}",
		Query: url.Values{"expand[]": {"latest_charge.refunds"}}},
	"charge.succeeded":        {Path: object, Route: "v1/charges/{id}"},
	"charge.captured":         {Path: object, Route: "v1/charges/{id}"},
	"charge.refunded":         {Path: object, Route: "v1/charges/{id}", Query: url.Values{"expand[]": {"refunds"}}},
	"refund.*":                {Path: object, Route: "v1/refunds/{id}"},
	"charge.refund.updated":   {Path: object, Route: "v1/refunds/{id}"},
	"charge.dispute.*":        {Path: object, Route: "v1/disputes/{id}"},
	"customer.subscription.*": {Path: object, Route: "v1/subscriptions/{id}"},
}

// Fetch returns the current state of the object ev is about, as GET
// /v1/... answers it in the client's pinned Stripe-Version: the checkout
// session, payment intent, charge (with its refunds), refund, dispute or
// subscription of its data.object.id; nil for the types it does not
// fetch (ping, invoice.paid, ...). Its errors are adapter.Client's: one
// wrapping payhook.ErrNotFound for a 404, one wrapping
// payhook.ErrMalformed when the event names no object, others (the API
// unreachable, a timeout, a 429 or a 5xx, an answer that is not the
// object) to be retried.
func (c *Client) Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	return adapter.FetchResource(ctx, "stripe", resources, ev, func(ctx context.Context, r adapter.Resource, id, _ string) ([]byte, error) {
		return apiget.Object(ctx, c.HTTP, c.BaseURL, c.Key, r.URLPath(id), r.Query, c.versionHeader())
	})
}
