package billete

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.ObjectLister = (*Client)(nil)

// VersionHeader is the header in which a request pins the API version and
// an answer says the version it was rendered in.
const VersionHeader = "Billete-Version"

// objectPaths are the list routes by object kind; Billete has no disputes
// of their own (a chargeback is its payment's status).
var objectPaths = map[string]string{
	adapter.KindPayment: "payments", adapter.KindRefund: "refunds", adapter.KindSubscription: "subscriptions",
}

// listed is one listed object, in the neutral shape.
type listed struct {
	ID             string `json:"id"`
	PaymentID      string `json:"payment_id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	RefundedAmount int64  `json:"refunded_amount"`
	Plan           string `json:"plan"`
	CreatedAt      string `json:"created_at"`
}

// ListObjects returns one page of GET /payments, /refunds or
// /subscriptions: created_from q.From, cursor q.Cursor, limit q.Limit
// (default 100), in the version the client pins if any; Next is
// next_cursor when has_more. Billete lists no disputes: a chargeback is
// its payment's status (charged_back). Errors are adapter.ObjectLister's.
func (c *Client) ListObjects(ctx context.Context, q adapter.ObjectQuery) (adapter.ObjectPage, error) {
	path, ok := objectPaths[q.Kind]
	if !ok {
		return adapter.ObjectPage{}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	v := url.Values{"limit": {strconv.Itoa(min(limit, 1000))}}
	if !q.From.IsZero() {
		v.Set("created_from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	b, got, err := apiget.ListWith(ctx, c.HTTP, c.BaseURL, c.Key, path, v, c.versionHeader())
	if err != nil {
		return adapter.ObjectPage{}, fmt.Errorf("billete: list %s: %w", path, err)
	}
	var page struct {
		Object     string   `json:"object"`
		Data       []listed `json:"data"`
		HasMore    bool     `json:"has_more"`
		NextCursor *string  `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &page); err != nil || page.Object != "list" || page.Data == nil {
		return adapter.ObjectPage{}, fmt.Errorf("billete: list %s: the answer is not a billete list (%.100q): %w", path, b, payhook.ErrMalformed)
	}
	var p adapter.ObjectPage
	if page.HasMore {
		if len(page.Data) == 0 || page.NextCursor == nil || *page.NextCursor == "" {
			return adapter.ObjectPage{}, fmt.Errorf("billete: list %s: a page that says more follow lists nothing or gives no cursor: %w", path, payhook.ErrMalformed)
		}
		p.Next = *page.NextCursor
	}
	for _, l := range page.Data {
		o, err := l.object(q.Kind, got.Get(VersionHeader))
		if err != nil {
			return adapter.ObjectPage{}, fmt.Errorf("billete: list %s: %w", path, err)
		}
		p.Objects = append(p.Objects, o)
	}
	return p, nil
}

// object normalizes a listed object; one without an id or a creation
// time is malformed.
func (l listed) object(kind, version string) (adapter.Object, error) {
	created, err := time.Parse(time.RFC3339Nano, l.CreatedAt)
	if l.ID == "" || err != nil {
		return adapter.Object{}, fmt.Errorf("a listed %s without an id or created_at (%q, %q): %w", kind, l.ID, l.CreatedAt, payhook.ErrMalformed)
	}
	o := adapter.Object{
		Kind: kind, Ref: l.ID, Status: l.Status, Amount: l.Amount, Currency: strings.ToUpper(l.Currency),
		RefundedAmount: l.RefundedAmount, Created: created.UTC(), APIVersion: version,
	}
	switch kind {
	case adapter.KindRefund:
		o.PaymentRef, o.RefundedAmount = l.PaymentID, 0
	case adapter.KindSubscription:
		o.Plan, o.Amount, o.Currency, o.RefundedAmount = l.Plan, 0, "", 0
	}
	return o, nil
}

// versionHeader pins the client's API version, if any.
func (c *Client) versionHeader() http.Header {
	if c.APIVersion == "" {
		return nil
	}
	return http.Header{VersionHeader: {c.APIVersion}}
}
