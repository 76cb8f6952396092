package crypto

import (
	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of BTCPay-style crypto invoices: their
// verifier and envelope. Events do not say their environment; payhook
// reads no API.
var Adapter = adapter.Adapter{
	Name: "crypto",
	Verifier: func(o adapter.Options) (payhook.Verifier, error) {
		return adapter.AsVerifier(New(Config{Secrets: o.Secrets, Tolerance: o.Tolerance}))
	},
	Envelope: adapter.CheckedEnvelope("crypto", envelope),
}
