package payhook

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The bounds of what payhook stores. A value outside them is malformed:
// refused at the door (400) when it is in the envelope, and failing the
// event at once (with an alert) when a mapping reads it, never a retry
// that cannot succeed or a row that later breaks a read.
var (
	// MinTime is the earliest time payhook stores: 2000-01-01 UTC.
	MinTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	// MaxTime is the latest time payhook stores: 2200-01-01 UTC. Both
	// engines hold it, and unix seconds past it are most likely
	// milliseconds or an attack on the tolerance check.
	MaxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// MaxAmount bounds an amount in minor units (10^15: a quadrillion cents),
// so that sums of many amounts never overflow an int64.
const MaxAmount int64 = 1_000_000_000_000_000

// MaxRefBytes bounds a provider reference (an id payhook stores and
// indexes). Longer ones could exceed an index's row size.
const MaxRefBytes = 255

// CheckTime returns an error wrapping ErrMalformed when t is set but
// outside [MinTime, MaxTime]. The zero time (unknown) passes. what names
// the value in the error.
func CheckTime(what string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if t.Before(MinTime) || t.After(MaxTime) {
		return fmt.Errorf("%s %s is outside %d–%d: %w", what, t.UTC().Format(time.RFC3339), MinTime.Year(), MaxTime.Year(), ErrMalformed)
	}
	return nil
}

// UnixSeconds returns the time of n seconds since the Unix epoch, or an
// error wrapping ErrMalformed when it falls outside [MinTime, MaxTime]
// (milliseconds are refused this way). It never overflows.
func UnixSeconds(what string, n int64) (time.Time, error) {
	if n < MinTime.Unix() || n > MaxTime.Unix() {
		return time.Time{}, fmt.Errorf("%s %d is not unix seconds within %d–%d: %w", what, n, MinTime.Year(), MaxTime.Year(), ErrMalformed)
	}
	return time.Unix(n, 0).UTC(), nil
}

// CheckAmount returns an error wrapping ErrMalformed when |n| > MaxAmount.
func CheckAmount(what string, n int64) error {
	if n > MaxAmount || n < -MaxAmount {
		return fmt.Errorf("%s %d is beyond ±%d minor units: %w", what, n, MaxAmount, ErrMalformed)
	}
	return nil
}

// CheckRef returns an error wrapping ErrMalformed when s cannot be stored
// and shown as an identifier: over MaxRefBytes, not UTF-8, or holding a
// control or format character (NUL, which PostgreSQL text cannot hold;
// U+2028; U+202E, which reverses what an operator reads). The empty string
// passes: whether a reference is required is the caller's rule.
func CheckRef(what, s string) error {
	switch {
	case len(s) > MaxRefBytes:
		return fmt.Errorf("%s of %d bytes is over the %d-byte limit: %w", what, len(s), MaxRefBytes, ErrMalformed)
	case printableASCII(s):
		return nil
	case !utf8.ValidString(s):
		return fmt.Errorf("%s %q is not UTF-8: %w", what, s, ErrMalformed)
	case strings.ContainsFunc(s, unsafeInRef):
		return fmt.Errorf("%s %q has control or format characters: %w", what, s, ErrMalformed)
	}
	return nil
}

// printableASCII reports whether s is all printable ASCII (U+0020–U+007E),
// which CheckRef passes without decoding runes: the ids providers send,
// checked on every delivery and every fact.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// unsafeInRef reports control (Cc), format (Cf), line and paragraph
// separators (Zl, Zp), and the replacement character left by a lossy
// decoding.
func unsafeInRef(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == utf8.RuneError
}

// Storable returns s made safe for any text column and any JSON document
// (River stores job errors as JSONB): invalid UTF-8 and NUL become U+FFFD.
// Use it on every error text payhook writes, so recording a failure cannot
// itself fail.
func Storable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
