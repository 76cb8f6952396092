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
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
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
	// APIRate is how many requests a second payhook's reads of one
	// source's resources stay under (payhook.Source.FetchRate), below the
	// provider's published rate limit: 0 when it states none.
	APIRate float64
	// Resources are the objects the Client fetches, by event type: every
	// event of a type listed is mapped from its object's current state
	// (see Resource). Nil when there are none.
	Resources Resources
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
	// APIVersion, if set, is the API version the source pins: every
	// request asks for it (Stripe: the Stripe-Version header). If empty,
	// the account's default version.
	APIVersion string
}

// Client is a provider's API, read with one source's key.
//
// A Client may offer more of the API (listing events for backfill, listing
// objects and retrieving one for reconciliation: EventLister,
// ObjectLister, ObjectGetter) through further interfaces that callers find
// by type assertion, as net/http finds an http.Flusher, so that a
// provider gains a part without every other one changing.
type Client interface {
	// Fetch returns the current state of the resource ev is about, as the
	// API's JSON object, when the adapter's Resources has one for ev's
	// type, and nil for every other event. Its errors wrap
	// payhook.ErrNotFound when the API does not know the resource (a 404)
	// and payhook.ErrMalformed when ev names none or the answer is not
	// one JSON object; other errors (the API unreachable, a timeout, a
	// 429 or a 5xx) are to be retried.
	Fetch(ctx context.Context, ev *payhook.Event) ([]byte, error)
}

// EventLister is a Client that lists the provider's events, page by page,
// in the provider's order: what a backfill reads. Its stripe, paddle and
// billete clients are ones.
type EventLister interface {
	// ListEvents returns one page of the events q selects. Its errors are
	// an *APIError when the API answered another status than 200 (a 429
	// or a 5xx is worth retrying, after APIError.RetryAfter when set), one
	// wrapping payhook.ErrMalformed when the page cannot be read (not the
	// provider's list, or an item without an id to page on), one wrapping
	// payhook.ErrInvalid when q asks what the provider cannot list, and
	// others (the API unreachable, a timeout) worth retrying.
	ListEvents(ctx context.Context, q EventQuery) (EventPage, error)
}

// EventQuery selects events to list.
type EventQuery struct {
	// From keeps the events created at or after it, when the provider
	// filters by time; zero lists as far back as the provider keeps them.
	// Callers filter the items again: a provider that cannot (Paddle)
	// lists them all.
	From time.Time
	// Types keeps the events of these provider type names; empty keeps
	// every type.
	Types []string
	// Undelivered keeps only the events whose webhook deliveries failed
	// (Stripe's delivery_success=false); a provider that cannot say
	// refuses it with payhook.ErrInvalid.
	Undelivered bool
	// Cursor is the Next of the previous page; "" asks for the first.
	Cursor string
	// Limit is the page size; 0 means the client's default (100, or the
	// provider's most when smaller).
	Limit int
}

// EventPage is one page of a provider's events list.
type EventPage struct {
	// Events are the page's items, each as the API lists it: a body the
	// adapter's Envelope reads.
	Events [][]byte
	// Next is the cursor of the next page; "" when this is the last.
	Next string
}

// NewEventPage returns the page of events whose list says more (there
// are further pages) and next (their cursor), or an error wrapping
// payhook.ErrMalformed when the list says more but lists nothing or gives
// no cursor: following it would go nowhere, or round forever.
func NewEventPage(events [][]byte, more bool, next string) (EventPage, error) {
	switch {
	case !more:
		return EventPage{Events: events}, nil
	case len(events) == 0:
		return EventPage{}, fmt.Errorf("the page lists no event but says there are more (cursor %q): %w", next, payhook.ErrMalformed)
	case next == "":
		return EventPage{}, fmt.Errorf("the page says there are more but gives no cursor: %w", payhook.ErrMalformed)
	}
	return EventPage{Events: events, Next: next}, nil
}

// EventRetention is implemented by EventListers whose provider lists only
// recent events (Stripe: the last 30 days).
type EventRetention interface {
	// EventRetention is how far back the provider lists events.
	EventRetention() time.Duration
}

// APIError is a provider API's answer other than 200, as the clients
// return it: its Status, the RetryAfter it asked for, and Temporary (a
// 429 or a 5xx, worth retrying).
type APIError = apiget.APIError

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
