//go:build dst

package jobs

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/payhook/payhook"
)

// DSTBugs are the bugs the deterministic simulation (internal/dst) puts
// back on purpose, one at a time, to show that it finds them. Only a
// -tags dst build has it; internal/dst's tests set it.
var DSTBugs = map[string]bool{}

func dstBug(bug string) bool { return DSTBugs[bug] }

// checkThenInsert is Ingest with the bug "check-then-insert": it looks
// up which events are stored already, outside the transaction, and
// inserts the others in a transaction of its own with a plain INSERT, as
// if no unique index decided (internal/dst drops it).
func (q *Queue) checkThenInsert(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	inserted := make([]bool, len(evs))
	seen := map[[2]string]bool{}
	for i, ev := range evs {
		var n int
		if err := q.db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM payhook_events WHERE source = $1 AND event_id = $2`,
			ev.Source, ev.EventID).Scan(&n); err != nil {
			return nil, whole(ctx, fmt.Errorf("%w: look up event: %w", payhook.ErrUnavailable, err))
		}
		k := [2]string{ev.Source, ev.EventID}
		inserted[i] = n == 0 && !seen[k]
		seen[k] = true
	}
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, whole(ctx, fmt.Errorf("%w: begin: %w", payhook.ErrUnavailable, err))
	}
	defer tx.Rollback()
	var jobs []river.InsertManyParams
	for i, ev := range evs {
		if !inserted[i] {
			continue
		}
		if ev.Status == "" {
			ev.Status = payhook.StatusReceived
		}
		if ev.ReceivedVia == "" {
			ev.ReceivedVia = payhook.ViaWebhook
		}
		err := tx.QueryRowContext(ctx, `INSERT INTO payhook_events
			(source, event_id, type, environment, occurred_at, received_at, payload, secret_id, status, last_error,
			 enqueued_at, received_via)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $6, $11) RETURNING id`,
			ev.Source, ev.EventID, ev.Type, ev.Environment, q.db.TimeValue(ev.OccurredAt), q.db.TimeValue(ev.ReceivedAt),
			ev.Payload, ev.SecretID, string(ev.Status), payhook.Storable(ev.LastError), string(ev.ReceivedVia)).Scan(&ev.ID)
		if err != nil {
			return nil, &payhook.EventError{Index: i, Err: fmt.Errorf("%w: insert event: %w", payhook.ErrUnavailable, err)}
		}
		if ev.Status == payhook.StatusReceived {
			jobs = append(jobs, river.InsertManyParams{Args: processArgs{EventID: ev.ID}})
		}
	}
	if len(jobs) > 0 {
		if _, err := q.client.InsertManyTx(ctx, tx, jobs); err != nil {
			return nil, whole(ctx, fmt.Errorf("%w: enqueue: %w", payhook.ErrUnavailable, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, whole(ctx, fmt.Errorf("%w: commit: %w", payhook.ErrUnavailable, err))
	}
	return inserted, nil
}
