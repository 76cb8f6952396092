package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/payhook/payhook/store"
)

// TestAcksFirstWithinLag: while acknowledging, processing waits for a
// busy slot and batches for BusyBatchTime, unless the first attempt a
// worker took waited longer than BusyMaxLag: then it runs as when no acks
// are under way, until a first attempt comes in time again.
func TestAcksFirstWithinLag(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	cfg := Config{BusyMaxLag: 10 * time.Second, StampWithNow: true, Now: func() time.Time { return now }}.
		withDefaults(store.SQLite)
	q := &Queue{cfg: cfg, busy: make(chan struct{}, cfg.BusyWorkers)}
	for range cfg.BusyWorkers {
		q.busy <- struct{}{} // every slot taken: yield would wait
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	// yieldsAtOnce reports whether yield returns without a slot, with
	// a context that has ended: it fails if it would wait.
	yieldsAtOnce := func() bool {
		release, err := q.yield(done)
		if err != nil {
			return false
		}
		release()
		return true
	}
	if !yieldsAtOnce() || q.batchTime() != cfg.BatchTime {
		t.Fatal("processing gives way while nothing is being acknowledged")
	}
	q.ingestStarted()
	for _, tc := range []struct {
		waited time.Duration
		first  bool // acks first
	}{
		{0, true},
		{cfg.BusyMaxLag, true},
		{cfg.BusyMaxLag + time.Millisecond, false},
		{time.Hour, false},
		{time.Second, true}, // caught up
	} {
		q.noteLag(now.Add(-tc.waited))
		if got := q.acksFirst(); got != tc.first {
			t.Errorf("first attempt waited %v: acks first = %v, want %v", tc.waited, got, tc.first)
		}
		if got := !yieldsAtOnce(); got != tc.first {
			t.Errorf("first attempt waited %v: yield waits = %v, want %v", tc.waited, got, tc.first)
		}
		want := cfg.BatchTime
		if tc.first {
			want = cfg.BusyBatchTime
		}
		if got := q.batchTime(); got != want {
			t.Errorf("first attempt waited %v: batch time %v, want %v", tc.waited, got, want)
		}
	}
	q.ingestDone()
}
