package paddle

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of Paddle: its verifier, its envelope
// and its API client, which lists events for backfill and transactions,
// adjustments and subscriptions for reconciliation. Paddle events do
// not say their environment.
var Adapter = adapter.Adapter{
	Name: "paddle",
	Verifier: func(o adapter.Options) (payhook.Verifier, error) {
		return adapter.AsVerifier(New(Config{Secrets: o.Secrets, Tolerance: o.Tolerance}))
	},
	Envelope: adapter.CheckedEnvelope("paddle", envelope),
	Client: func(c adapter.ClientConfig) adapter.Client {
		return &Client{BaseURL: c.BaseURL, Key: c.Key, HTTP: c.HTTP, APIVersion: c.APIVersion}
	},
	// Paddle takes 240 requests a minute from one IP address
	// (developer.paddle.com/api-reference/about/rate-limiting), the
	// application's own among them.
	APIRate:   3,
	Resources: resources, // fetch.go
}
