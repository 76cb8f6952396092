package stripe

import (
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Header is the name of the header that carries Stripe's signature.
const Header = "Stripe-Signature"

// Config configures a Verifier.
type Config struct {
	// Secrets are the endpoint signing secrets ("whsec_..."). Several may
	// be given while a secret is rotated; at least one is required.
	Secrets []string
	// Tolerance is how far the signed timestamp may be from the receipt
	// time, in either direction. If zero, defaults to 5 minutes.
	Tolerance time.Duration
}

// Verifier verifies Stripe deliveries. It is safe for concurrent use.
type Verifier struct {
	v *signing.HeaderVerifier
}

var _ payhook.Verifier = (*Verifier)(nil)

// scheme is how Stripe signs: "t=<unix>,v1=<hex>[,v1=...]", each v1
// the HMAC-SHA256 of "<t>.<raw body>".
var scheme = signing.KeyValueHeader{Header: Header, Sep: ",", TimestampKey: "t", SignatureKey: "v1", Joiner: '.'}

// New returns a Verifier for cfg. It returns an error wrapping
// payhook.ErrConfig when no secret is given, a secret is empty or the
// tolerance is negative.
func New(cfg Config) (*Verifier, error) {
	v, err := signing.NewHeaderVerifier("stripe", scheme, envelope, cfg.Secrets, cfg.Tolerance)
	if err != nil {
		return nil, err
	}
	return &Verifier{v}, nil
}

// Verify checks the Stripe-Signature header over the raw body and, when a
// secret matches and the timestamp is within the tolerance of
// d.ReceivedAt, reads the event's id, type, created time and livemode.
// It returns an error wrapping payhook.ErrSignature when the header is
// missing or malformed, no v1 signature matches or the timestamp is out of
// tolerance, and payhook.ErrMalformed when the signed body is not one
// strict JSON object (signing.ParseObject), lacks an id or type, or has an
// id, type or created time that payhook cannot store
// (signing.CheckEnvelope).
func (v *Verifier) Verify(d payhook.Delivery) (payhook.Envelope, error) {
	return v.v.Verify(d)
}

// envelope reads a verified Stripe event.
func envelope(body []byte) (payhook.Envelope, error) {
	o, err := signing.ParseObject(body)
	if err != nil {
		return payhook.Envelope{}, err
	}
	var env payhook.Envelope
	if env.EventID, err = o.RequiredString("id"); err != nil {
		return payhook.Envelope{}, err
	}
	if env.Type, err = o.RequiredString("type"); err != nil {
		return payhook.Envelope{}, err
	}
	if env.OccurredAt, err = o.UnixTime("created"); err != nil {
		return payhook.Envelope{}, err
	}
	live, ok, err := o.Bool("livemode")
	if err != nil {
		return payhook.Envelope{}, err
	}
	if ok {
		env.Environment = "test"
		if live {
			env.Environment = "live"
		}
	}
	return env, nil
}
