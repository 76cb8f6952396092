package billete

import (
	"net/http"

	"github.com/payhook/payhook/provider/adapter"
)

// Client reads resources from the provider's API with a secret API key
// (sk_test_… or sk_live_…), so that a job acts on a resource's current
// state rather than on what an event, maybe old, says of it (Fetch, in
// fetch.go).
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
