package billete

import (
	"fmt"
	"net/http"
	"time"

	"github.com/payhook/payhook"
)

var _ payhook.HeaderChecker = (*Verifier)(nil)

// CheckHeader refuses, before the body is read, a delivery whose Standard
// Webhooks headers cannot verify (see standard.Verifier.CheckHeader). Its
// errors wrap payhook.ErrSignature.
func (v *Verifier) CheckHeader(h http.Header, receivedAt time.Time) error {
	if err := v.std.CheckHeaderUnprefixed(h, receivedAt); err != nil {
		return fmt.Errorf("billete: %w", err)
	}
	return nil
}
