package deliver

import "time"

// Clock is the dispatcher's time: the instants it reads (signing
// timestamps, Attempt.At, latencies, outage windows) and the timers it
// waits on (retries, delays, reorder holds). Config.Clock nil means the
// real one. A test can give its own to fire timers when it chooses, or
// run the real one inside testing/synctest's bubble.
//
// The HTTP timeout of an attempt (Config.Timeout) is the net/http
// client's and does not go through the Clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// the returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc; *time.Timer is one.
type Timer interface {
	// Stop prevents the call, reporting whether it did: false when f
	// has already been called or started.
	Stop() bool
}

// RealClock is the time package's clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
