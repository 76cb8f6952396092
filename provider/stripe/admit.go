package stripe

import (
	"net/http"
	"time"

	"github.com/payhook/payhook"
)

var _ payhook.HeaderChecker = (*Verifier)(nil)

// CheckHeader refuses, before the body is read, a delivery whose
// Stripe-Signature header is missing or ill-formed, holds no single
// timestamp within the tolerance of receivedAt, or no hex signature of
// an HMAC-SHA256's length. Its errors wrap payhook.ErrSignature.
func (v *Verifier) CheckHeader(h http.Header, receivedAt time.Time) error {
	return v.v.CheckHeader(h, receivedAt)
}
