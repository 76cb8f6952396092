package billete

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/internal/signing"
	"github.com/payhook/payhook/provider/adapter"
)

// Client reads resources from the provider's API with a secret API key
// (sk_test_… or sk_live_…), so that a job acts on a resource's current
// state rather than on what an event, maybe old, says of it.
type Client struct {
	// BaseURL is the API's address, e.g. "https://api.billete.example".
	BaseURL string
	// Key is the secret API key; it selects the environment.
	Key string
	// HTTP sends the requests; nil means a client with a 10 s timeout.
	HTTP *http.Client
	// APIVersion, if set, is the version every request pins
	// (VersionHeader).
	APIVersion string
}

var _ adapter.Client = (*Client)(nil)

// Fetch returns the current state of the subscription a subscription.*
// event is about (GET /subscriptions/{data.id}), as the API's JSON, and
// nil for every other type: payments, refunds and settlements keep the
// event's own data, which says which movement it was, so an API outage
// never holds money events back. It returns an error wrapping
// payhook.ErrNotFound when the API does not know the subscription, one
// wrapping payhook.ErrMalformed when the event names none, and other
// errors (to be retried) when the API cannot be reached or fails.
func (c *Client) Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	if !subject.Takes(ev.Type) {
		return nil, nil
	}
	// Read strictly, as the envelope is: a case variant ("ID") that
	// encoding/json would have taken instead is refused.
	o, err := signing.ObjectAt(ev.Payload, subject.Path...)
	var id string
	if err == nil {
		id, err = o.RequiredString("id")
	}
	if err != nil {
		return nil, fmt.Errorf("billete: event %s has no %s.id to fetch: %w", ev.EventID, strings.Join(subject.Path, "."), err)
	}
	b, _, err := apiget.GetWith(ctx, c.HTTP, c.BaseURL, c.Key, "subscriptions/"+url.PathEscape(id), c.versionHeader())
	if err != nil {
		return nil, fmt.Errorf("billete: %w", err)
	}
	return b, nil
}
