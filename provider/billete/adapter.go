package billete

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of Billete: its verifier, its envelope
// (events say their environment) and its API client, which fetches the
// subscription a subscription.* event is about.
var Adapter = adapter.Adapter{
	Name: "billete",
	Verifier: func(o adapter.Options) (payhook.Verifier, error) {
		return adapter.AsVerifier(New(Config{Secrets: o.Secrets, Tolerance: o.Tolerance}))
	},
	Envelope:           adapter.CheckedEnvelope("billete", envelope),
	ReportsEnvironment: true,
	Client: func(c adapter.ClientConfig) adapter.Client {
		return &Client{BaseURL: c.BaseURL, Key: c.Key, HTTP: c.HTTP, APIVersion: c.APIVersion}
	},
	Subject: subject,
}

// subject is the resource a subscription.* event is about: the
// subscription, its data.
var subject = adapter.Subject{TypePrefix: "subscription.", Path: []string{"data"}}
