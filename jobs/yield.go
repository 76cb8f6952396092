package jobs

import (
	"context"
	"fmt"
	"time"
)

// Acks come first. A processing attempt and an ack's commit compete for
// the same CPU and database (on SQLite for its one connection), and a
// provider waits for the ack, 5 to 10 seconds at most, while an event's
// processing can wait. So while the Queue is storing deliveries (Ingest,
// IngestBounded: a burst being acknowledged) at most Config.BusyWorkers
// attempts run at once; the others wait for a slot before they begin.
// Measured on 2 cores with PostgreSQL: 20 workers processed no faster
// than one during a burst, and acked a quarter as fast (docs/benchmarks.md).
//
// Only while processing keeps up within Config.BusyMaxLag, though: under
// a sustained load acks first would let it fall behind without bound (on
// SQLite at 1,000 deliveries/s it processed 760/s with 2ms batches, and
// all 1,000 with 20ms ones), so once the first attempts workers take
// have waited longer than that, processing runs as if no acks were under
// way, until it has caught up.

// ackLinger is how long after an ingest ended the Queue still counts as
// acknowledging: commits of a burst follow each other with gaps between
// them.
const ackLinger = 50 * time.Millisecond

// acking reports whether an ingest is under way or ended less than
// ackLinger ago.
func (q *Queue) acking() bool {
	if q.ingesting.Load() > 0 {
		return true
	}
	last := q.lastIngest.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < ackLinger
}

// acksFirst reports whether processing gives way to the acks: the Queue
// is acknowledging, and processing is not behind by more than BusyMaxLag.
func (q *Queue) acksFirst() bool {
	return q.acking() && !q.behind.Load()
}

// ingestStarted and ingestDone bracket an ingest, for acking.
func (q *Queue) ingestStarted() { q.ingesting.Add(1) }

func (q *Queue) ingestDone() {
	q.lastIngest.Store(time.Now().UnixNano())
	q.ingesting.Add(-1)
}

// yield waits, while acks come first (acksFirst), for one of the
// BusyWorkers slots, and returns the function that gives it back; when
// the acks stop meanwhile, or processing falls behind, it returns at
// once. It fails only when ctx ends.
func (q *Queue) yield(ctx context.Context) (release func(), err error) {
	for q.acksFirst() {
		select {
		case q.busy <- struct{}{}:
			return func() { <-q.busy }, nil
		case <-time.After(ackLinger):
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the acks to let processing run: %w", ctx.Err())
		}
	}
	return func() {}, nil
}
