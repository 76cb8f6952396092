package billete

import (
	"context"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

// data is where billete's events carry their object.
var data = []string{"data"}

// resources are the objects billete's events are about, by event type,
// and the routes that retrieve them. payment.refunded carries the payment
// in data and the refund it is about in data.refund: the refund is
// fetched, in its place, since it is what the event says moved.
var resources = adapter.Resources{
	"checkout.completed":     {Path: data, Route: "checkouts/{id}"},
	"payment.succeeded":      {Path: data, Route: "payments/{id}"},
	"payment.refunded":       {Path: []string{"data", "refund"}, Route: "refunds/{id}"},
	"refund.failed":          {Path: data, Route: "refunds/{id}"},
	"payment.charged_back":   {Path: data, Route: "payments/{id}"},
	"payment.chargeback_won": {Path: data, Route: "payments/{id}"},
	"subscription.*":         {Path: data, Route: "subscriptions/{id}"},
	"invoice.settled":        {Path: data, Route: "invoices/{id}"},
}

// Fetch returns the current state of the object ev is about, as the API
// answers it in the client's pinned version: the checkout, payment,
// refund, subscription or invoice of its data.id (data.refund.id for
// payment.refunded); nil for the types it does not fetch
// (webhook_endpoint.test, ...). Its errors are adapter.Client's: one
// wrapping payhook.ErrNotFound for a 404, one wrapping
// payhook.ErrMalformed when the event names no object, others (the API
// unreachable, a timeout, a 429 or a 5xx, an answer that is not the
// object) to be retried.
func (c *Client) Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	return adapter.FetchResource(ctx, "billete", resources, ev, func(ctx context.Context, r adapter.Resource, id, _ string) ([]byte, error) {
		return apiget.Object(ctx, c.HTTP, c.BaseURL, c.Key, r.URLPath(id), r.Query, c.versionHeader())
	})
}
