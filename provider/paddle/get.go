package paddle

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

// getPaths are Paddle's get routes by object kind, "{id}" standing for
// the entity's (path-escaped) id.
var getPaths = map[string]string{adapter.KindSubscription: "subscriptions/{id}"}

// GetObject returns subscription ref as GET /subscriptions/{id} answers
// it ({"data": entity}), in the pinned Paddle-Version if any, read as
// ListObjects reads a listed one (its status as payhook's Paddle mapping
// says it, its first price, created_at). Its errors are
// adapter.ObjectGetter's: a 404 wraps payhook.ErrNotFound, another kind
// than a subscription payhook.ErrInvalid, an answer that is not that
// subscription payhook.ErrMalformed.
func (c *Client) GetObject(ctx context.Context, kind, ref string) (adapter.Object, error) {
	o, err := adapter.GetObject(kind, ref, getPaths, func(path string) ([]byte, http.Header, error) {
		return apiget.ObjectWith(ctx, c.HTTP, c.BaseURL, c.Key, path, nil, c.versionHeader())
	}, func(b []byte, h http.Header) (adapter.Object, error) {
		var answer struct {
			Data *listed `json:"data"`
		}
		if err := json.Unmarshal(b, &answer); err != nil || answer.Data == nil {
			return adapter.Object{}, fmt.Errorf("the answer is not a Paddle entity (%.100q): %w", b, payhook.ErrMalformed)
		}
		o, _, err := answer.Data.object(kind, h.Get(VersionHeader))
		return o, err
	})
	if err != nil {
		return adapter.Object{}, fmt.Errorf("paddle: %w", err)
	}
	return o, nil
}
