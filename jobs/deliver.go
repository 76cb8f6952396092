package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// deliverArgs is the job of one after-commit delivery (an outbox
// delivery's row id), retried on its own. Resend sets Resend so that a
// resend is not taken for a duplicate of a job River has not marked
// completed yet.
//
// Alone marks the job of a delivery whose first attempt already ran
// (deliverCommitted): it is tried by Deliver, never in a batch.
type deliverArgs struct {
	Delivery int64 `json:"delivery" river:"unique"`
	Resend   int64 `json:"resend,omitempty" river:"unique"`
	Alone    bool  `json:"alone,omitempty"`
	// Rescue, as processArgs', is the id of a job of the delivery left
	// running by a dead process: the sweep's stand-in for it.
	Rescue int64 `json:"rescue,omitempty" river:"unique"`
}

func (deliverArgs) Kind() string { return "payhook_deliver" }

func (deliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: DeliveryQueue, Priority: workPriority, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}}
}

// DeliveryQueue is the River queue of the deliveries' jobs, worked by
// Config.DeliveryWorkers of their own, so that neither the events' jobs
// nor the deliveries' wait behind the other's backlog. A delivery's job
// enqueued by an older payhook, in River's default queue, runs there.
const DeliveryQueue = "payhook_deliveries"

// queueKey carries the Queue in the context of the handlers it runs, for
// EnqueueDeliveries.
type queueKey struct{}

// EnqueueDeliveries inserts, in tx, a delivery job for each of the
// after-commit deliveries ids (see Config.Deliver): called by a handler
// (or OnFailed) with the context the Queue gave it, the jobs commit with
// what the handler wrote, so that a crash before the commit sends nothing
// and after it still sends. Outside a Queue's handler it returns an error;
// the sweep (Config.DeliverySweep) then finds the deliveries later.
func EnqueueDeliveries(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	q, _ := ctx.Value(queueKey{}).(*Queue)
	if q == nil {
		return errors.New("enqueue deliveries: not inside a job queue's handler")
	}
	if b, _ := ctx.Value(batchKey{}).(*batchDeliveries); b != nil {
		// In a batch, the event's deliveries are enqueued with the
		// others' before the commit, if its handlers succeed.
		b.event = append(b.event, ids...)
		return nil
	}
	return q.EnqueueDeliveriesTx(ctx, tx, ids, false)
}

// afterKey carries, in the context of a handler the Queue runs alone, the
// *afterCommit of its transaction (in a batch: batchDeliveries), and in a
// worker's that of its attempt.
type afterKey struct{}

// afterCommit holds what the handlers of a transaction gave Defer.
type afterCommit struct{ items []any }

// afterCommitted calls Config.AfterCommit with what a holds, if
// anything, with ctx's values but not its end (a worker stopping must not
// leave to the sweep what its committed transactions deferred), for
// JobTimeout at most.
func (q *Queue) afterCommitted(ctx context.Context, a *afterCommit) {
	if len(a.items) == 0 || q.cfg.AfterCommit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.JobTimeout)
	defer cancel()
	q.cfg.AfterCommit(ctx, a.items)
}

// deferIn returns the context for the handlers of a transaction, whose
// Defer collects into a collector of its own, and the function to call
// once that transaction has committed (deferred).
func (q *Queue) deferIn(ctx context.Context) (context.Context, func()) {
	own := &afterCommit{}
	return context.WithValue(ctx, afterKey{}, own), func() { q.deferred(ctx, own.items) }
}

// deferred hands items, deferred by a transaction that has committed, to
// the collector ctx carries (the worker's, which calls AfterCommit once
// it has given back its acks-first slot), or, without one, to
// AfterCommit at once.
func (q *Queue) deferred(ctx context.Context, items []any) {
	if outer, _ := ctx.Value(afterKey{}).(*afterCommit); outer != nil {
		outer.items = append(outer.items, items...)
		return
	}
	q.afterCommitted(ctx, &afterCommit{items})
}

// Defer hands items to Config.AfterCommit, called once the transaction
// of the handler (or OnFailed) that calls it, with the context the Queue
// gave it, has committed; never if that transaction rolls back (in a
// batch: if the event's handlers fail, rolled back to its savepoint).
// Outside a Queue's handler, or without Config.AfterCommit, it returns an
// error.
func Defer(ctx context.Context, items ...any) error {
	if q, _ := ctx.Value(queueKey{}).(*Queue); q == nil || q.cfg.AfterCommit == nil {
		return errors.New("defer after the commit: not inside a job queue's handler, or no Config.AfterCommit")
	}
	if b, _ := ctx.Value(batchKey{}).(*batchDeliveries); b != nil {
		b.eventItems = append(b.eventItems, items...)
		return nil
	}
	a, _ := ctx.Value(afterKey{}).(*afterCommit)
	if a == nil {
		return errors.New("defer after the commit: not inside a job queue's handler")
	}
	a.items = append(a.items, items...)
	return nil
}

// EnqueueDeliveriesTx inserts, in tx, a delivery job for each of the
// after-commit deliveries ids; one whose job is still live is skipped,
// unless resend, which gives it a new job at once (payhook deliveries
// resend).
func (q *Queue) EnqueueDeliveriesTx(ctx context.Context, tx *sql.Tx, ids []int64, resend bool) error {
	var stamp int64
	if resend {
		stamp = q.cfg.Now().UnixNano()
	}
	return q.enqueueDeliveriesTx(ctx, tx, ids, deliverArgs{Resend: stamp})
}

// enqueueDeliveriesTx inserts a delivery job for each of ids, with the
// args of like.
func (q *Queue) enqueueDeliveriesTx(ctx context.Context, tx *sql.Tx, ids []int64, like deliverArgs) error {
	_, err := q.insertDeliveriesTx(ctx, tx, ids, like)
	return err
}

// insertDeliveriesTx is enqueueDeliveriesTx returning River's results.
func (q *Queue) insertDeliveriesTx(ctx context.Context, tx *sql.Tx, ids []int64, like deliverArgs) ([]*rivertype.JobInsertResult, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		args := like
		args.Delivery = id
		params[i] = river.InsertManyParams{Args: args,
			InsertOpts: &river.InsertOpts{MaxAttempts: q.cfg.DeliveryAttempts}}
	}
	res, err := q.client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d deliveries: %w", len(ids), err)
	}
	return res, nil
}

// deliver runs one attempt of delivery id: its first, while other
// deliveries wait theirs, together with theirs (deliverBatch).
func (q *Queue) deliver(ctx context.Context, job *river.Job[deliverArgs]) error {
	if q.cfg.Deliver == nil {
		return river.JobCancel(errors.New("no Deliver configured for after-commit deliveries"))
	}
	final := job.Attempt >= job.MaxAttempts
	// One that failed in another's batch was put back to run alone: a
	// batch would send it once more before its alone attempt.
	if job.Attempt == 1 && !final && !job.Args.Alone && !q.isAlone(q.aloneDeliveries, job.Args.Delivery) {
		if done, err := q.deliverBatch(ctx, job.Args.Delivery); done {
			return err
		}
	}
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("delivery %d panicked: %v", job.Args.Delivery, r)
			}
		}()
		return q.cfg.Deliver(ctx, job.Args.Delivery, final)
	}()
	if err != nil {
		return storable(err)
	}
	return nil
}

// deliverBatch runs the first attempt of delivery id together with those
// of up to Batch-1 other deliveries waiting theirs (Config.DeliverMany):
// it takes their jobs, marked running, in a transaction of its own,
// sends them all, and in one more transaction records their attempts,
// completes the jobs of those sent and puts back untried the jobs of
// those that failed, which run alone next.
// It reports false when the attempt of id is still to run alone: batching
// is off, no other delivery was waiting, or id itself failed in the
// batch (it is tried again at once, alone). A failure of the last
// transaction fails the attempt of id and leaves the others' jobs
// running, for River to rescue (Config.RescueAfter): sent again then, at
// least once.
func (q *Queue) deliverBatch(ctx context.Context, id int64) (bool, error) {
	if q.cfg.DeliverMany == nil || q.cfg.Batch <= 1 {
		return false, nil
	}
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return false, nil
	}
	defer tx.Rollback()
	taken, err := q.takeJobsTx(ctx, tx, min(q.cfg.Batch, guardedBatch)-1, q.aloneDeliveries)
	if err != nil || len(taken) == 0 {
		return false, nil
	}
	if err := tx.Commit(); err != nil {
		return false, nil
	}
	// Each delivery once: a second job of one (a resend's, a stand-in)
	// goes with the first, or DeliverMany would send it twice, the second
	// time reading it as it was before the first.
	ids := []int64{id}
	index := map[int64]int{id: 0}
	place := make([]int, len(taken)) // taken[i]'s delivery is ids[place[i]]
	for i, t := range taken {
		k, ok := index[t.event]
		if !ok {
			k = len(ids)
			index[t.event] = k
			ids = append(ids, t.event)
		}
		place[i] = k
	}
	errs, record, err := q.deliverMany(ctx, ids)
	if err != nil {
		return true, err
	}
	// The record is written whatever ctx became: the sends happened.
	ctx = context.WithoutCancel(ctx)
	var back, sent []int64
	for i, t := range taken {
		if errs[place[i]] != nil {
			back = append(back, t.job)
			q.keepAlone(q.aloneDeliveries, t.event)
		} else {
			sent = append(sent, t.job)
		}
	}
	if err := q.recordDeliveries(ctx, record, sent, back, nil); err != nil {
		q.cfg.Logger.Error("record a batch of deliveries; River rescues their jobs, still running", "deliveries", len(ids), "err", err)
		return true, storable(err)
	}
	if errs[0] != nil {
		return false, nil
	}
	return true, nil
}

// deliverMany calls DeliverMany, a panic making every delivery's error.
func (q *Queue) deliverMany(ctx context.Context, ids []int64) (errs []error, record func(context.Context, *sql.Tx) error, err error) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				err := fmt.Errorf("deliveries %v panicked: %v", ids, r)
				errs, record = make([]error, len(ids)), nil
				for i := range errs {
					errs[i] = err
				}
			}
		}()
		errs, record = q.cfg.DeliverMany(ctx, ids)
	}()
	if len(errs) != len(ids) {
		return nil, nil, fmt.Errorf("deliver %d deliveries: %d results", len(ids), len(errs))
	}
	return errs, record, nil
}

// deliverCommitted runs, just after a batch's commit and in its worker,
// the first attempt of the after-commit deliveries the batch's handlers
// wrote (DeliverMany), without writing a job for them, until half a
// SweepAge after written at most (a time before the batch's transaction
// wrote them, on Now's clock, the sweep's): in one transaction it records
// their attempts and gives a job of its own (Deliver, then
// DeliveryBackoff) to each one that failed or that DeliverMany left alone
// (not sent in that time). Once the Queue is stopping it sends nothing and
// gives each one its job. If the process dies before that commit, or the
// commit fails, the deliveries are left pending without a job, and the
// sweep (DeliverySweep) enqueues them SweepAge after they were written:
// deliveries are at least once.
func (q *Queue) deliverCommitted(ctx context.Context, ids []int64, written time.Time) {
	if len(ids) == 0 {
		return
	}
	again := ids
	var record func(context.Context, *sql.Tx) error
	// They have no job: the sweep gives one to each still pending
	// SweepAge after it was written, and one sent here after that would
	// be sent twice. So they are sent until half a SweepAge after they
	// were written at most (a slow webhook, one timeout after the other;
	// a transaction that took long leaves less of it), and those left get
	// their job below, as failures do.
	if left := q.cfg.SweepAge/2 - q.cfg.Now().Sub(written); !q.stopping.Load() && left > 0 {
		sctx, cancel := context.WithTimeout(ctx, left)
		errs, rec, err := q.deliverMany(sctx, ids)
		cancel()
		if err != nil {
			q.cfg.Logger.Error("deliver a batch's deliveries; the sweep enqueues them", "deliveries", len(ids), "err", err)
			return
		}
		again, record = nil, rec
		for i, id := range ids {
			if errs[i] != nil {
				again = append(again, id)
			}
		}
	}
	if err := q.recordDeliveries(context.WithoutCancel(ctx), record, nil, nil, again); err != nil {
		q.cfg.Logger.Error("record a batch's deliveries; the sweep enqueues those still pending", "deliveries", len(ids), "err", err)
	}
}

// recordDeliveries writes a batch's attempts (record), completes the
// jobs of sent, puts the jobs of back back and enqueues a job Deliver
// runs alone for each of again, in one transaction.
func (q *Queue) recordDeliveries(ctx context.Context, record func(context.Context, *sql.Tx) error, sent, back, again []int64) error {
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	defer tx.Rollback()
	if record != nil {
		if err := record(ctx, tx); err != nil {
			return err
		}
	}
	if err := q.completeTakenTx(ctx, tx, sent); err != nil {
		return err
	}
	if err := q.putBackTx(ctx, tx, back); err != nil {
		return err
	}
	if err := q.enqueueDeliveriesTx(ctx, tx, again, deliverArgs{Alone: true}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record deliveries: commit: %w", err)
	}
	return nil
}

// sweepDeliveries enqueues, in the sweep's transaction, the deliveries
// DeliverySweep returns.
func (q *Queue) sweepDeliveries(ctx context.Context, tx *sql.Tx, now time.Time) (int, error) {
	if q.cfg.DeliverySweep == nil {
		return 0, nil
	}
	ids, err := q.cfg.DeliverySweep(ctx, tx, now, now.Add(-q.cfg.SweepAge), q.cfg.SweepBatch)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	res, err := q.insertDeliveriesTx(ctx, tx, ids, deliverArgs{})
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	// As for events (Sweep): a job running for longer than RescueAfter
	// belongs to a dead process, and gets a stand-in at once rather than
	// waiting for River's rescuer; each round inserts stand-ins for the
	// stuck jobs the previous one met (a stand-in can be stuck too).
	stuck := now.Add(-q.cfg.RescueAfter)
	for round := 0; len(res) > 0 && round < 4; round++ {
		var standIns []river.InsertManyParams
		for _, r := range res {
			if !r.UniqueSkippedAsDuplicate {
				continue
			}
			job := r.Job
			var args deliverArgs
			if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
				return 0, fmt.Errorf("sweep: job %d: %w", job.ID, err)
			}
			due, retrying := retryDue(r, now)
			switch {
			case job.State == rivertype.JobStateRunning && job.AttemptedAt != nil:
				if job.AttemptedAt.Before(stuck) {
					standIns = append(standIns, river.InsertManyParams{Args: deliverArgs{Delivery: args.Delivery, Rescue: job.ID},
						InsertOpts: &river.InsertOpts{MaxAttempts: q.cfg.DeliveryAttempts}})
					continue
				}
				due = job.AttemptedAt.Add(q.cfg.RescueAfter - q.cfg.SweepAge) // looked at again once it will be stuck
			case !retrying:
				continue // it is going to run
			}
			if q.cfg.DeliveryPostpone != nil {
				if err := q.cfg.DeliveryPostpone(ctx, tx, args.Delivery, due); err != nil {
					return 0, fmt.Errorf("sweep: %w", err)
				}
			}
		}
		if len(standIns) == 0 {
			break
		}
		if res, err = q.client.InsertManyTx(ctx, tx, standIns); err != nil {
			return 0, fmt.Errorf("sweep: stand-ins for %d stuck deliveries: %w", len(standIns), err)
		}
	}
	return len(ids), nil
}

// retryDue reports when the job an insert met instead of inserting its
// own is due, if that job is waiting out a retry (or a schedule) after
// now; at most maxPostpone after now, so that a job cancelled or deleted
// while it waits (River's UI) is replaced within that.
func retryDue(r *rivertype.JobInsertResult, now time.Time) (time.Time, bool) {
	job := r.Job
	waiting := job.State == rivertype.JobStateRetryable || job.State == rivertype.JobStateScheduled
	due := job.ScheduledAt
	if limit := now.Add(maxPostpone); due.After(limit) {
		due = limit
	}
	return due, r.UniqueSkippedAsDuplicate && waiting && job.ScheduledAt.After(now)
}

// maxPostpone bounds how long the sweep leaves a row whose job waits out
// a retry.
const maxPostpone = 10 * time.Minute

// retryPolicy is the backoff of each kind: Backoff for events,
// DeliveryBackoff for deliveries, River's (attempt^4 seconds with jitter)
// for what is not set.
type retryPolicy struct {
	events, deliveries func(int) time.Duration
	now                func() time.Time
	river              river.ClientRetryPolicy
}

func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	b := p.events
	if job.Kind == (deliverArgs{}).Kind() {
		b = p.deliveries
	}
	if b == nil {
		return p.river.NextRetry(job)
	}
	return p.now().Add(b(job.Attempt))
}
