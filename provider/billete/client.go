package billete

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payhook/payhook"
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
}

// resourcePaths maps an event type's prefix to the collection of the
// resource it is about.
var resourcePaths = []struct{ prefix, collection string }{
	{"checkout.", "checkouts"},
	{"payment.", "payments"},
	{"refund.", "refunds"},
	{"subscription.", "subscriptions"},
	{"invoice.", "invoices"},
}

// Fetch returns the current state of the resource ev is about (its
// data.id), as the API's JSON, or nil when the event is about no resource
// (webhook_endpoint.test, unknown types). It returns an error wrapping
// payhook.ErrNotFound when the API does not know the resource, and other
// errors (to be retried) when the API cannot be reached or fails.
func (c *Client) Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	collection := ""
	for _, p := range resourcePaths {
		if strings.HasPrefix(ev.Type, p.prefix) {
			collection = p.collection
		}
	}
	if collection == "" {
		return nil, nil
	}
	var body struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(ev.Payload, &body); err != nil || body.Data.ID == "" {
		return nil, fmt.Errorf("billete: event %s has no data.id to fetch: %w", ev.EventID, payhook.ErrMalformed)
	}
	return c.get(ctx, collection+"/"+url.PathEscape(body.Data.ID))
}

func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+"/"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("billete: GET %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("billete: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("billete: GET %s: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("billete: GET %s: %w", path, payhook.ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("billete: GET %s: %s: %.200s", path, resp.Status, b)
	}
	return b, nil
}
