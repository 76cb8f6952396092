package hmac

import (
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Verifier verifies deliveries as its Config describes. It is safe for
// concurrent use.
type Verifier struct {
	cfg       Config
	parts     []part
	secrets   []signing.Secret
	tolerance time.Duration
}

var _ payhook.Verifier = (*Verifier)(nil)

// New returns a Verifier for cfg. It returns an error wrapping
// payhook.ErrConfig when no secret is given, a secret is empty, the
// tolerance is negative, Header is empty, Encoding is unknown, or Template
// is invalid, does not sign {body}, uses {timestamp} without
// TimestampHeader, has TimestampHeader without signing {timestamp}, or
// does not sign IDHeader.
func New(cfg Config) (*Verifier, error) {
	secrets, err := signing.ParseSecrets(cfg.Secrets)
	if err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	tol, err := signing.Tolerance(cfg.Tolerance)
	if err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	cfg, parts, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	return &Verifier{cfg: cfg, parts: parts, secrets: secrets, tolerance: tol}, nil
}

// Verify checks the signature header over the signed string built from
// the template and, when a secret matches and any timestamp is within the
// tolerance of d.ReceivedAt, reads the envelope from the configured
// fields. It returns an error wrapping payhook.ErrSignature when a needed
// header is missing, the signature is malformed or matches no secret, or
// the timestamp is out of tolerance, and payhook.ErrMalformed when the
// signed body is not one strict JSON object (signing.ParseObject), has no
// event id, or has an id, type or time that payhook cannot store
// (signing.CheckEnvelope).
func (v *Verifier) Verify(d payhook.Delivery) (payhook.Envelope, error) {
	secretID, err := v.verifySignature(d)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("hmac: %w", err)
	}
	env, err := v.envelope(d)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("hmac: %w", err)
	}
	env.SecretID = secretID
	if err := signing.CheckEnvelope(env); err != nil {
		return payhook.Envelope{}, fmt.Errorf("hmac: %w", err)
	}
	return env, nil
}

func (v *Verifier) verifySignature(d payhook.Delivery) (string, error) {
	value := strings.TrimSpace(d.Header.Get(v.cfg.Header))
	if value == "" {
		return "", fmt.Errorf("missing %s header: %w", v.cfg.Header, payhook.ErrSignature)
	}
	encoded, ok := strings.CutPrefix(value, v.cfg.Prefix)
	if !ok {
		return "", fmt.Errorf("%s header %q does not start with %q: %w",
			v.cfg.Header, signing.Abbrev(value), v.cfg.Prefix, payhook.ErrSignature)
	}
	decode := signing.DecodeHex
	if v.cfg.Encoding == EncodingBase64 {
		decode = signing.DecodeBase64
	}
	sig, err := decode(encoded)
	if err != nil {
		return "", fmt.Errorf("%s: %w", v.cfg.Header, err)
	}
	var ts time.Time
	var tsText string
	if v.cfg.TimestampHeader != "" {
		tsText = strings.TrimSpace(d.Header.Get(v.cfg.TimestampHeader))
		if tsText == "" {
			return "", fmt.Errorf("missing %s header: %w", v.cfg.TimestampHeader, payhook.ErrSignature)
		}
		if ts, err = signing.ParseUnix(tsText); err != nil {
			return "", fmt.Errorf("%s: %w", v.cfg.TimestampHeader, err)
		}
	}
	msg, err := v.signedString(d, tsText)
	if err != nil {
		return "", err
	}
	secret, ok := signing.MatchHMAC(v.secrets, msg, [][]byte{sig})
	if !ok {
		return "", fmt.Errorf("%s signature does not match: %w", v.cfg.Header, payhook.ErrSignature)
	}
	if v.cfg.TimestampHeader != "" {
		if err := signing.CheckTimestamp(ts, d.ReceivedAt, v.tolerance); err != nil {
			return "", err
		}
	}
	return secret.ID, nil
}

// signedString fills the template for d.
func (v *Verifier) signedString(d payhook.Delivery, ts string) ([]byte, error) {
	msg := make([]byte, 0, len(d.Body)+64)
	for _, p := range v.parts {
		switch p.kind {
		case literal:
			msg = append(msg, p.value...)
		case body:
			msg = append(msg, d.Body...)
		case timestamp:
			msg = append(msg, ts...)
		case header:
			h := d.Header.Get(p.value)
			if h == "" {
				return nil, fmt.Errorf("missing %s header: %w", p.value, payhook.ErrSignature)
			}
			msg = append(msg, h...)
		}
	}
	return msg, nil
}

// envelope reads a verified body.
func (v *Verifier) envelope(d payhook.Delivery) (payhook.Envelope, error) {
	o, err := signing.ParseObject(d.Body)
	if err != nil {
		return payhook.Envelope{}, err
	}
	var env payhook.Envelope
	if v.cfg.IDHeader != "" {
		env.EventID = d.Header.Get(v.cfg.IDHeader) // signed, so present
	} else if env.EventID, err = o.ID(v.cfg.IDField); err != nil {
		return payhook.Envelope{}, err
	}
	if env.Type, err = o.String(v.cfg.TypeField); err != nil {
		return payhook.Envelope{}, err
	}
	if v.cfg.TimeField != "" {
		if env.OccurredAt, err = o.Time(v.cfg.TimeField); err != nil {
			return payhook.Envelope{}, err
		}
	}
	return env, nil
}
