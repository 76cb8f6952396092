package signing

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"time"

	"github.com/payhook/payhook"
)

// CheckHeader does every check of Verify that needs no body, so that a
// delivery that cannot verify is refused before its body is read: the
// header is present and parses, holds exactly one timestamp, within
// tolerance of receivedAt, and signatures that are all hex, at least one
// of them as long as an HMAC-SHA256. Its errors wrap payhook.ErrSignature
// and carry no provider prefix.
func (s KeyValueHeader) CheckHeader(h http.Header, receivedAt time.Time, tolerance time.Duration) error {
	header := h.Get(s.Header)
	if header == "" {
		return fmt.Errorf("missing %s header: %w", s.Header, payhook.ErrSignature)
	}
	params, err := Params(header, s.Sep)
	if err != nil {
		return fmt.Errorf("malformed %s header: %w", s.Header, err)
	}
	if len(params[s.TimestampKey]) != 1 {
		return fmt.Errorf("%s header needs exactly one %s=: %w", s.Header, s.TimestampKey, payhook.ErrSignature)
	}
	ts, err := ParseUnix(params[s.TimestampKey][0])
	if err != nil {
		return err
	}
	if err := CheckTimestamp(ts, receivedAt, tolerance); err != nil {
		return err
	}
	sizeOK := false
	for _, sig := range params[s.SignatureKey] {
		b, err := DecodeHex(sig)
		if err != nil {
			return fmt.Errorf("%s: %w", s.SignatureKey, err)
		}
		sizeOK = sizeOK || len(b) == sha256.Size
	}
	if !sizeOK {
		return fmt.Errorf("%s header has no %s signature of %d hex digits: %w", s.Header, s.SignatureKey, 2*sha256.Size, payhook.ErrSignature)
	}
	return nil
}

// CheckHeader checks the headers of a delivery before its body is read;
// see KeyValueHeader.CheckHeader. Errors are prefixed with the name.
func (v *HeaderVerifier) CheckHeader(h http.Header, receivedAt time.Time) error {
	if err := v.scheme.CheckHeader(h, receivedAt, v.tolerance); err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	return nil
}

// CheckMAC returns an error wrapping payhook.ErrSignature when a decoded
// signature cannot be an HMAC-SHA256 (32 bytes).
func CheckMAC(sig []byte) error {
	if len(sig) != sha256.Size {
		return fmt.Errorf("signature of %d bytes, an HMAC-SHA256 has %d: %w", len(sig), sha256.Size, payhook.ErrSignature)
	}
	return nil
}
