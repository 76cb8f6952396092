package paddle

import (
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Header is the name of the header that carries Paddle's signature.
const Header = "Paddle-Signature"

// Config configures a Verifier.
type Config struct {
	// Secrets are the notification destination secret keys. Several may
	// be given while a secret is rotated; at least one is required.
	Secrets []string
	// Tolerance is how far the signed timestamp may be from the receipt
	// time, in either direction. If zero, defaults to 5 minutes.
	Tolerance time.Duration
}

// Verifier verifies Paddle deliveries. It is safe for concurrent use.
type Verifier struct {
	v *signing.HeaderVerifier
}

var (
	_ payhook.Verifier      = (*Verifier)(nil)
	_ payhook.DeliveryNamer = (*Verifier)(nil)
)

// DeliveryFields returns notification_id: Paddle numbers each
// notification of an event, and a replay is a new notification of the
// same event, with the same body but for it. The slice is shared: it must
// not be changed.
func (v *Verifier) DeliveryFields() []string { return deliveryFields }

// deliveryFields is DeliveryFields' answer, made once: NewEvent asks it
// for every delivery.
var deliveryFields = []string{"notification_id"}

// scheme is how Paddle signs: "ts=<unix>;h1=<hex>[;h1=...]", each h1
// the HMAC-SHA256 of "<ts>:<raw body>".
var scheme = signing.KeyValueHeader{Header: Header, Sep: ";", TimestampKey: "ts", SignatureKey: "h1", Joiner: ':'}

// New returns a Verifier for cfg. It returns an error wrapping
// payhook.ErrConfig when no secret is given, a secret is empty or the
// tolerance is negative.
func New(cfg Config) (*Verifier, error) {
	v, err := signing.NewHeaderVerifier("paddle", scheme, envelope, cfg.Secrets, cfg.Tolerance)
	if err != nil {
		return nil, err
	}
	return &Verifier{v}, nil
}

// Verify checks the Paddle-Signature header over the raw body and, when a
// secret matches and the timestamp is within the tolerance of
// d.ReceivedAt, reads event_id, event_type and occurred_at. Paddle events
// do not say their environment, so Environment is "". It returns an error
// wrapping payhook.ErrSignature when the header is missing or malformed,
// no h1 matches or the timestamp is out of tolerance, and
// payhook.ErrMalformed when the signed body is not one strict JSON object
// (signing.ParseObject), lacks event_id or event_type, or has an id, type
// or time that payhook cannot store (signing.CheckEnvelope).
func (v *Verifier) Verify(d payhook.Delivery) (payhook.Envelope, error) {
	return v.v.Verify(d)
}

// envelope reads a verified Paddle event.
func envelope(body []byte) (payhook.Envelope, error) {
	o, err := signing.ParseObject(body)
	if err != nil {
		return payhook.Envelope{}, err
	}
	var env payhook.Envelope
	if env.EventID, err = o.RequiredString("event_id"); err != nil {
		return payhook.Envelope{}, err
	}
	if env.Type, err = o.RequiredString("event_type"); err != nil {
		return payhook.Envelope{}, err
	}
	if env.OccurredAt, err = o.RFC3339Time("occurred_at"); err != nil {
		return payhook.Envelope{}, err
	}
	return env, nil
}
