package signing

import (
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// Params splits a signature header of key=value entries separated by sep,
// such as Stripe's "t=1,v1=ab,v1=cd", into the values of each key in
// order. Blank entries are skipped. It returns an error wrapping
// payhook.ErrSignature when the header is empty or an entry has no "=".
func Params(header, sep string) (map[string][]string, error) {
	if strings.TrimSpace(header) == "" {
		return nil, fmt.Errorf("empty header: %w", payhook.ErrSignature)
	}
	out := make(map[string][]string)
	for entry := range strings.SplitSeq(header, sep) {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q is not key=value: %w", Abbrev(entry), payhook.ErrSignature)
		}
		out[strings.TrimSpace(k)] = append(out[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return out, nil
}

// KeyValueHeader is a signature scheme whose header holds key=value
// entries: one timestamp and one or more hex signatures, each the
// HMAC-SHA256 of "<timestamp><Joiner><raw body>". Stripe ("t=..,v1=..")
// and Paddle ("ts=..;h1=..") sign this way. Entries with other keys are
// ignored; several signature entries let a provider sign with two
// secrets while it rolls one.
type KeyValueHeader struct {
	// Header is the name of the signature header, e.g. "Stripe-Signature".
	Header string
	// Sep separates the entries, e.g. ",".
	Sep string
	// TimestampKey is the key of the unix-seconds timestamp, e.g. "t".
	TimestampKey string
	// SignatureKey is the key of a hex signature, e.g. "v1".
	SignatureKey string
	// Joiner goes between the timestamp and the body in the signed
	// string, e.g. '.'.
	Joiner byte
}

// Verify checks d's signature header against secrets and the signed
// timestamp against tolerance of d.ReceivedAt, and returns the secret that
// matched. Its errors wrap payhook.ErrSignature and carry no provider
// prefix, so callers add their own: the header is missing or malformed,
// has no or several timestamps, no signature, a signature that is not
// hex, no signature that matches, or a timestamp out of tolerance.
func (s KeyValueHeader) Verify(d payhook.Delivery, secrets []Secret, tolerance time.Duration) (Secret, error) {
	header := d.Header.Get(s.Header)
	if header == "" {
		return Secret{}, fmt.Errorf("missing %s header: %w", s.Header, payhook.ErrSignature)
	}
	params, err := Params(header, s.Sep)
	if err != nil {
		return Secret{}, fmt.Errorf("malformed %s header: %w", s.Header, err)
	}
	if len(params[s.TimestampKey]) != 1 {
		return Secret{}, fmt.Errorf("%s header needs exactly one %s=: %w", s.Header, s.TimestampKey, payhook.ErrSignature)
	}
	tsText := params[s.TimestampKey][0]
	ts, err := ParseUnix(tsText)
	if err != nil {
		return Secret{}, err
	}
	if len(params[s.SignatureKey]) == 0 {
		return Secret{}, fmt.Errorf("%s header has no %s signature: %w", s.Header, s.SignatureKey, payhook.ErrSignature)
	}
	candidates := make([][]byte, 0, len(params[s.SignatureKey]))
	for _, sig := range params[s.SignatureKey] {
		b, err := DecodeHex(sig)
		if err != nil {
			return Secret{}, fmt.Errorf("%s: %w", s.SignatureKey, err)
		}
		candidates = append(candidates, b)
	}
	msg := make([]byte, 0, len(tsText)+1+len(d.Body))
	msg = append(append(append(msg, tsText...), s.Joiner), d.Body...)
	secret, ok := MatchHMAC(secrets, msg, candidates)
	if !ok {
		return Secret{}, fmt.Errorf("no %s signature matches: %w", s.SignatureKey, payhook.ErrSignature)
	}
	if err := CheckTimestamp(ts, d.ReceivedAt, tolerance); err != nil {
		return Secret{}, err
	}
	return secret, nil
}

// HeaderVerifier is a whole verifier for a KeyValueHeader provider: its
// secrets and tolerance, the scheme, and the reader of its envelope. The
// provider packages wrap it under their own documented Config.
type HeaderVerifier struct {
	name      string
	scheme    KeyValueHeader
	envelope  func(body []byte) (payhook.Envelope, error)
	secrets   []Secret
	tolerance time.Duration
}

// NewHeaderVerifier returns a verifier named name (the prefix of its
// errors). It returns an error wrapping payhook.ErrConfig when no secret
// is given, a secret is empty or the tolerance is negative.
func NewHeaderVerifier(name string, scheme KeyValueHeader, envelope func([]byte) (payhook.Envelope, error),
	secrets []string, tolerance time.Duration) (*HeaderVerifier, error) {
	parsed, err := ParseSecrets(secrets)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	tol, err := Tolerance(tolerance)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &HeaderVerifier{name: name, scheme: scheme, envelope: envelope, secrets: parsed, tolerance: tol}, nil
}

// Verify checks the signature, then reads the envelope of the signed body,
// sets the matching secret's fingerprint on it and checks it with
// CheckEnvelope. Errors wrap payhook.ErrSignature or payhook.ErrMalformed,
// prefixed with the name.
func (v *HeaderVerifier) Verify(d payhook.Delivery) (payhook.Envelope, error) {
	secret, err := v.scheme.Verify(d, v.secrets, v.tolerance)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("%s: %w", v.name, err)
	}
	env, err := v.envelope(d.Body)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("%s: %w", v.name, err)
	}
	env.SecretID = secret.ID
	if err := CheckEnvelope(env); err != nil {
		return payhook.Envelope{}, fmt.Errorf("%s: %w", v.name, err)
	}
	return env, nil
}
