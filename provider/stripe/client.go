package stripe

import (
	"net/http"

	"github.com/payhook/payhook/provider/adapter"
)

// Client reads resources from Stripe's API (or the simulator's stripe
// flavour) with a secret API key (sk_test_… or sk_live_…), so that a job
// acts on a resource's current state rather than on the snapshot, maybe
// old, that an event carries: the resource decides (Fetch, in fetch.go).
type Client struct {
	// BaseURL is the API's address, e.g. "https://api.stripe.com".
	BaseURL string
	// Key is the secret API key; it selects the environment.
	Key string
	// HTTP sends the requests; nil means a client with a 10 s timeout.
	HTTP *http.Client
	// APIVersion, if set, is the version every request pins
	// (Stripe-Version).
	APIVersion string
}

var _ adapter.Client = (*Client)(nil)

// versionHeader pins the client's API version, if any.
func (c *Client) versionHeader() http.Header {
	if c.APIVersion == "" {
		return nil
	}
	return http.Header{VersionHeader: {c.APIVersion}}
}
