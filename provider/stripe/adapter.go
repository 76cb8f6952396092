package stripe

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of Stripe: its verifier, its envelope
// (events say livemode, so their environment) and its API client, which
// fetches the object each event is about (resources, in fetch.go).
var Adapter = adapter.Adapter{
	Name: "stripe",
	Verifier: func(o adapter.Options) (payhook.Verifier, error) {
		return adapter.AsVerifier(New(Config{Secrets: o.Secrets, Tolerance: o.Tolerance}))
	},
	Envelope:           adapter.CheckedEnvelope("stripe", envelope),
	ReportsEnvironment: true,
	Client: func(c adapter.ClientConfig) adapter.Client {
		return &Client{BaseURL: c.BaseURL, Key: c.Key, HTTP: c.HTTP, APIVersion: c.APIVersion}
	},
	// Stripe takes 25 requests a second to one endpoint, and 25 in all
	// from a sandbox (100 in live mode; docs.stripe.com/rate-limits).
	APIRate:   20,
	Resources: resources,
}
