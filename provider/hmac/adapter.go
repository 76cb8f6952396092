package hmac

import (
	"fmt"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// Adapter is what payhook knows of a provider signing with a plain HMAC:
// its verifier, configured by a Config in adapter.Options.Provider (its
// Secrets and Tolerance, if empty, taken from the Options). Its envelope
// fields are configured, so a body alone has none; events do not say
// their environment; there is no API to read.
var Adapter = adapter.Adapter{
	Name:     "hmac",
	Verifier: verifier,
}

// verifier builds the Verifier of o, whose Provider is a Config or nil.
func verifier(o adapter.Options) (payhook.Verifier, error) {
	var cfg Config
	switch c := o.Provider.(type) {
	case nil:
	case Config:
		cfg = c
	default:
		return nil, fmt.Errorf("hmac: options of type %T, want hmac.Config: %w", o.Provider, payhook.ErrConfig)
	}
	if len(cfg.Secrets) == 0 {
		cfg.Secrets = o.Secrets
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = o.Tolerance
	}
	return adapter.AsVerifier(New(cfg))
}
