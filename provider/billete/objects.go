package billete

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
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

// listPaths are the list routes by object kind; Billete has no disputes
// of their own (a chargeback is its payment's status).
var listPaths = map[string]string{
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

// ListObjects lists the objects of kind created at or after since (GET
// /payments, /refunds or /subscriptions with created_from, following
// next_cursor), in the version the client pins if any. Billete lists no
// disputes: a chargeback is its payment's status (charged_back).
func (c *Client) ListObjects(ctx context.Context, kind string, since time.Time) ([]adapter.Object, error) {
	path, ok := listPaths[kind]
	if !ok {
		return nil, nil
	}
	objs, err := apiget.Pages(ctx, func(ctx context.Context, cursor string) (apiget.Page[adapter.Object], error) {
		q := url.Values{"limit": {"100"}}
		if !since.IsZero() {
			q.Set("created_from", since.UTC().Format(time.RFC3339Nano))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		b, got, err := apiget.ListWith(ctx, c.HTTP, c.BaseURL, c.Key, path, q, c.versionHeader())
		if err != nil {
			return apiget.Page[adapter.Object]{}, err
		}
		var page struct {
			Data       []listed `json:"data"`
			HasMore    bool     `json:"has_more"`
			NextCursor *string  `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil || page.Data == nil {
			return apiget.Page[adapter.Object]{}, fmt.Errorf("GET /%s: a list page with no data array: %.200s: %w", path, b, payhook.ErrMalformed)
		}
		p := apiget.Page[adapter.Object]{More: page.HasMore}
		if page.NextCursor != nil {
			p.Next = *page.NextCursor
		}
		for _, l := range page.Data {
			o, err := l.object(kind, got.Get(VersionHeader))
			if err != nil {
				return apiget.Page[adapter.Object]{}, fmt.Errorf("GET /%s: %w", path, err)
			}
			p.Items, p.IDs = append(p.Items, o), append(p.IDs, o.Ref)
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("billete: list %s: %w", path, err)
	}
	return objs, nil
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
