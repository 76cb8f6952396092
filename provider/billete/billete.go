package billete

import (
	"fmt"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
	"github.com/payhook/payhook/provider/standard"
)

// Config configures a Verifier.
type Config struct {
	// Secrets are the endpoint's "whsec_..." signing secrets (ed25519
	// "whpk_..." keys are accepted too). Several may be given while a
	// secret is rotated; at least one is required.
	Secrets []string
	// Tolerance is how far webhook-timestamp may be from the receipt time,
	// in either direction. If zero, defaults to 5 minutes.
	Tolerance time.Duration
}

// Verifier verifies Billete deliveries. It is safe for concurrent use.
type Verifier struct {
	std *standard.Verifier
}

var _ payhook.Verifier = (*Verifier)(nil)

// New returns a Verifier for cfg. It returns an error wrapping
// payhook.ErrConfig when no secret is given, a secret is empty or not a
// Standard Webhooks secret, or the tolerance is negative.
func New(cfg Config) (*Verifier, error) {
	std, err := standard.New(standard.Config{Secrets: cfg.Secrets, Tolerance: cfg.Tolerance})
	if err != nil {
		return nil, fmt.Errorf("billete: %w", err)
	}
	return &Verifier{std: std}, nil
}

// Verify authenticates d the Standard Webhooks way and reads the event's
// id, type, created_at and environment. It returns an error wrapping
// payhook.ErrSignature when a header is missing or malformed, no signature
// matches or the timestamp is out of tolerance, and payhook.ErrMalformed
// when the webhook-id cannot be an event id (standard.CheckID), the signed
// body is not one strict JSON object (signing.ParseObject), lacks id or
// type, lacks environment or has one other than "test" or "live", has an
// id other than the webhook-id header, or has a type or time that payhook
// cannot store (signing.CheckEnvelope).
func (v *Verifier) Verify(d payhook.Delivery) (payhook.Envelope, error) {
	signed, err := v.std.VerifySignature(d)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("billete: %w", err)
	}
	env, err := envelope(d.Body)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("billete: %w", err)
	}
	if env.EventID != signed.ID {
		return payhook.Envelope{}, fmt.Errorf("billete: body id %q differs from %s %q: %w",
			signing.Abbrev(env.EventID), standard.IDHeader, signing.Abbrev(signed.ID), payhook.ErrMalformed)
	}
	env.SecretID = signed.SecretID
	if err := signing.CheckEnvelope(env); err != nil {
		return payhook.Envelope{}, fmt.Errorf("billete: %w", err)
	}
	return env, nil
}

// envelope reads a verified Billete event.
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
	if env.OccurredAt, err = o.RFC3339Time("created_at"); err != nil {
		return payhook.Envelope{}, err
	}
	if env.Environment, err = o.String("environment"); err != nil {
		return payhook.Envelope{}, err
	}
	// Required: a source filtering by environment must never have to let
	// through an event that does not say its own.
	switch env.Environment {
	case "test", "live":
	case "":
		return payhook.Envelope{}, fmt.Errorf("field \"environment\" is missing (want test or live): %w", payhook.ErrMalformed)
	default:
		return payhook.Envelope{}, fmt.Errorf("environment %q is neither test nor live: %w",
			signing.Abbrev(env.Environment), payhook.ErrMalformed)
	}
	return env, nil
}
