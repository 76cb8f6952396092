package main

import (
	"fmt"
	"testing"
	"time"
)

// stallLimit is how long a test waits while nothing it watches moves
// before it fails. A slow machine makes progress slowly, a stuck one not
// at all: the tests fail on the second, never on the first, so none has
// a deadline for a whole run.
const stallLimit = 2 * time.Minute

// recoveryBound is how long an acknowledged event may wait, after a crash
// or a partition left its job running, before it is processed (the
// README's Recovery section: RescueAfter + SweepInterval).
const recoveryBound = 90 * time.Second

// processingStall is how long a test waits while no event is stored,
// handled or attempted: a job orphaned on the way (a killed process, a
// fetch lost under load) is taken over within recoveryBound, so nothing
// may be still for that long plus a minute.
const processingStall = recoveryBound + time.Minute

// waitProgress polls probe until it reports done. probe also returns a
// mark of the progress so far (counts, a state); the wait fails only when
// the mark has not changed for stallLimit, saying what was awaited and
// where it stood.
func waitProgress(t testing.TB, what string, probe func() (done bool, mark string)) {
	t.Helper()
	if err := awaitProgress(what, stallLimit, 50*time.Millisecond, probe); err != nil {
		t.Fatal(err)
	}
}

// awaitProgress is waitProgress returning the error, for goroutines that
// may not call t.Fatal.
func awaitProgress(what string, stall, poll time.Duration, probe func() (bool, string)) error {
	last, moved := "", time.Now()
	for {
		done, mark := probe()
		if done {
			return nil
		}
		if mark != last {
			last, moved = mark, time.Now()
		} else if time.Since(moved) > stall {
			return fmt.Errorf("%s: nothing moved for %v (%s)", what, stall, mark)
		}
		time.Sleep(poll)
	}
}

// waitFor waits until cond holds; with no progress to measure, it fails
// when cond has not held for stallLimit.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitProgress(t, "condition", func() (bool, string) { return cond(), "not met" })
}
