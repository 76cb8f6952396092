package jobs

import (
	"context"
	"database/sql"
)

// JobEventID is the SQL expression of a processing job's event id.
var JobEventID = jobEventID

// Stopping reports whether Stop was called (its batches then end at the
// event they are on), for the tests of package jobs_test.
func (q *Queue) Stopping() bool { return q.stopping.Load() }

// EnqueueAloneTx enqueues, in tx, jobs marked Alone for the deliveries
// ids, as a batch does for those that failed in it.
func (q *Queue) EnqueueAloneTx(ctx context.Context, tx *sql.Tx, ids []int64) error {
	return q.enqueueDeliveriesTx(ctx, tx, ids, deliverArgs{Alone: true})
}

// TakeDeliveriesTx takes, in tx, up to n delivery jobs waiting their
// first try, as a delivery batch does, and returns their deliveries.
func (q *Queue) TakeDeliveriesTx(ctx context.Context, tx *sql.Tx, n int) ([]int64, error) {
	taken, err := q.takeJobsTx(ctx, tx, n, q.aloneDeliveries)
	ids := make([]int64, len(taken))
	for i, t := range taken {
		ids[i] = t.event
	}
	return ids, err
}
