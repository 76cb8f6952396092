package billete

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

// getPaths are the retrieve routes by object kind, "{id}" standing for
// the object's (path-escaped) id.
var getPaths = map[string]string{adapter.KindPayment: "payments/{id}", adapter.KindSubscription: "subscriptions/{id}"}

// GetObject returns payment or subscription ref as GET /payments/{id} or
// GET /subscriptions/{id} answers it, in the version the client pins if
// any, read as ListObjects reads a listed one (status, amount, currency,
// refunded_amount; plan; created_at; APIVersion the answer's
// Billete-Version, if it says one). Its errors are adapter.ObjectGetter's:
// a 404 wraps payhook.ErrNotFound, another kind payhook.ErrInvalid, an
// answer that is not that object payhook.ErrMalformed.
func (c *Client) GetObject(ctx context.Context, kind, ref string) (adapter.Object, error) {
	o, err := adapter.GetObject(kind, ref, getPaths, func(path string) ([]byte, http.Header, error) {
		return apiget.ObjectWith(ctx, c.HTTP, c.BaseURL, c.Key, path, nil, c.versionHeader())
	}, func(b []byte, h http.Header) (adapter.Object, error) {
		var l listed
		if err := json.Unmarshal(b, &l); err != nil {
			return adapter.Object{}, fmt.Errorf("the answer is not a billete object (%.100q): %w", b, payhook.ErrMalformed)
		}
		return l.object(kind, h.Get(VersionHeader))
	})
	if err != nil {
		return adapter.Object{}, fmt.Errorf("billete: %w", err)
	}
	return o, nil
}
