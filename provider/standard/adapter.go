package standard

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of a Standard Webhooks provider: its
// verifier. The event id is a header, so a body alone has no envelope;
// events do not say their environment; there is no API to read.
var Adapter = adapter.Adapter{
	Name: "standard",
	Verifier: func(o adapter.Options) (payhook.Verifier, error) {
		return adapter.AsVerifier(New(Config{Secrets: o.Secrets, Tolerance: o.Tolerance}))
	},
}
