// Package adapter is the shape of a provider adapter: what one provider
// package (stripe, paddle, standard, billete, crypto, hmac) tells payhook
// about its provider. Each of those packages exports one Adapter value;
// package provider registers them all, in one place, and is what the rest
// of payhook asks.
//
// It imports nothing of payhook's but the root package and the signing
// helpers, so that every provider package can import it.
package adapter

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Adapter says everything payhook knows of one provider. Only Name and
// Verifier are required; a nil func or a zero field means the provider
// has no such part.
type Adapter struct {
	// Name is the provider's name in configuration, e.g. "stripe": lower
	// case, unique among the registered adapters.
	Name string
	// Verifier returns the verifier of one source of the provider,
	// configured by o. Its errors wrap payhook.ErrConfig (no secret, an
	// empty secret, a negative tolerance, ...).
	Verifier func(o Options) (payhook.Verifier, error)
	// Envelope, if set, reads the envelope (id, type, time, environment)
	// of an event body on its own, as Verify does after the signature: an
	// event the provider's API lists is read with it. Nil when the body
	// alone does not say it (the id of a Standard Webhooks event is a
	// header; hmac's fields are configured). Errors wrap
	// payhook.ErrMalformed.
	Envelope func(body []byte) (payhook.Envelope, error)
	// ReportsEnvironment says that the provider's events say whether they
	// are test or live events (payhook.Envelope.Environment). Only then can
	// a source filter events by environment.
	ReportsEnvironment bool
	// Client, if set, returns the provider's API client for one source's
	// credentials. Nil when payhook reads no API of the provider.
	Client func(c ClientConfig) Client
	// Subject says which events are about a resource the Client fetches
	// whose current state stands for the event's subject as a whole.
	// Zero when there are none.
	Subject Subject
}

// Options configure the verifier of one source.
type Options struct {
	// Secrets are the provider's signing secrets; several while rotating.
	Secrets []string
	// Tolerance is how far a signed timestamp may be from the receipt
	// time. If zero, the provider's default (5 minutes).
	Tolerance time.Duration
	// Provider holds the options of a provider that needs more than
	// secrets and a tolerance, of the type its package documents (an
	// hmac.Config for hmac); nil for the others, which ignore it.
	Provider any
}

// ClientConfig configures one source's API client.
type ClientConfig struct {
	// BaseURL is the API's address, e.g. "https://api.stripe.com".
	BaseURL string
	// Key is the secret API key; it selects the environment.
	Key string
	// HTTP sends the requests. If nil, a client with a 10 s timeout.
	HTTP *http.Client
}

// Client is a provider's API, read with one source's key.
//
// A Client may offer more of the API (listing events for backfill, listing
// objects for reconciliation) through further interfaces that callers find
// by type assertion, as net/http finds an http.Flusher, so that a
// provider gains a part without every other one changing.
type Client interface {
	// Fetch returns the current state of the resource ev is about, as the
	// API's JSON, when the adapter's Subject takes ev, and nil for every
	// other event. Its errors wrap payhook.ErrNotFound when the API does
	// not know the resource and payhook.ErrMalformed when ev names none;
	// other errors (the API unreachable or failing) are to be retried.
	Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error)
}

// Subject says which events are about a resource whose current state,
// fetched from the provider's API, stands for the event's subject as a
// whole (a subscription), and where in the event's payload that subject
// is. Movements (payments, refunds) are never one: the event's own data
// says which movement it was.
type Subject struct {
	// TypePrefix selects the events: those whose type starts with it. If
	// empty, no event is selected.
	TypePrefix string
	// Path is the object keys from the top of the payload to the subject,
	// e.g. {"data", "object"}. The subject's id is its "id".
	Path []string
}

// Takes reports whether events of type eventType are about the subject.
func (s Subject) Takes(eventType string) bool {
	return s.TypePrefix != "" && strings.HasPrefix(eventType, s.TypePrefix)
}

// CheckedEnvelope returns an Adapter.Envelope: read, then
// signing.CheckEnvelope (an id, type and time payhook can store), its
// errors prefixed with the provider's name as a verifier's are.
func CheckedEnvelope(name string, read func(body []byte) (payhook.Envelope, error)) func(body []byte) (payhook.Envelope, error) {
	return func(body []byte) (payhook.Envelope, error) {
		env, err := read(body)
		if err == nil {
			err = signing.CheckEnvelope(env)
		}
		if err != nil {
			return payhook.Envelope{}, fmt.Errorf("%s: %w", name, err)
		}
		return env, nil
	}
}

// AsVerifier returns a provider's New(...) results as an Adapter.Verifier
// returns them: nil, never a typed nil pointer, with an error.
func AsVerifier[V payhook.Verifier](v V, err error) (payhook.Verifier, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}
