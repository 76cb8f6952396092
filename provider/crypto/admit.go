package crypto

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

var _ payhook.HeaderChecker = (*Verifier)(nil)

// CheckHeader refuses, before the body is read, a delivery whose
// BTCPay-Sig header is missing or is not "sha256=" and the hex of an
// HMAC-SHA256. Its errors wrap payhook.ErrSignature.
func (v *Verifier) CheckHeader(h http.Header, _ time.Time) error {
	header := strings.TrimSpace(h.Get(Header))
	if header == "" {
		return fmt.Errorf("crypto: missing %s header: %w", Header, payhook.ErrSignature)
	}
	hexSig, ok := strings.CutPrefix(header, prefix)
	if !ok {
		return fmt.Errorf("crypto: %s header %q does not start with %s: %w",
			Header, signing.Abbrev(header), prefix, payhook.ErrSignature)
	}
	sig, err := signing.DecodeHex(hexSig)
	if err == nil {
		err = signing.CheckMAC(sig)
	}
	if err != nil {
		return fmt.Errorf("crypto: %s: %w", Header, err)
	}
	return nil
}
