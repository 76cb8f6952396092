package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/payhook/payhook/store"
)

// Acks come first. A processing attempt and an ack's commit compete for
// the same CPU and database (on SQLite for its one connection), and a
// provider waits for the ack, 5 to 10 seconds at most, while an event's
// processing can wait. So while the Queue is storing deliveries (Ingest,
// IngestBounded), how an attempt runs depends on how long its job has
// waited since it was due (River fetches the oldest first, so that is how
// far behind processing is):
//
//   - less than Config.PauseLag during a burst (see bursting), less than
//     steadyPause under a steady load: it waits. A burst is stored at
//     full speed, and processed after it in full batches, which cost less
//     per event than short ones between the acks' commits. Side by side
//     at c=64 (2 cores, 20,000 events), a pause of 3 s acked 16% more than
//     one of 1 s on SQLite and 18% more on PostgreSQL (three pairs each),
//     and drained as fast: the burst was acked within it
//     (docs/benchmarks.md). A steady load waits steadyPause only.
//   - less than Config.BusyMaxLag: it waits for one of the
//     Config.BusyWorkers slots and batches for BusyBatchTime. Measured on
//     2 cores with PostgreSQL: 20 workers processed no faster than one
//     during a burst, and acked a quarter as fast (docs/benchmarks.md).
//   - longer: it runs as if no acks were under way. Under a sustained
//     load acks first would let processing fall behind without bound (on
//     SQLite at 1,000 deliveries/s it processed 760/s with 2ms batches,
//     and all 1,000 with 20ms ones).

// ackLinger is how long after an ingest ended the Queue still counts as
// acknowledging: commits of a burst follow each other with gaps between
// them.
const ackLinger = 50 * time.Millisecond

// burstSize is how many deliveries the commits under way hold when an
// ingest begins, on average over the recent ones, from which
// acknowledging is a burst: deliveries arrive faster than the commits
// store them one at a time, so they queue and are committed together.
// At a steady 1,000 deliveries/s on SQLite (2 cores) its one committer's
// commits held 2.0 events on average, 91% of them 4 or fewer; during a
// c=64 burst, 12-14. PostgreSQL's three committers share a burst
// between them, so their commits under way are counted together.
const burstSize = 4

// steadyPause is how long an attempt waits while the acks are no burst
// (Config.PauseLag if less). Its batch then takes the events that arrived
// meanwhile, instead of one or two: at 1,000 deliveries/s on PostgreSQL
// (three runs each, side by side) the acks' p99 was 9.6-10.6 ms with it,
// 12.3-33.2 ms without a pause, 10.4-20.7 ms with the burst's 1 s one
// (as before bursts were told apart); events were processed 60 ms after
// receipt on average, against 43-316 ms and 600-740 ms.
const steadyPause = 200 * time.Millisecond

// maxIngestSize bounds what one ingest adds to ingestSize's average, so
// that one large commit (a backfill's page of 100 events, say) in a
// steady load is no burst: two in a row are.
const maxIngestSize = 4 * burstSize

// ingestSizeShift gives the weight of the newest ingest in ingestSize's
// moving average: one in eight. ingestSize holds that average in 256ths
// of an event, times eight, so that under a load that does not change it
// settles on that load's events under way exactly.
const ingestSizeShift = 3

// acking reports whether events are being ingested or an ingest ended
// less than ackLinger ago.
func (q *Queue) acking() bool {
	if q.ingesting.Load() > 0 {
		return true
	}
	last := q.lastIngest.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < ackLinger
}

// bursting reports whether the Queue is acknowledging a burst: acking,
// with burstSize deliveries or more in the commits under way on average.
func (q *Queue) bursting() bool {
	return q.acking() && q.ingestSize.Load()>>ingestSizeShift >= burstSize<<8
}

// ingestStarted and ingestDone bracket an ingest of n events, for acking
// and bursting. ingestSize is a moving average; two ingests that update
// it at once may lose one's update, which only makes it less recent.
func (q *Queue) ingestStarted(n int) {
	under := min(q.ingesting.Add(int64(n)), maxIngestSize)
	sum := q.ingestSize.Load()
	q.ingestSize.Store(sum - sum>>ingestSizeShift + under<<8)
}

func (q *Queue) ingestDone(n int) {
	q.lastIngest.Store(time.Now().UnixNano())
	q.ingesting.Add(-int64(n))
}

// yield waits until the attempt of a job that had waited waited when it
// was fetched may begin, as described above, and returns the function
// that gives back the slot it took, if any, and whether the attempt is
// behind (waited more than BusyMaxLag: it batches for BatchTime, see
// batchTime). The wait is measured from the job's own times, both the
// database's clock, so that a skew between it and this machine's clock
// does not count. Once Stop is called it waits no more. It fails only
// when ctx ends.
func (q *Queue) yield(ctx context.Context, waited time.Duration) (release func(), behind bool, err error) {
	start := q.riverNow()
	for {
		lag := waited + q.riverNow().Sub(start)
		if lag > q.cfg.BusyMaxLag {
			return func() {}, true, nil
		}
		if !q.acking() || q.stopping.Load() {
			return func() {}, false, nil
		}
		wait, slot := ackLinger, q.busy
		pause := q.cfg.PauseLag
		if !q.bursting() {
			pause = min(pause, steadyPause)
		}
		if lag < pause {
			wait, slot = min(wait, pause-lag), nil // a nil channel is never ready
		}
		select {
		case slot <- struct{}{}:
			return func() { <-q.busy }, false, nil
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, false, fmt.Errorf("waiting for the acks to let processing run: %w", ctx.Err())
		}
	}
}

// Within an attempt, on SQLite, acks go first at each step too. Its one
// connection, once released, goes to a random one of the goroutines
// waiting for it (database/sql), so an ack's commit waited behind
// processing's statements as often as not. Before a batch's transaction,
// and before it sends what that transaction committed, an attempt that is
// not behind waits while an ingest is under way, for ingestFirstMax at
// most. At a sustained 1,000 deliveries/s (three pairs, 2 cores): p99
// 16.8, 1,368 and 63.5 → 10.6, 9.2 and 10.2 ms, p50 4.6 → 2.6 ms,
// processing as fast (docs/benchmarks.md).
const (
	ingestFirstMax  = 5 * time.Millisecond
	ingestFirstPoll = 100 * time.Microsecond
)

// ingestFirst waits while ingestGoesFirst, for ingestFirstMax at most.
func (q *Queue) ingestFirst(behind bool) {
	deadline := time.Now().Add(ingestFirstMax)
	for q.ingestGoesFirst(behind) && time.Now().Before(deadline) {
		time.Sleep(ingestFirstPoll)
	}
}

// ingestGoesFirst reports whether an attempt should let an ingest under
// way have SQLite's connection first: on SQLite, unless the attempt is
// behind or the Queue stopping.
func (q *Queue) ingestGoesFirst(behind bool) bool {
	return q.db.Engine == store.SQLite && !behind && !q.stopping.Load() && q.ingesting.Load() > 0
}
