package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

// Retention is how far back Stripe's events API lists events: 30 days.
const Retention = 30 * 24 * time.Hour

var (
	_ adapter.EventLister    = (*Client)(nil)
	_ adapter.EventRetention = (*Client)(nil)
)

// ListEvents returns one page of GET /v1/events: created[gte] q.From (in
// unix seconds), type (one type) or types[] (several), delivery_success=false
// when q.Undelivered, starting_after q.Cursor, limit q.Limit (1 to 100,
// default 100), with Stripe-Version when the client pins one. Stripe lists
// newest first; Next is the last event's id when has_more. Errors are
// adapter.EventLister's.
func (c *Client) ListEvents(ctx context.Context, q adapter.EventQuery) (adapter.EventPage, error) {
	v := url.Values{}
	limit := q.Limit
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	v.Set("limit", strconv.Itoa(limit))
	if !q.From.IsZero() {
		v.Set("created[gte]", strconv.FormatInt(q.From.Unix(), 10))
	}
	if len(q.Types) == 1 {
		v.Set("type", q.Types[0])
	} else {
		for _, t := range q.Types {
			v.Add("types[]", t)
		}
	}
	if q.Undelivered {
		v.Set("delivery_success", "false")
	}
	if q.Cursor != "" {
		v.Set("starting_after", q.Cursor)
	}
	b, _, err := apiget.ListWith(ctx, c.HTTP, c.BaseURL, c.Key, "v1/events", v, c.versionHeader())
	if err != nil {
		return adapter.EventPage{}, fmt.Errorf("stripe: list events: %w", err)
	}
	var list struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
	}
	if err := json.Unmarshal(b, &list); err != nil || list.Object != "list" || list.Data == nil {
		return adapter.EventPage{}, fmt.Errorf("stripe: list events: the answer is not a Stripe list (%.100q): %w", b, payhook.ErrMalformed)
	}
	events := make([][]byte, len(list.Data))
	for i, d := range list.Data {
		events[i] = d
	}
	var next string
	if list.HasMore && len(events) > 0 {
		var last struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(events[len(events)-1], &last); last.ID == "" {
			return adapter.EventPage{}, fmt.Errorf("stripe: list events: the page's last event has no id to page on: %w", payhook.ErrMalformed)
		}
		next = last.ID
	}
	page, err := adapter.NewEventPage(events, list.HasMore, next)
	if err != nil {
		return adapter.EventPage{}, fmt.Errorf("stripe: list events: %w", err)
	}
	return page, nil
}

// EventRetention is Retention: Stripe lists the events of the last 30
// days only.
func (c *Client) EventRetention() time.Duration { return Retention }
