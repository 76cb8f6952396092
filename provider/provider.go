// Package provider is the registry of payhook's provider adapters: the one
// place that lists them. Each provider lives in its own subpackage
// (stripe, paddle, standard, billete, crypto, hmac), which says everything
// payhook knows of it in one adapter.Adapter value; providertest is the
// suite their verifiers pass.
//
// Adding a provider is its package with its Adapter, a line in adapters,
// its mapping (billing/mapping) and its simulator flavour (sim/flavour).
package provider

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/crypto"
	"github.com/payhook/payhook/provider/hmac"
	"github.com/payhook/payhook/provider/paddle"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/provider/stripe"
)

// adapters are the registered providers, by name.
var adapters = index(
	billete.Adapter,
	crypto.Adapter,
	hmac.Adapter,
	paddle.Adapter,
	standard.Adapter,
	stripe.Adapter,
)

// index maps each adapter by its name; a name given twice is a
// programming error.
func index(as ...adapter.Adapter) map[string]adapter.Adapter {
	m := make(map[string]adapter.Adapter, len(as))
	for _, a := range as {
		if _, dup := m[a.Name]; dup {
			panic("provider: adapter " + a.Name + " registered twice")
		}
		m[a.Name] = a
	}
	return m
}

// Lookup returns the adapter of the provider called name, and whether
// there is one.
func Lookup(name string) (adapter.Adapter, bool) {
	a, ok := adapters[name]
	return a, ok
}

// Names returns the provider names New accepts, sorted.
func Names() []string {
	return names(func(adapter.Adapter) bool { return true })
}

// APIs returns the names of the providers whose API payhook reads (those
// NewClient accepts), sorted.
func APIs() []string {
	return names(func(a adapter.Adapter) bool { return a.Client != nil })
}

func names(keep func(adapter.Adapter) bool) []string {
	var out []string
	for name, a := range adapters {
		if keep(a) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// APIRate returns the requests a second payhook's reads of a source of
// provider name stay under by default (adapter.Adapter.APIRate): 0 for
// none, or an unknown provider.
func APIRate(name string) float64 {
	a, _ := Lookup(name)
	return a.APIRate
}

// ReportsEnvironment reports whether events of provider name say whether
// they are test or live events (payhook.Envelope.Environment). Only for
// those providers can a source filter events by environment; for the
// others every event would have an empty environment. It is false for an
// unknown name.
func ReportsEnvironment(name string) bool {
	return adapters[name].ReportsEnvironment
}

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

// New returns the verifier of provider o.Provider configured by o. It
// returns an error wrapping payhook.ErrConfig when the provider is unknown
// or its configuration is invalid (no secret, an empty secret, ...).
func New(o Options) (payhook.Verifier, error) {
	a, ok := adapters[o.Provider]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (want one of %s): %w",
			o.Provider, strings.Join(Names(), ", "), payhook.ErrConfig)
	}
	var own any
	if o.Provider == hmac.Adapter.Name {
		own = o.HMAC
	}
	return a.Verifier(adapter.Options{Secrets: o.Secrets, Tolerance: o.Tolerance, Provider: own})
}

// NewClient returns the API client of provider name for one source's
// credentials. It returns an error wrapping payhook.ErrConfig when the
// provider is unknown or payhook reads no API of it.
func NewClient(name string, c adapter.ClientConfig) (adapter.Client, error) {
	a := adapters[name]
	if a.Client == nil {
		return nil, fmt.Errorf("payhook reads the API of providers %s only, not %q: %w",
			strings.Join(APIs(), " and "), name, payhook.ErrConfig)
	}
	return a.Client(c), nil
}
