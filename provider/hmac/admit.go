package hmac

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

var _ payhook.HeaderChecker = (*Verifier)(nil)

// CheckHeader refuses, before the body is read, a delivery that cannot
// verify from its headers alone: the signature header missing, without
// the configured prefix, not hex or base64 (as configured) or not the
// length of an HMAC-SHA256; the timestamp header, when configured,
// missing or outside the tolerance of receivedAt; a header the template
// signs missing. Its errors wrap payhook.ErrSignature.
func (v *Verifier) CheckHeader(h http.Header, receivedAt time.Time) error {
	if err := v.checkHeader(h, receivedAt); err != nil {
		return fmt.Errorf("hmac: %w", err)
	}
	return nil
}

func (v *Verifier) checkHeader(h http.Header, receivedAt time.Time) error {
	value := strings.TrimSpace(h.Get(v.cfg.Header))
	if value == "" {
		return fmt.Errorf("missing %s header: %w", v.cfg.Header, payhook.ErrSignature)
	}
	encoded, ok := strings.CutPrefix(value, v.cfg.Prefix)
	if !ok {
		return fmt.Errorf("%s header %q does not start with %q: %w",
			v.cfg.Header, signing.Abbrev(value), v.cfg.Prefix, payhook.ErrSignature)
	}
	decode := signing.DecodeHex
	if v.cfg.Encoding == EncodingBase64 {
		decode = signing.DecodeBase64
	}
	sig, err := decode(encoded)
	if err == nil {
		err = signing.CheckMAC(sig)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", v.cfg.Header, err)
	}
	if v.cfg.TimestampHeader != "" {
		tsText := strings.TrimSpace(h.Get(v.cfg.TimestampHeader))
		if tsText == "" {
			return fmt.Errorf("missing %s header: %w", v.cfg.TimestampHeader, payhook.ErrSignature)
		}
		ts, err := signing.ParseUnix(tsText)
		if err != nil {
			return fmt.Errorf("%s: %w", v.cfg.TimestampHeader, err)
		}
		if err := signing.CheckTimestamp(ts, receivedAt, v.tolerance); err != nil {
			return err
		}
	}
	for _, p := range v.parts {
		if p.kind == header && h.Get(p.value) == "" {
			return fmt.Errorf("missing %s header: %w", p.value, payhook.ErrSignature)
		}
	}
	return nil
}
