// Package provider builds the verifier of a configured source by provider
// name. Each provider lives in its own subpackage (stripe, paddle,
// standard, billete, crypto, hmac); providertest is the suite they pass.
package provider

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/crypto"
	"github.com/payhook/payhook/provider/hmac"
	"github.com/payhook/payhook/provider/paddle"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/provider/stripe"
)

// Options say how to verify one source.
type Options struct {
	// Provider names the adapter: one of Names().
	Provider string
	// Secrets are the provider's signing secrets; several while rotating.
	Secrets []string
	// Tolerance is how far a signed timestamp may be from the receipt
	// time. If zero, defaults to 5 minutes; ignored by "crypto".
	Tolerance time.Duration
	// HMAC configures the "hmac" provider. Its Secrets and Tolerance, if
	// empty, are taken from the fields above. Ignored by other providers.
	HMAC hmac.Config
}

// builders maps each provider name to its constructor.
var builders = map[string]func(o Options) (payhook.Verifier, error){
	"stripe": func(o Options) (payhook.Verifier, error) {
		return stripe.New(stripe.Config{Secrets: o.Secrets, Tolerance: o.Tolerance})
	},
	"paddle": func(o Options) (payhook.Verifier, error) {
		return paddle.New(paddle.Config{Secrets: o.Secrets, Tolerance: o.Tolerance})
	},
	"standard": func(o Options) (payhook.Verifier, error) {
		return standard.New(standard.Config{Secrets: o.Secrets, Tolerance: o.Tolerance})
	},
	"billete": func(o Options) (payhook.Verifier, error) {
		return billete.New(billete.Config{Secrets: o.Secrets, Tolerance: o.Tolerance})
	},
	"crypto": func(o Options) (payhook.Verifier, error) {
		return crypto.New(crypto.Config{Secrets: o.Secrets, Tolerance: o.Tolerance})
	},
	"hmac": func(o Options) (payhook.Verifier, error) {
		cfg := o.HMAC
		if len(cfg.Secrets) == 0 {
			cfg.Secrets = o.Secrets
		}
		if cfg.Tolerance == 0 {
			cfg.Tolerance = o.Tolerance
		}
		return hmac.New(cfg)
	},
}

// reportsEnvironment lists the providers whose events say their
// environment: stripe by livemode, billete by environment.
var reportsEnvironment = map[string]bool{"stripe": true, "billete": true}

// ReportsEnvironment reports whether events of provider name say whether
// they are test or live events (payhook.Envelope.Environment). Only for
// those providers can a source filter events by environment; for the
// others every event would have an empty environment.
func ReportsEnvironment(name string) bool {
	return reportsEnvironment[name]
}

// Names returns the provider names New accepts, sorted.
func Names() []string {
	names := make([]string, 0, len(builders))
	for name := range builders {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// New returns the verifier of provider o.Provider configured by o. It
// returns an error wrapping payhook.ErrConfig when the provider is unknown
// or its configuration is invalid (no secret, an empty secret, ...).
func New(o Options) (payhook.Verifier, error) {
	build, ok := builders[o.Provider]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (want one of %s): %w",
			o.Provider, strings.Join(Names(), ", "), payhook.ErrConfig)
	}
	// Avoid returning a typed nil inside the interface.
	v, err := build(o)
	if err != nil {
		return nil, err
	}
	return v, nil
}
