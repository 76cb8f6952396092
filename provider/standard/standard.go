package standard

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// The headers of a Standard Webhooks delivery.
const (
	IDHeader        = "webhook-id"
	TimestampHeader = "webhook-timestamp"
	SignatureHeader = "webhook-signature"
)

// The prefixes of the two kinds of secret.
const (
	// SecretPrefix starts a symmetric secret: "whsec_" + base64 key.
	SecretPrefix = "whsec_"
	// PublicKeyPrefix starts an ed25519 public key: "whpk_" + base64 of
	// its 32 bytes.
	PublicKeyPrefix = "whpk_"
)

// Config configures a Verifier.
type Config struct {
	// Secrets are "whsec_..." symmetric secrets and "whpk_..." ed25519
	// public keys, in any mix. Several may be given while a secret is
	// rotated; at least one is required.
	Secrets []string
	// Tolerance is how far webhook-timestamp may be from the receipt time,
	// in either direction. If zero, defaults to 5 minutes.
	Tolerance time.Duration
}

// Verifier verifies Standard Webhooks deliveries. It is safe for
// concurrent use.
type Verifier struct {
	symmetric []signing.Secret
	public    []signing.Secret // Key is an ed25519.PublicKey
	tolerance time.Duration
}

var _ payhook.Verifier = (*Verifier)(nil)

// New returns a Verifier for cfg. It returns an error wrapping
// payhook.ErrConfig when no secret is given, a secret is empty, has
// neither prefix or does not decode, a public key is not 32 bytes, or the
// tolerance is negative.
func New(cfg Config) (*Verifier, error) {
	v, err := newVerifier(cfg)
	if err != nil {
		return nil, fmt.Errorf("standard: %w", err)
	}
	return v, nil
}

func newVerifier(cfg Config) (*Verifier, error) {
	if err := signing.CheckSecrets(cfg.Secrets); err != nil {
		return nil, err
	}
	tol, err := signing.Tolerance(cfg.Tolerance)
	if err != nil {
		return nil, err
	}
	v := &Verifier{tolerance: tol}
	for i, raw := range cfg.Secrets {
		switch {
		case strings.HasPrefix(raw, SecretPrefix):
			key, err := base64.StdEncoding.DecodeString(raw[len(SecretPrefix):])
			if err != nil || len(key) == 0 {
				return nil, fmt.Errorf("secret %d: %s secret is not base64: %w", i+1, SecretPrefix, payhook.ErrConfig)
			}
			v.symmetric = append(v.symmetric, signing.NewSecret(raw, key))
		case strings.HasPrefix(raw, PublicKeyPrefix):
			key, err := base64.StdEncoding.DecodeString(raw[len(PublicKeyPrefix):])
			if err != nil || len(key) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("secret %d: %s key is not the base64 of %d bytes: %w",
					i+1, PublicKeyPrefix, ed25519.PublicKeySize, payhook.ErrConfig)
			}
			v.public = append(v.public, signing.NewSecret(raw, key))
		default:
			return nil, fmt.Errorf("secret %d starts with neither %s nor %s: %w",
				i+1, SecretPrefix, PublicKeyPrefix, payhook.ErrConfig)
		}
	}
	return v, nil
}

// Signed is what an authenticated delivery's headers say.
type Signed struct {
	// ID is the webhook-id header.
	ID string
	// Timestamp is the webhook-timestamp header.
	Timestamp time.Time
	// SecretID is the fingerprint of the secret or key that matched.
	SecretID string
}

// VerifySignature authenticates d without reading its body: it checks the
// webhook-signature entries over the raw body and the timestamp against
// the tolerance of d.ReceivedAt. Providers that sign the Standard Webhooks
// way but shape their body differently build on it. Its errors wrap
// payhook.ErrSignature, or payhook.ErrMalformed when the signed
// webhook-id cannot be an event id (see CheckID), and carry no
// "standard:" prefix, so callers can add their own.
func (v *Verifier) VerifySignature(d payhook.Delivery) (Signed, error) {
	id := d.Header.Get(IDHeader)
	tsText := d.Header.Get(TimestampHeader)
	sigs := d.Header.Get(SignatureHeader)
	for _, h := range []struct{ name, value string }{{IDHeader, id}, {TimestampHeader, tsText}, {SignatureHeader, sigs}} {
		if strings.TrimSpace(h.value) == "" {
			return Signed{}, fmt.Errorf("missing %s header: %w", h.name, payhook.ErrSignature)
		}
	}
	ts, err := signing.ParseUnix(tsText)
	if err != nil {
		return Signed{}, fmt.Errorf("%s: %w", TimestampHeader, err)
	}
	var macs, eds [][]byte
	for entry := range strings.FieldsSeq(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok {
			return Signed{}, fmt.Errorf("%s entry %q is not <version>,<signature>: %w",
				SignatureHeader, signing.Abbrev(entry), payhook.ErrSignature)
		}
		if version != "v1" && version != "v1a" {
			continue
		}
		b, err := signing.DecodeBase64(sig)
		if err != nil {
			return Signed{}, fmt.Errorf("%s %s: %w", SignatureHeader, version, err)
		}
		if version == "v1" {
			macs = append(macs, b)
		} else {
			eds = append(eds, b)
		}
	}
	if len(macs) == 0 && len(eds) == 0 {
		return Signed{}, fmt.Errorf("%s has no v1 or v1a entry: %w", SignatureHeader, payhook.ErrSignature)
	}
	msg := make([]byte, 0, len(id)+len(tsText)+2+len(d.Body))
	msg = append(append(append(append(append(msg, id...), '.'), tsText...), '.'), d.Body...)
	secret, ok := signing.MatchHMAC(v.symmetric, msg, macs)
	if !ok {
		secret, ok = matchEd25519(v.public, msg, eds)
	}
	if !ok {
		return Signed{}, fmt.Errorf("no v1 or v1a signature matches: %w", payhook.ErrSignature)
	}
	if err := signing.CheckTimestamp(ts, d.ReceivedAt, v.tolerance); err != nil {
		return Signed{}, err
	}
	if err := CheckID(id); err != nil {
		return Signed{}, err
	}
	return Signed{ID: id, Timestamp: ts, SecretID: secret.ID}, nil
}

// CheckID returns an error wrapping payhook.ErrMalformed when id, a
// webhook-id, cannot be an event id: it holds a "." (the separator of the
// signed "<id>.<timestamp>.<body>", so such an id makes that string
// ambiguous), or payhook.CheckRef refuses it (control or format
// characters, U+FFFD, over payhook.MaxRefBytes).
func CheckID(id string) error {
	if strings.Contains(id, ".") {
		return fmt.Errorf("%s %q holds a \".\", the separator of the signed content: %w",
			IDHeader, signing.Abbrev(id), payhook.ErrMalformed)
	}
	if err := payhook.CheckRef(IDHeader, id); err != nil {
		return err
	}
	return nil
}

// matchEd25519 returns the first key under which one of sigs verifies msg.
func matchEd25519(keys []signing.Secret, msg []byte, sigs [][]byte) (signing.Secret, bool) {
	for _, k := range keys {
		for _, s := range sigs {
			if ed25519.Verify(ed25519.PublicKey(k.Key), msg, s) {
				return k, true
			}
		}
	}
	return signing.Secret{}, false
}

// Verify authenticates d with VerifySignature and then reads its envelope:
// the event id is the webhook-id header, the type and time the body's
// "type" and "timestamp". It returns an error wrapping
// payhook.ErrSignature when a header is missing or malformed, no entry
// matches or the timestamp is out of tolerance, and payhook.ErrMalformed
// when the webhook-id cannot be an event id (see CheckID), or the signed
// body is not one strict JSON object (see signing.ParseObject), has no
// type, or has a type or time that payhook cannot store
// (signing.CheckEnvelope).
func (v *Verifier) Verify(d payhook.Delivery) (payhook.Envelope, error) {
	s, err := v.VerifySignature(d)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("standard: %w", err)
	}
	env, err := envelope(d.Body)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("standard: %w", err)
	}
	env.EventID = s.ID
	env.SecretID = s.SecretID
	if err := signing.CheckEnvelope(env); err != nil {
		return payhook.Envelope{}, fmt.Errorf("standard: %w", err)
	}
	return env, nil
}

// envelope reads a verified Standard Webhooks payload.
func envelope(body []byte) (payhook.Envelope, error) {
	o, err := signing.ParseObject(body)
	if err != nil {
		return payhook.Envelope{}, err
	}
	var env payhook.Envelope
	if env.Type, err = o.RequiredString("type"); err != nil {
		return payhook.Envelope{}, err
	}
	if env.OccurredAt, err = o.RFC3339Time("timestamp"); err != nil {
		return payhook.Envelope{}, err
	}
	return env, nil
}
