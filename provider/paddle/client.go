package paddle

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Client reads Paddle Billing's API (or the simulator's paddle flavour)
// with an API key: its events list, for backfill, and its transactions,
// adjustments and subscriptions, for reconciliation.
type Client struct {
	// BaseURL is the API's address, e.g. "https://api.paddle.com" (or
	// "https://sandbox-api.paddle.com").
	BaseURL string
	// Key is the API key; it selects the environment.
	Key string
	// HTTP sends the requests; nil means a client with a 10 s timeout.
	HTTP *http.Client
	// APIVersion, if set, is the version every request pins
	// (Paddle-Version).
	APIVersion string
}

var (
	_ adapter.Client      = (*Client)(nil)
	_ adapter.EventLister = (*Client)(nil)
)

// ListEvents returns one page of GET /events: event_type q.Types
// (comma-separated), after q.Cursor, per_page q.Limit (1 to 200, default
// 100), with the pinned Paddle-Version if any. Paddle lists oldest first (by id) and cannot filter by time, so
// q.From is left to the caller; q.Undelivered is refused (Paddle's list
// does not say which events were delivered). Next is the after of
// meta.pagination.next when has_more. Errors are adapter.EventLister's.
func (c *Client) ListEvents(ctx context.Context, q adapter.EventQuery) (adapter.EventPage, error) {
	if q.Undelivered {
		return adapter.EventPage{}, fmt.Errorf("paddle: its events list does not say which events were delivered; list them all: %w", payhook.ErrInvalid)
	}
	v := url.Values{}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	v.Set("per_page", strconv.Itoa(min(limit, 200)))
	if len(q.Types) > 0 {
		v.Set("event_type", strings.Join(q.Types, ","))
	}
	if q.Cursor != "" {
		v.Set("after", q.Cursor)
	}
	list, err := c.list(ctx, "events", v)
	if err != nil {
		return adapter.EventPage{}, err
	}
	events := make([][]byte, len(list.items))
	for i, d := range list.items {
		events[i] = d
	}
	page, err := adapter.NewEventPage(events, list.next != "", list.next)
	if err != nil {
		return adapter.EventPage{}, fmt.Errorf("paddle: list events: %w", err)
	}
	return page, nil
}
