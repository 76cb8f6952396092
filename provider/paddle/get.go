package paddle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

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
	route, ok := getPaths[kind]
	if !ok {
		return adapter.Object{}, fmt.Errorf("paddle: no get route of %s objects: %w", kind, payhook.ErrInvalid)
	}
	path := strings.ReplaceAll(route, "{id}", url.PathEscape(ref))
	b, got, err := apiget.ObjectWith(ctx, c.HTTP, c.BaseURL, c.Key, path, nil, c.versionHeader())
	if err != nil {
		return adapter.Object{}, fmt.Errorf("paddle: get %s %s: %w", kind, ref, err)
	}
	var answer struct {
		Data *listed `json:"data"`
	}
	if err := json.Unmarshal(b, &answer); err != nil || answer.Data == nil {
		return adapter.Object{}, fmt.Errorf("paddle: get %s %s: the answer is not a Paddle entity (%.100q): %w", kind, ref, b, payhook.ErrMalformed)
	}
	o, _, err := answer.Data.object(kind, got.Get(VersionHeader))
	if err == nil && o.Ref != ref {
		err = fmt.Errorf("the answer is %s %q: %w", kind, o.Ref, payhook.ErrMalformed)
	}
	if err != nil {
		return adapter.Object{}, fmt.Errorf("paddle: get %s %s: %w", kind, ref, err)
	}
	return o, nil
}
