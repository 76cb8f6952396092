package payhook

import (
	"net/http"
	"time"
)

// HeaderChecker is implemented by verifiers that can refuse a delivery
// from its headers alone. The receiver calls it before reading the body,
// so that requests that cannot be authentic (no signature header, one
// that does not parse, a stale timestamp) cost no memory for their body.
type HeaderChecker interface {
	// CheckHeader returns an error wrapping ErrSignature when h cannot
	// carry a valid signature: the signature header is missing or
	// ill-formed, or its signed timestamp is outside the verifier's
	// tolerance of receivedAt. It never refuses what Verify accepts.
	CheckHeader(h http.Header, receivedAt time.Time) error
}
