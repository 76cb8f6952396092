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
// one, or when it falls outside payhook.MinTime..MaxTime: milliseconds,
// and the far-off times that would overflow a time.Duration, are refused
// here rather than trusted to the tolerance arithmetic.
func ParseUnix(s string) (time.Time, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q is not unix seconds: %w", Abbrev(s), payhook.ErrSignature)
	}
	t, err := payhook.UnixSeconds("timestamp", n)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %d is not unix seconds within %d–%d: %w",
			n, payhook.MinTime.Year(), payhook.MaxTime.Year(), payhook.ErrSignature)
	}
	return t, nil
}

// CheckTimestamp returns an error wrapping payhook.ErrSignature when the
// signed time ts is outside payhook.MinTime..MaxTime, more than tolerance
// before or after receivedAt (the time the delivery arrived), or when
// receivedAt is zero. It rejects timestamps in the future too: a sender
// clock far ahead, or a signature made to be replayed later, is as
// suspect as an old one. It compares times, never a difference of them,
// so no timestamp overflows a time.Duration into passing.
func CheckTimestamp(ts, receivedAt time.Time, tolerance time.Duration) error {
	if receivedAt.IsZero() {
		return fmt.Errorf("delivery has no receive time to check timestamp %d against: %w", ts.Unix(), payhook.ErrSignature)
	}
	if ts.IsZero() || ts.Before(payhook.MinTime) || ts.After(payhook.MaxTime) {
		return fmt.Errorf("timestamp %d is outside %d–%d: %w", ts.Unix(), payhook.MinTime.Year(), payhook.MaxTime.Year(), payhook.ErrSignature)
	}
	// Add saturates instead of wrapping, whatever the tolerance.
	switch {
	case ts.Before(receivedAt.Add(-tolerance)):
		return fmt.Errorf("timestamp %d is %v old, beyond the %v tolerance: %w",
			ts.Unix(), receivedAt.Sub(ts), tolerance, payhook.ErrSignature)
	case ts.After(receivedAt.Add(tolerance)):
		return fmt.Errorf("timestamp %d is %v in the future, beyond the %v tolerance: %w",
			ts.Unix(), ts.Sub(receivedAt), tolerance, payhook.ErrSignature)
	}
	return nil
}
