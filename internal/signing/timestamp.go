package signing

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// DefaultTolerance is how far a signed timestamp may be from the time of
// receipt, in either direction, when a Config leaves Tolerance zero.
const DefaultTolerance = 5 * time.Minute

// Tolerance returns d, or DefaultTolerance when d is zero. It returns an
// error wrapping payhook.ErrConfig when d is negative.
func Tolerance(d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("negative tolerance %v: %w", d, payhook.ErrConfig)
	case d == 0:
		return DefaultTolerance, nil
	}
	return d, nil
}

// ParseUnix parses a signed timestamp of whole seconds since the Unix
// epoch. It returns an error wrapping payhook.ErrSignature when s is not
// one.
func ParseUnix(s string) (time.Time, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q is not unix seconds: %w", Abbrev(s), payhook.ErrSignature)
	}
	return time.Unix(n, 0).UTC(), nil
}

// CheckTimestamp returns an error wrapping payhook.ErrSignature when the
// signed time ts is more than tolerance before or after receivedAt, the
// time the delivery arrived, or when receivedAt is zero. It rejects
// timestamps in the future too: a sender clock far ahead, or a signature
// made to be replayed later, is as suspect as an old one.
func CheckTimestamp(ts, receivedAt time.Time, tolerance time.Duration) error {
	if receivedAt.IsZero() {
		return fmt.Errorf("delivery has no receive time to check timestamp %d against: %w", ts.Unix(), payhook.ErrSignature)
	}
	age := receivedAt.Sub(ts)
	switch {
	case age > tolerance:
		return fmt.Errorf("timestamp %d is %v old, beyond the %v tolerance: %w",
			ts.Unix(), age, tolerance, payhook.ErrSignature)
	case -age > tolerance:
		return fmt.Errorf("timestamp %d is %v in the future, beyond the %v tolerance: %w",
			ts.Unix(), -age, tolerance, payhook.ErrSignature)
	}
	return nil
}
