package stripe

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of Stripe: its verifier, its envelope
// (events say livemode, so their environment) and its API client, which
// fetches the subscription a customer.subscription.* event is about.
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
	Subject: subject,
}

// subject is the resource a customer.subscription.* event is about: the
// subscription, its data.object.
var subject = adapter.Subject{TypePrefix: "customer.subscription.", Path: []string{"data", "object"}}
