package standard

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

var _ payhook.HeaderChecker = (*Verifier)(nil)

// CheckHeader refuses, before the body is read, a delivery that cannot
// verify: webhook-id, webhook-timestamp or webhook-signature missing, a
// timestamp that is not unix seconds within the tolerance of receivedAt,
// a signature entry that is not <version>,<base64>, or no entry that one
// of the configured secrets could match (a 32-byte v1 for a whsec_
// secret, a 64-byte v1a for a whpk_ key). Its errors wrap
// payhook.ErrSignature.
func (v *Verifier) CheckHeader(h http.Header, receivedAt time.Time) error {
	if err := v.checkHeader(h, receivedAt); err != nil {
		return fmt.Errorf("standard: %w", err)
	}
	return nil
}

// checkHeader is CheckHeader without the "standard:" prefix, for the
// providers that sign the Standard Webhooks way.
func (v *Verifier) checkHeader(h http.Header, receivedAt time.Time) error {
	for _, name := range []string{IDHeader, TimestampHeader, SignatureHeader} {
		if strings.TrimSpace(h.Get(name)) == "" {
			return fmt.Errorf("missing %s header: %w", name, payhook.ErrSignature)
		}
	}
	ts, err := signing.ParseUnix(h.Get(TimestampHeader))
	if err != nil {
		return fmt.Errorf("%s: %w", TimestampHeader, err)
	}
	if err := signing.CheckTimestamp(ts, receivedAt, v.tolerance); err != nil {
		return err
	}
	usable := false
	for entry := range strings.FieldsSeq(h.Get(SignatureHeader)) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok {
			return fmt.Errorf("%s entry %q is not <version>,<signature>: %w",
				SignatureHeader, signing.Abbrev(entry), payhook.ErrSignature)
		}
		if version != "v1" && version != "v1a" {
			continue
		}
		b, err := signing.DecodeBase64(sig)
		if err != nil {
			return fmt.Errorf("%s %s: %w", SignatureHeader, version, err)
		}
		switch {
		case version == "v1" && len(v.symmetric) > 0 && len(b) == sha256.Size,
			version == "v1a" && len(v.public) > 0 && len(b) == ed25519.SignatureSize:
			usable = true
		}
	}
	if !usable {
		return fmt.Errorf("%s has no v1 or v1a entry that a configured secret could match: %w", SignatureHeader, payhook.ErrSignature)
	}
	return nil
}

// CheckHeaderUnprefixed is CheckHeader without the "standard:" prefix on
// its errors, for providers that sign the Standard Webhooks way and add
// their own.
func (v *Verifier) CheckHeaderUnprefixed(h http.Header, receivedAt time.Time) error {
	return v.checkHeader(h, receivedAt)
}
