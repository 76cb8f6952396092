package paddle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

// data is where Paddle's notifications carry their entity.
var data = []string{"data"}

// withAdjustments asks a transaction with its adjustments: a transaction
// event then also applies what was refunded or charged back since.
var withAdjustments = url.Values{"include": {"adjustments"}}

// resources are the entities Paddle's notifications are about, by event
// type, and the routes that retrieve them. Paddle has no route of one
// adjustment: it is read from its transaction (GET
// /transactions/{transaction_id}?include=adjustments), which lists it.
var resources = adapter.Resources{
	"transaction.completed": {Path: data, Route: "transactions/{id}", Query: withAdjustments},
	"transaction.paid":      {Path: data, Route: "transactions/{id}", Query: withAdjustments},
	"adjustment.*":          {Path: data, Route: "transactions/{id}", RouteField: "transaction_id", Query: withAdjustments},
	"subscription.*":        {Path: data, Route: "subscriptions/{id}"},
}

// Fetch returns the current state of the entity ev is about, as Paddle's
// API answers it (the data of {"data": ..., "meta": ...}) in the client's
// pinned Paddle-Version: the transaction or subscription of its data.id,
// or the adjustment data.id as its transaction (data.transaction_id)
// lists it; nil for the types it does not fetch (notification.test,
// ...). Its errors are adapter.Client's: one wrapping payhook.ErrNotFound
// for a 404 (and for an adjustment its transaction does not list), one
// wrapping payhook.ErrMalformed when the event names no entity, others
// (the API unreachable, a timeout, a 429 or a 5xx, an answer that is not
// the entity) to be retried.
func (c *Client) Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	return adapter.FetchResource(ctx, "paddle", resources, ev, func(ctx context.Context, r adapter.Resource, routeID, id string) ([]byte, error) {
		b, err := apiget.Object(ctx, c.HTTP, c.BaseURL, c.Key, r.URLPath(routeID), r.Query, c.versionHeader())
		if err != nil {
			return nil, err
		}
		var answer struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &answer); err != nil || len(answer.Data) == 0 {
			return nil, fmt.Errorf("GET /%s: the answer has no data (%.100q)", r.URLPath(routeID), b)
		}
		if r.RouteField == "" {
			return answer.Data, nil
		}
		var parent struct {
			Adjustments []json.RawMessage `json:"adjustments"`
		}
		if err := json.Unmarshal(answer.Data, &parent); err != nil {
			return nil, fmt.Errorf("GET /%s: data.adjustments is not a list of objects: %v", r.URLPath(routeID), err)
		}
		for _, a := range parent.Adjustments {
			var head struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(a, &head) == nil && head.ID == id {
				return a, nil
			}
		}
		return nil, fmt.Errorf("GET /%s: transaction %s lists no adjustment %s: %w", r.URLPath(routeID), routeID, id, payhook.ErrNotFound)
	})
}
