package stripe

import (
	"context"
	"encoding/json"
	"fmt"
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
// that a payment_intent.succeeded delivered after a refund applies it too;
// a refund with its charge and the charge's refunds
// (expand[]=charge.refunds), so that a refund that released what a
// partial capture left uncaptured is told from a refund of captured money.
var resources = adapter.Resources{
	"checkout.session.completed":               {Path: object, Route: "v1/checkout/sessions/{id}"},
	"checkout.session.async_payment_succeeded": {Path: object, Route: "v1/checkout/sessions/{id}"},
	"payment_intent.succeeded": {Path: object, Route: "v1/payment_intents/{id}",
		Query: url.Values{"expand[]": {"latest_charge.refunds"}}},
	"charge.succeeded":        {Path: object, Route: "v1/charges/{id}"},
	"charge.captured":         {Path: object, Route: "v1/charges/{id}"},
	"charge.refunded":         {Path: object, Route: "v1/charges/{id}", Query: url.Values{"expand[]": {"refunds"}}},
	"refund.*":                {Path: object, Route: "v1/refunds/{id}", Query: url.Values{"expand[]": {"charge.refunds"}}},
	"charge.refund.updated":   {Path: object, Route: "v1/refunds/{id}", Query: url.Values{"expand[]": {"charge.refunds"}}},
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
//
// Stripe expands at most 10 of a charge's refunds: when its list says
// has_more, the rest are listed (GET /v1/refunds?charge=...&starting_after=,
// every page) and added to it, so that the fetched charge lists them all.
func (c *Client) Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	return adapter.FetchResource(ctx, "stripe", resources, ev, func(ctx context.Context, r adapter.Resource, id, _ string) ([]byte, error) {
		b, err := apiget.Object(ctx, c.HTTP, c.BaseURL, c.Key, r.URLPath(id), r.Query, c.versionHeader())
		if err != nil {
			return nil, err
		}
		switch r.Query.Get("expand[]") {
		case "refunds":
			return c.allRefunds(ctx, b)
		case "latest_charge.refunds":
			return c.allRefunds(ctx, b, "latest_charge")
		case "charge.refunds":
			return c.allRefunds(ctx, b, "charge")
		}
		return b, nil
	})
}

// refundList is the part of a Stripe list of refunds that paging reads.
type refundList struct {
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

// allRefunds returns object b (at path in it: the charge) with every
// refund of the charge in its refunds list: when the list says has_more,
// the rest are listed after its last one and added, and has_more is set
// to false. An object without such a list is returned as it is. A page
// that is not a list of refunds, lists nothing while saying more follow,
// or repeats a refund is an error (to be retried).
func (c *Client) allRefunds(ctx context.Context, b []byte, path ...string) ([]byte, error) {
	var o map[string]json.RawMessage
	if err := json.Unmarshal(b, &o); err != nil {
		return b, nil // not an object: the mapping says why
	}
	if len(path) > 0 {
		inner := o[path[0]]
		if len(inner) == 0 || inner[0] != '{' {
			return b, nil // not expanded
		}
		nb, err := c.allRefunds(ctx, inner, path[1:]...)
		if err != nil {
			return nil, err
		}
		o[path[0]] = nb
		return json.Marshal(o)
	}
	var list refundList
	if err := json.Unmarshal(o["refunds"], &list); err != nil || !list.HasMore {
		return b, nil
	}
	var charge string
	if err := json.Unmarshal(o["id"], &charge); err != nil || charge == "" {
		return nil, fmt.Errorf("stripe: a charge whose refunds say more follow has no id: %w", payhook.ErrMalformed)
	}
	seen := map[string]bool{}
	last := ""
	for _, r := range list.Data {
		if last = refundID(r); last != "" {
			seen[last] = true
		}
	}
	for list.HasMore {
		if last == "" {
			return nil, fmt.Errorf("stripe: the refunds of charge %s say more follow after one without an id", charge)
		}
		q := url.Values{"charge": {charge}, "starting_after": {last}, "limit": {"100"}}
		page, _, err := apiget.ListWith(ctx, c.HTTP, c.BaseURL, c.Key, "v1/refunds", q, c.versionHeader())
		if err != nil {
			return nil, fmt.Errorf("stripe: list the refunds of charge %s after %s: %w", charge, last, err)
		}
		var p refundList
		if err := json.Unmarshal(page, &p); err != nil || p.Data == nil {
			return nil, fmt.Errorf("stripe: list the refunds of charge %s after %s: the answer is not a list (%.100q)", charge, last, page)
		}
		if p.HasMore && len(p.Data) == 0 {
			return nil, fmt.Errorf("stripe: list the refunds of charge %s after %s: a page that says more follow lists nothing", charge, last)
		}
		for _, r := range p.Data {
			id := refundID(r)
			if id == "" || seen[id] {
				return nil, fmt.Errorf("stripe: list the refunds of charge %s after %s: a refund without an id or listed twice (%q)", charge, last, id)
			}
			seen[id], last = true, id
		}
		list.Data, list.HasMore = append(list.Data, p.Data...), p.HasMore
	}
	var refunds map[string]json.RawMessage
	if err := json.Unmarshal(o["refunds"], &refunds); err != nil {
		return nil, fmt.Errorf("stripe: the refunds of charge %s: %w", charge, err)
	}
	var err error
	if refunds["data"], err = json.Marshal(list.Data); err != nil {
		return nil, fmt.Errorf("stripe: the refunds of charge %s: %w", charge, err)
	}
	refunds["has_more"] = json.RawMessage("false")
	if o["refunds"], err = json.Marshal(refunds); err != nil {
		return nil, fmt.Errorf("stripe: the refunds of charge %s: %w", charge, err)
	}
	return json.Marshal(o)
}

// refundID is a listed refund's id; "" if it has none.
func refundID(r json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(r, &v) != nil {
		return ""
	}
	return v.ID
}
