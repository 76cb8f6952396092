package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// LockWait is how long IngestBounded waits for a key another transaction
// holds before it gives up on the batch.
const LockWait = store.IngestLockWait

// IngestBounded is Ingest for a caller that commits many deliveries
// together (groupcommit). A failure that no event caused (at begin,
// enqueue or commit: the disk is full, the database is down) has a
// WholeBatch method returning true, so that the caller does not try each
// event alone. An event whose key another transaction holds
// for longer than LockWait fails the batch at once with a
// *payhook.EventError wrapping payhook.ErrLocked, so that the caller
// stores the others without it instead of holding them all up, and
// retries that event alone. SQLite has no row locks (its one writer waits
// at begin), so there it is Ingest.
func (q *Queue) IngestBounded(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	return q.ingest(ctx, evs, LockWait)
}

// ingest is Ingest; a lockWait above zero bounds each wait for a lock.
// All events go into one statement; if it fails, the batch is tried again
// one event at a time, which names the event that fails it.
func (q *Queue) ingest(ctx context.Context, evs []*payhook.Event, lockWait time.Duration) ([]bool, error) {
	if err := checkEvents(evs); err != nil {
		return nil, err
	}
	q.ingestStarted(len(evs))
	defer q.ingestDone(len(evs))
	if dstBug("check-then-insert") {
		return q.checkThenInsert(ctx, evs)
	}
	if lockWait == store.IngestLockWait && q.db.Ingest != nil {
		inserted, err := q.store(ctx, evs)
		if errors.Is(err, errTogether) {
			return q.ingestTx(ctx, evs, lockWait, false)
		}
		return inserted, err
	}
	inserted, err := q.ingestTx(ctx, evs, lockWait, len(evs) > 1)
	if errors.Is(err, errTogether) {
		return q.ingestTx(ctx, evs, lockWait, false)
	}
	return inserted, err
}

// store is ingest on PostgreSQL's Ingest pool (store.StoreEvents): the
// events and their jobs in one statement that commits alone, one round
// trip. A failure that a row can cause fails the batch with errTogether,
// or a single event with a *payhook.EventError; any other is the store's.
func (q *Queue) store(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	inserted, err := q.db.StoreEvents(ctx, evs, q.processJobsWith())
	if err == nil {
		return inserted, nil
	}
	err = fmt.Errorf("%w: %w", payhook.ErrUnavailable, err)
	switch {
	case !store.IsRowError(err):
		return nil, whole(ctx, err)
	case len(evs) > 1:
		return nil, fmt.Errorf("%w: %w", errTogether, err)
	case store.IsLockTimeout(err):
		err = fmt.Errorf("%w: %w", err, payhook.ErrLocked)
	}
	return nil, &payhook.EventError{Index: 0, Err: err}
}

// errTogether marks the failure of the statement inserting a whole batch.
var errTogether = errors.New("inserting the batch in one statement failed")

// ingestTx stores evs and enqueues their jobs in one transaction, with
// one statement for all the events when together is set, else one each.
func (q *Queue) ingestTx(ctx context.Context, evs []*payhook.Event, lockWait time.Duration, together bool) ([]bool, error) {
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, whole(ctx, fmt.Errorf("%w: begin: %w", payhook.ErrUnavailable, err))
	}
	defer tx.Rollback()
	if lockWait > 0 {
		// No need to lift it before the commit: without a NOTIFY in the
		// transaction (see riverrow.go), the commit waits on no lock.
		if err := q.db.LockTimeoutTx(ctx, tx, lockWait); err != nil {
			return nil, whole(ctx, fmt.Errorf("%w: %w", payhook.ErrUnavailable, err))
		}
	}
	var inserted []bool
	alone := len(evs) == 1
	if together || alone {
		with := store.With{}
		if q.db.Engine == store.Postgres {
			with = q.processJobsWith()
		}
		if inserted, err = q.db.InsertEventsWithTx(ctx, tx, evs, with); err != nil {
			err = fmt.Errorf("%w: %w", payhook.ErrUnavailable, err)
			if with.SQL != nil && !store.IsRowError(err) {
				// The jobs' insert went with the events' (PostgreSQL):
				// an error no row caused is the store's, as the
				// enqueue's was.
				return nil, whole(ctx, err)
			}
			if !alone {
				return nil, fmt.Errorf("%w: %w", errTogether, err)
			}
			if store.IsLockTimeout(err) {
				err = fmt.Errorf("%w: %w", err, payhook.ErrLocked)
			}
			return nil, &payhook.EventError{Index: 0, Err: err}
		}
	} else {
		inserted = make([]bool, len(evs))
		for i := range evs {
			// One at a time, in the caller's order (which keeps the lock
			// order of concurrent batches), so that a failure names its event.
			ins, err := q.db.InsertEventsTx(ctx, tx, evs[i:i+1])
			if err != nil {
				err = fmt.Errorf("%w: %w", payhook.ErrUnavailable, err)
				if store.IsLockTimeout(err) {
					err = fmt.Errorf("%w: %w", err, payhook.ErrLocked)
				}
				return nil, &payhook.EventError{Index: i, Err: err}
			}
			inserted[i] = ins[0]
		}
	}
	if q.db.Engine != store.Postgres || !(together || alone) {
		// The jobs did not go with the events.
		var ids []int64
		for i, ev := range evs {
			if inserted[i] && ev.Status == payhook.StatusReceived {
				ids = append(ids, ev.ID)
			}
		}
		if err := q.insertProcessJobsTx(ctx, tx, ids); err != nil {
			// No row of another transaction stands in a job's way (they
			// have no unique key): the store's failure.
			return nil, whole(ctx, fmt.Errorf("%w: %w", payhook.ErrUnavailable, err))
		}
	}
	if err := tx.Commit(); err != nil {
		if dstBug("ack-before-commit") {
			return inserted, nil // as if answered before the commit's outcome
		}
		return nil, whole(ctx, fmt.Errorf("%w: commit: %w", payhook.ErrUnavailable, err))
	}
	return inserted, nil
}

// storeError is an ingest failure that no event of the batch caused: the
// store refused the transaction as a whole (the disk is full, the
// database is down). Its WholeBatch method tells a caller that batches
// (groupcommit) that the batch's events would fail the same way alone.
type storeError struct{ err error }

func (e *storeError) Error() string    { return e.err.Error() }
func (e *storeError) Unwrap() error    { return e.err }
func (e *storeError) WholeBatch() bool { return true }

// whole marks err, a failure at begin, enqueue or commit, as the store's,
// unless ctx has ended: then the failure is the caller's, not the store's.
func whole(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return &storeError{err}
}

// checkEvents refuses, before anything is written, an event that lacks
// what every stored event has (a source, an event id, its arrival time
// and a payload): the store's NOT NULL would refuse it as a failure to
// store (payhook.ErrUnavailable, "retry later"), and a nil one would
// panic. The receiver and a backfill always set them (payhook.NewEvent);
// a program that builds its own events may not.
func checkEvents(evs []*payhook.Event) error {
	for i, ev := range evs {
		var missing string
		switch {
		case ev == nil:
			missing = "the event (nil)"
		case ev.Source == "":
			missing = "its Source"
		case ev.EventID == "":
			missing = "its EventID"
		case ev.ReceivedAt.IsZero():
			missing = "its ReceivedAt"
		case ev.Payload == nil:
			missing = "its Payload"
		default:
			continue
		}
		return &payhook.EventError{Index: i, Err: fmt.Errorf("ingest: event %d of %d: no %s: %w", i, len(evs), missing, payhook.ErrInvalid)}
	}
	return nil
}
