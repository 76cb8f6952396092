package billete

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of Billete: its verifier, its envelope
// (events say their environment) and its API client, which fetches the
// object each event is about (resources, in fetch.go).
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
	Resources: resources,
}
