package groupcommit

import (
	"testing"
	"time"

	"github.com/payhook/payhook"
)

// TestGatherFor: after a burst's commit a committer waits until as many
// events are queued as it committed, and no longer than its bound; after
// a small commit, with enough queued, or once closed, it does not wait.
func TestGatherFor(t *testing.T) {
	t.Parallel()
	newCommitter := func(queued int) *Committer {
		c := &Committer{max: 100, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		c.enqueue(queued)
		return c
	}
	// returns runs gatherFor and closes the channel it returns when it
	// has returned. wait fails the test if that takes a minute: the
	// bounds below are an hour where it should not wait that long.
	returns := func(c *Committer, last int, bound time.Duration) chan struct{} {
		done := make(chan struct{})
		go func() { c.gatherFor(last, bound); close(done) }()
		return done
	}
	wait := func(t *testing.T, done chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("gatherFor still waits a minute after %s", what)
		}
	}
	t.Run("small commit", func(t *testing.T) {
		wait(t, returns(newCommitter(0), gatherLeast-1, time.Hour), "a commit smaller than gatherLeast")
	})
	t.Run("enough queued", func(t *testing.T) {
		wait(t, returns(newCommitter(5), 5, time.Hour), "as many events were queued as committed")
	})
	t.Run("a full commit queued", func(t *testing.T) {
		wait(t, returns(newCommitter(100), 500, time.Hour), "a full commit's worth was queued")
	})
	t.Run("bound", func(t *testing.T) {
		wait(t, returns(newCommitter(0), 5, time.Millisecond), "its bound")
	})
	t.Run("closed", func(t *testing.T) {
		c := newCommitter(0)
		done := returns(c, 5, time.Hour)
		close(c.stop)
		wait(t, done, "Close")
	})
	t.Run("waits for the queue to fill", func(t *testing.T) {
		c := newCommitter(2)
		done := returns(c, 5, time.Hour)
		c.enqueue(2)
		select {
		case <-done:
			t.Fatal("gatherFor returned with 4 of the 5 events queued")
		default: // a wait of a moment cannot tell; a return now can
		}
		c.enqueue(1)
		wait(t, done, "the fifth event was queued")
	})
}

// enqueue queues a request of n events, as Ingest does.
func (c *Committer) enqueue(n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, &request{evs: make([]*payhook.Event, n)})
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
