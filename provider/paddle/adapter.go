package paddle

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of Paddle: its verifier and its envelope.
// Paddle events do not say their environment; payhook reads no Paddle API.
var Adapter = adapter.Adapter{
	Name: "paddle",
	Verifier: func(o adapter.Options) (payhook.Verifier, error) {
		return adapter.AsVerifier(New(Config{Secrets: o.Secrets, Tolerance: o.Tolerance}))
	},
	Envelope: adapter.CheckedEnvelope("paddle", envelope),
}
