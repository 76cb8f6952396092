package billete

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.EventLister = (*Client)(nil)

// ListEvents returns one page of GET /events: created_from q.From (RFC
// 3339), type q.Types (comma-separated), cursor q.Cursor, limit q.Limit
// (default 100). Billete lists oldest first; Next is next_cursor when
// has_more. q.Undelivered is refused: billete's list does not say which
// events were delivered. Errors are adapter.EventLister's.
func (c *Client) ListEvents(ctx context.Context, q adapter.EventQuery) (adapter.EventPage, error) {
	if q.Undelivered {
		return adapter.EventPage{}, fmt.Errorf("billete: its events list does not say which events were delivered; list them all: %w", payhook.ErrInvalid)
	}
	v := url.Values{}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	v.Set("limit", strconv.Itoa(min(limit, 1000)))
	if !q.From.IsZero() {
		v.Set("created_from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if len(q.Types) > 0 {
		v.Set("type", strings.Join(q.Types, ","))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	b, err := apiget.List(ctx, c.HTTP, c.BaseURL, c.Key, "events", v)
	if err != nil {
		return adapter.EventPage{}, fmt.Errorf("billete: list events: %w", err)
	}
	var list struct {
		Object     string            `json:"object"`
		Data       []json.RawMessage `json:"data"`
		HasMore    bool              `json:"has_more"`
		NextCursor *string           `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &list); err != nil || list.Object != "list" || list.Data == nil {
		return adapter.EventPage{}, fmt.Errorf("billete: list events: the answer is not a billete list (%.100q): %w", b, payhook.ErrMalformed)
	}
	events := make([][]byte, len(list.Data))
	for i, d := range list.Data {
		events[i] = d
	}
	var next string
	if list.NextCursor != nil {
		next = *list.NextCursor
	}
	page, err := adapter.NewEventPage(events, list.HasMore, next)
	if err != nil {
		return adapter.EventPage{}, fmt.Errorf("billete: list events: %w", err)
	}
	return page, nil
}
