package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.ObjectGetter = (*Client)(nil)

// getPaths are Stripe's retrieve routes by object kind, "{id}" standing
// for the object's (path-escaped) id.
var getPaths = map[string]string{adapter.KindSubscription: "v1/subscriptions/{id}"}

// GetObject returns subscription ref as GET /v1/subscriptions/{id}
// answers it, in the pinned Stripe-Version if any, read as ListObjects
// reads a listed one (its status as payhook's Stripe mapping says it,
// its plan or first price, created; APIVersion the answer's
// Stripe-Version). Its errors are adapter.ObjectGetter's: a 404 wraps
// payhook.ErrNotFound, another kind than a subscription
// payhook.ErrInvalid, an answer that is not that subscription
// payhook.ErrMalformed.
func (c *Client) GetObject(ctx context.Context, kind, ref string) (adapter.Object, error) {
	o, err := adapter.GetObject(kind, ref, getPaths, func(path string) ([]byte, http.Header, error) {
		return apiget.ObjectWith(ctx, c.HTTP, c.BaseURL, c.Key, path, nil, c.versionHeader())
	}, func(b []byte, h http.Header) (adapter.Object, error) {
		var l listed
		if err := json.Unmarshal(b, &l); err != nil {
			return adapter.Object{}, fmt.Errorf("the answer is not a Stripe object (%.100q): %w", b, payhook.ErrMalformed)
		}
		o, _, err := l.object(kind, h.Get(VersionHeader))
		return o, err
	})
	if err != nil {
		return adapter.Object{}, fmt.Errorf("stripe: %w", err)
	}
	return o, nil
}
