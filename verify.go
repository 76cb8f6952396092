package payhook

import (
	"context"
	"net/http"
	"time"
)

// Delivery is one webhook request as received: its headers and raw body.
type Delivery struct {
	Header http.Header
	// Body is the raw body; verifiers sign and parse these exact bytes.
	Body []byte
	// ReceivedAt is the arrival time, used for the timestamp tolerance.
	ReceivedAt time.Time
}

// Envelope is what payhook reads of a verified delivery.
type Envelope struct {
	// EventID is the provider's unique id of the event (required).
	EventID string
	// Type is the provider's event type (may be empty for some providers).
	Type string
	// Environment is "test" or "live" when the payload says; else "".
	Environment string
	// OccurredAt is when the provider says the event happened, or zero.
	OccurredAt time.Time
	// SecretID is the fingerprint of the secret that matched.
	SecretID string
}

// Verifier authenticates deliveries of one provider and reads their
// envelope. Implementations are safe for concurrent use.
type Verifier interface {
	// Verify checks the signature over d.Body with every configured secret
	// and, when one matches, parses the envelope. It returns an error
	// wrapping ErrSignature when no secret matches or the timestamp is
	// outside the tolerance, and ErrMalformed when the signed body is not a
	// JSON object or carries no event id.
	Verify(d Delivery) (Envelope, error)
}

// DeliveryNamer is a Verifier whose provider names each delivery in the
// body, so that a redelivery of an event may carry other values in those
// members and still tell the same event (SameBody).
type DeliveryNamer interface {
	// DeliveryFields returns the top-level members of a body that tell
	// the delivery rather than the event (Paddle's notification_id,
	// BTCPay's deliveryId).
	DeliveryFields() []string
}

// Source is a configured way in: the {source} of POST /webhooks/{source}.
type Source struct {
	// Name is the URL segment identifying the source.
	Name string
	// Provider names the adapter, e.g. "stripe".
	Provider string
	// Environment, if set, is the only environment processed; events that
	// say another one, or do not say theirs, are stored as ignored.
	Environment string
	// Verifier checks deliveries to this source.
	Verifier Verifier
	// Fetch, if set, reads from the provider's API the current state of
	// the resource an event is about (nil if there is none), so that
	// processing acts on it rather than on a possibly older event. Sources
	// configured with API credentials have one.
	Fetch func(ctx context.Context, ev *Event) ([]byte, error)
	// FetchRate, if above 0, bounds the calls of Fetch a second (for the
	// events whose type its provider has a resource for: the others read
	// nothing, and take no turn), so that processing stays under the
	// provider's rate limit rather than having its reads refused (429)
	// and put off: a worker waits its turn up to a second, and an event
	// whose turn is later is put off until then (jobs.Later), not counted
	// as an attempt. 0: no bound.
	FetchRate float64
	// APIVersion, if set, is the provider API version the source pins: an
	// event of another version (its payload's top-level api_version) is
	// processed all the same and raises an api_version_drift alert, once
	// per version seen.
	APIVersion string
}
