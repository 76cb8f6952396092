package jobs

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// maxAlone bounds Queue.alone; when full it starts again empty (an event
// forgotten there is at worst taken into one more batch).
const maxAlone = 10000

// processBatch runs the first attempt of event id together with the jobs
// of up to Batch-1 other events waiting their first try, in one
// transaction: it locks the events, applies each one's handlers, marks
// those that succeeded finished (each with its attempt counted) and
// ends the other events' jobs (endJobsTx), so that N events cost one commit and
// a handful of statements besides their handlers'; it returns the
// after-commit deliveries they wrote, for the caller to send
// (deliverCommitted) once it no longer holds an acks-first slot, and
// hands what they deferred (Defer) on (deferred). The
// batch ends early at its batchTime (behind: see yield) or Stop, leaving
// the rest untried.
//
// Batches run without savepoints but for the event of id until another
// event's handler fails: that batch rolls back and runs again with a
// savepoint per event, as do the next ones until one where no other event
// failed. An event whose handler fails under its savepoint is rolled back
// to it and the batch goes on without it; so is one a payhook.BatchHandler
// fails and leaves out (under a savepoint of its own). The failure of event id is then recorded
// after the commit, as its attempt's failure, into *errp; another
// event's job is left untried, and its event is kept out of later
// batches, so that its own job runs it alone: that handler call, rolled
// back, counts as no attempt.
//
// It reports false when it did not run the attempt (batching is off, or
// the batch failed as a whole and rolled back): the caller then runs it
// alone.
func (q *Queue) processBatch(ctx context.Context, id int64, final, behind bool, errp *error) (ran bool, sends []int64) {
	if q.cfg.Batch <= 1 || q.cfg.Fetch != nil && q.cfg.FetchSource == nil {
		// A fetch reads the provider outside the transaction before each
		// attempt: its events are processed one by one.
		return false, nil
	}
	if q.cfg.Fetch != nil && q.isAlone(q.alone, id) {
		// Most likely an event of a source that fetches, put back by a
		// batch (see applyBatch): no batch needs to lock it to find out.
		return false, nil
	}
	q.ingestFirst(behind)
	start := time.Now()
	guarded := q.guardBatches.Load()
	done, committed, own, err := q.applyBatch(ctx, id, guarded, behind)
	if errors.Is(err, errHandlerFailed) {
		// An unguarded batch met a failing handler and rolled back as a
		// whole: again with savepoints, and so on until a batch has no
		// failure.
		q.guardBatches.Store(true)
		done, committed, own, err = q.applyBatch(ctx, id, true, behind)
	}
	if errors.Is(err, errFetches) {
		return false, nil
	}
	if err != nil {
		q.cfg.Logger.Debug("event batch rolled back; the event is tried alone", "event", id, "err", err)
		return false, nil
	}
	if q.cfg.OnDone != nil {
		took := time.Since(start)
		for _, d := range done {
			q.cfg.OnDone(d.ev, d.status, took)
		}
	}
	q.deferred(ctx, committed.items)
	if own != nil {
		*errp = q.failed(ctx, id, own, final, start)
	}
	return true, committed.sends
}

type finished struct {
	ev     *payhook.Event
	status payhook.Status
	note   string
}

// applyBatch is processBatch's transaction. It returns the events it
// finished; the after-commit deliveries their handlers wrote that are
// still to be sent (with DeliverMany set: see deliverCommitted; without
// it they got their jobs in the transaction) and what they gave Defer;
// and the error of event id's handlers, or an error after
// which nothing of it is committed.
//
// Guarded, each event is applied under a savepoint, as described at
// processBatch. Unguarded, only the event of id is (a round trip less per
// event, and no PostgreSQL subtransactions), and the first other handler
// that fails rolls the whole batch back with an error wrapping
// errHandlerFailed; a guarded batch where no other event failed makes the
// next ones unguarded again.
func (q *Queue) applyBatch(ctx context.Context, id int64, guarded, behind bool) (done []finished, committed batchCommitted, own, err error) {
	start := time.Now()
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, batchCommitted{}, nil, fmt.Errorf("begin processing of a batch: %w", err)
	}
	defer tx.Rollback()
	// Locks in the sweep's order, events before jobs, and never a wait
	// while holding jobs: its own event first (waiting for it if need
	// be), then the jobs of others and their events, skipping any
	// another transaction holds (the sweep locks events, then waits on
	// their jobs).
	evs, err := q.db.LockEventsTx(ctx, tx, []int64{id}, false, 0)
	if err != nil {
		return nil, batchCommitted{}, nil, err
	}
	if len(evs) > 0 && q.fetches(evs[0].Source) {
		return nil, batchCommitted{}, nil, errFetches
	}
	room, ownBytes := q.batchRoom(guarded, behind), payloadBytes(evs)
	if ownBytes >= q.cfg.BatchBytes {
		room = 0 // its own event fills the batch
	}
	taken, err := q.lockJobsTx(ctx, tx, room, q.alone)
	if err != nil {
		return nil, batchCommitted{}, nil, err
	}
	others := make([]int64, 0, len(taken))
	jobOf := make(map[int64]int64, len(taken))
	for _, t := range taken {
		if t.event != id { // another job of its own event: locked already
			others = append(others, t.event)
		}
		jobOf[t.event] = t.job
	}
	locked, err := q.db.LockEventsTx(ctx, tx, others, true, q.cfg.BatchBytes-ownBytes)
	if err != nil {
		return nil, batchCommitted{}, nil, err
	}
	// The events of a source that fetches go back (below), and are kept
	// out of later batches: their own jobs read them alone.
	locked = slices.DeleteFunc(locked, func(ev *payhook.Event) bool {
		if q.fetches(ev.Source) {
			q.keepAlone(q.alone, ev.ID)
			return true
		}
		return false
	})
	evs = append(evs, locked...)
	if len(evs) > 0 {
		q.payloadSize.Store(max(1, (ownBytes+payloadBytes(locked))/int64(len(evs))))
	}
	// The jobs of events not locked go back (the batch leaves them as they
	// are, locked until it ends): another transaction holds
	// the event (its job runs it later), it is no longer received (its
	// job then finds nothing to do), or its payload does not fit in the
	// batch's BatchBytes (a batch of its own job takes it).
	var back []int64
	isLocked := make(map[int64]bool, len(evs))
	for _, ev := range evs {
		isLocked[ev.ID] = true
	}
	for _, t := range taken {
		if !isLocked[t.event] {
			back = append(back, t.job)
		}
	}
	ctx = context.WithValue(ctx, queueKey{}, q)
	deliveries := &batchDeliveries{}
	ctx = context.WithValue(ctx, batchKey{}, deliveries)
	done = make([]finished, 0, len(evs))
	othersFailed := false
	if !guarded && len(evs) > 1 {
		// One handler for them all that takes a batch at once; the events
		// it failed (and left out) are those failed under their savepoint
		// below.
		all, failed, ok, err := q.handleBatch(ctx, tx, evs)
		if err != nil {
			return nil, batchCommitted{}, nil, fmt.Errorf("processing a batch: %w: %w", errHandlerFailed, err)
		}
		if ok {
			done, evs = all, nil
			deliveries.all, committed.items = deliveries.event, deliveries.eventItems
			for _, f := range failed {
				if f.ev.ID == id {
					own = f.err
				} else if job, ok := jobOf[f.ev.ID]; ok {
					back = append(back, job)
					q.keepAlone(q.alone, f.ev.ID)
				}
			}
		}
	}
	for i, ev := range evs {
		if i > 0 && q.batchOver(start, behind) {
			// The rest goes back untried (the event of id, if it was
			// still waiting, is evs[0] and was applied).
			for _, rest := range evs[i:] {
				back = append(back, jobOf[rest.ID])
			}
			break
		}
		ev.Attempts++ // as ClaimEventTx counts it; FinishEventsTx stores it
		// The event of id always has its savepoint: its failure is its
		// attempt's, and must not call its handlers again.
		saved := guarded || ev.ID == id
		if saved {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT payhook_event`); err != nil {
				return nil, batchCommitted{}, nil, fmt.Errorf("processing a batch: savepoint: %w", err)
			}
		}
		deliveries.event, deliveries.eventItems = deliveries.event[:0], deliveries.eventItems[:0]
		status, note, herr := q.dispatchSafe(ctx, tx, ev)
		if saved {
			// Rolled back to or not, the savepoint goes: savepoints left
			// open would nest, and SQLite would keep journaling every page
			// the rest of the batch writes into the savepoint's journal,
			// walking it at each statement's end.
			if herr != nil {
				if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT payhook_event`); err != nil {
					return nil, batchCommitted{}, nil, fmt.Errorf("processing a batch: rollback to savepoint: %w", err)
				}
			}
			if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT payhook_event`); err != nil {
				return nil, batchCommitted{}, nil, fmt.Errorf("processing a batch: release savepoint: %w", err)
			}
		}
		if herr == nil {
			done = append(done, finished{ev, status, note})
			deliveries.all = append(deliveries.all, deliveries.event...)
			committed.items = append(committed.items, deliveries.eventItems...)
			continue
		}
		if ev.ID != id {
			othersFailed = true // the event of id failing often says nothing of the others
		}
		if !saved {
			return nil, batchCommitted{}, nil, fmt.Errorf("processing a batch: event %d: %w: %w", ev.ID, errHandlerFailed, herr)
		}
		if ev.ID == id {
			own = herr
			continue
		}
		if job, ok := jobOf[ev.ID]; ok {
			back = append(back, job)
			q.keepAlone(q.alone, ev.ID)
		}
	}
	if len(done) > 0 {
		q.eventCost.Store(int64(time.Since(start)) / int64(len(done)))
	}
	if err := q.finishTx(ctx, tx, done); err != nil {
		return nil, batchCommitted{}, nil, err
	}
	if q.cfg.DeliverMany == nil {
		if err := q.EnqueueDeliveriesTx(ctx, tx, deliveries.all, false); err != nil {
			return nil, batchCommitted{}, nil, err
		}
	} else {
		committed.sends = deliveries.all
	}
	if err := q.endJobsTx(ctx, tx, taken, back, done); err != nil {
		return nil, batchCommitted{}, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, batchCommitted{}, nil, fmt.Errorf("commit processing of a batch of %d events: %w", len(evs), err)
	}
	if guarded && !othersFailed {
		q.guardBatches.Store(false)
	}
	return done, committed, own, nil
}

// handleBatch applies evs together when their handler is one
// payhook.BatchHandler (payhook.Mux.DispatchBatch), and returns those it
// finished, each with its attempt counted, and those that failed, of which
// the handler left nothing; an error when it failed or panicked. It
// reports false, applying nothing, when they have other handlers.
func (q *Queue) handleBatch(ctx context.Context, tx *sql.Tx, evs []*payhook.Event) (done []finished, failed []failedEvent, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("processing a batch of %d events panicked: %v", len(evs), r)
		}
	}()
	errs, ok, err := q.cfg.Handlers.DispatchBatch(ctx, tx, evs)
	if err != nil || !ok {
		return nil, nil, ok, err
	}
	done = make([]finished, 0, len(evs))
	for i, ev := range evs {
		ev.Attempts++ // as ClaimEventTx counts it; FinishEventsTx stores it
		status, note, err := handled(errs[i])
		if err != nil {
			failed = append(failed, failedEvent{ev, err})
			continue
		}
		done = append(done, finished{ev, status, note})
	}
	return done, failed, true, nil
}

// failedEvent is an event whose handler failed in a batch, and its error.
type failedEvent struct {
	ev  *payhook.Event
	err error
}

// errHandlerFailed is the error of an unguarded batch whose handler
// failed (see applyBatch).
var errHandlerFailed = errors.New("a handler failed in a batch without savepoints")

// errFetches is applyBatch's error for an event of a source that Fetch
// reads (FetchSource): it is processed alone.
var errFetches = errors.New("the event's resource is read before its attempt")

// fetches reports whether Fetch reads the resources of source's events.
func (q *Queue) fetches(source string) bool {
	return q.cfg.Fetch != nil && (q.cfg.FetchSource == nil || q.cfg.FetchSource(source))
}

// batchTime is how long a batch may go on taking events: BatchTime, or
// BusyBatchTime while acknowledging unless the batch is behind (see
// yield).
func (q *Queue) batchTime(behind bool) time.Duration {
	if q.acking() && !behind {
		return q.cfg.BusyBatchTime
	}
	return q.cfg.BatchTime
}

// batchOver reports whether a batch begun at start takes no more events:
// the Queue is stopping, or the batch has run for its batchTime.
func (q *Queue) batchOver(start time.Time, behind bool) bool {
	return q.stopping.Load() || time.Since(start) >= q.batchTime(behind)
}

// guardedBatch bounds the events of a batch with a savepoint each (see
// Config.Batch), and of a batch of deliveries.
const guardedBatch = 32

// payloadBytes is the size of evs' payloads together.
func payloadBytes(evs []*payhook.Event) int64 {
	var n int64
	for _, ev := range evs {
		n += int64(len(ev.Payload))
	}
	return n
}

// batchRoom is how many jobs besides its own a batch takes: Batch-1
// (guardedBatch-1 at most if guarded), or as many as the last batch's
// time per event says fit in batchTime, and its payload bytes per event
// in BatchBytes, so that a batch cut short puts back few (and reads few
// payloads it then leaves out).
func (q *Queue) batchRoom(guarded, behind bool) int {
	n := q.cfg.Batch - 1
	if guarded {
		n = min(n, guardedBatch-1)
	}
	if c := q.eventCost.Load(); c > 0 {
		n = min(n, int(int64(q.batchTime(behind))/c))
	}
	if b := q.payloadSize.Load(); b > 0 {
		n = min(n, max(0, int(q.cfg.BatchBytes/b)-1))
	}
	return n
}

// batchKey carries a batch's *batchDeliveries in its handlers' context.
type batchKey struct{}

// batchDeliveries collects the after-commit deliveries the handlers of a
// batch enqueue (EnqueueDeliveries): event those of the event being
// applied, all those of the events that succeeded, enqueued together
// before the commit; and eventItems what the event being applied gave
// Defer.
type batchDeliveries struct {
	event, all []int64
	eventItems []any
}

// batchCommitted is what a committed batch leaves to do: the deliveries
// to send (deliverCommitted) and what its events gave Defer.
type batchCommitted struct {
	sends []int64
	items []any
}

// dispatchSafe is dispatch with a panic turned into the attempt's error.
func (q *Queue) dispatchSafe(ctx context.Context, tx *sql.Tx, ev *payhook.Event) (status payhook.Status, note string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("processing event %d panicked: %v", ev.ID, r)
		}
	}()
	return q.dispatch(ctx, tx, ev)
}

// finishTx marks the events of done with their status, one statement per
// distinct (status, note): all processed ones together.
func (q *Queue) finishTx(ctx context.Context, tx *sql.Tx, done []finished) error {
	type group struct {
		status payhook.Status
		note   string
	}
	var order []group
	ids := map[group][]int64{}
	for _, d := range done {
		g := group{d.status, d.note}
		if _, ok := ids[g]; !ok {
			order = append(order, g)
		}
		ids[g] = append(ids[g], d.ev.ID)
	}
	now := q.cfg.Now()
	for _, g := range order {
		if err := q.db.FinishEventsTx(ctx, tx, ids[g], g.status, now, g.note); err != nil {
			return err
		}
	}
	return nil
}

// isAlone reports whether id is in alone (q.alone or q.aloneDeliveries).
func (q *Queue) isAlone(alone map[int64]bool, id int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return alone[id]
}

// keepAlone adds id to alone (q.alone or q.aloneDeliveries), so that no
// batch takes its job again.
func (q *Queue) keepAlone(alone map[int64]bool, id int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(alone) >= maxAlone {
		clear(alone)
	}
	alone[id] = true
}

// riverSQLiteTime is the layout of River's times on SQLite, which compare
// as text with datetime('now', 'subsec').
const riverSQLiteTime = "2006-01-02 15:04:05.000"

// takenJob is a job takeJobsTx or lockJobsTx took and the row it is
// about (an event's, or a delivery's).
type takenJob struct {
	job, event int64
	replay     bool // a replay's job (processArgs.Replay)
}

// takenArgs reads the row id of the args of either kind pickJobsTx takes.
type takenArgs struct {
	EventID  int64 `json:"event_id"`
	Delivery int64 `json:"delivery"`
	Replay   int64 `json:"replay"`
}

// takeJobsTx takes, in tx, up to n deliveries' jobs (deliverArgs') that are
// due and were never tried (from the sweep, a batch's
// EnqueueDeliveries), oldest first as River fetches them, skipping any
// another transaction holds, and marks them running their first attempt,
// as River's fetch would: a delivery batch commits tx before it sends,
// and the jobs stay its own, live (no sweep inserts a second job of a
// delivery being sent), until it completes those sent (completeTakenTx)
// and puts back those that failed (putBackTx); if the process dies
// first, River rescues them. The locking pick decides: on PostgreSQL FOR UPDATE
// SKIP LOCKED reads again a row another transaction changed and drops it
// unless it is still available, so a job River fetched meanwhile is
// running and not taken (SQLite's one writer serialises). Jobs of the
// rows in alone (guarded by q.mu), and deliveries' jobs marked Alone (a
// delivery that failed in its batch), are left to run alone.
func (q *Queue) takeJobsTx(ctx context.Context, tx *sql.Tx, n int, alone map[int64]bool) ([]takenJob, error) {
	return q.pickJobsTx(ctx, tx, deliverArgs{}.Kind(), n, alone, true)
}

// lockJobsTx is takeJobsTx for a processing batch (processArgs' jobs),
// which applies their events in tx: it locks the jobs and leaves them as
// they are, and the batch ends those of the events it applied in tx
// (endJobsTx), so that the end commits or rolls back with them. A job it
// did not end, it never wrote: the commit's release of its lock puts it
// back.
func (q *Queue) lockJobsTx(ctx context.Context, tx *sql.Tx, n int, alone map[int64]bool) ([]takenJob, error) {
	return q.pickJobsTx(ctx, tx, processArgs{}.Kind(), n, alone, false)
}

// pickJobsTx is takeJobsTx when claim is set, lockJobsTx when not.
func (q *Queue) pickJobsTx(ctx context.Context, tx *sql.Tx, kind string, n int, alone map[int64]bool, claim bool) ([]takenJob, error) {
	if n <= 0 {
		return nil, nil
	}
	q.mu.Lock()
	nalone := len(alone)
	q.mu.Unlock()
	limit := n + min(nalone, n) // room to drop the alone ones
	// The jobs picked, and their args: on SQLite, whose one writer
	// leaves no row locks to skip, River keeps times in datetime('now',
	// 'subsec')'s format and args as JSON or JSONB.
	from := `FROM river_job
			WHERE state = 'available' AND queue = $1 AND kind = $2 AND attempt = 0
				AND scheduled_at <= coalesce($4::timestamptz, now()) AND args->'alone' IS NULL
			ORDER BY priority, scheduled_at, id
			LIMIT $3
			FOR UPDATE SKIP LOCKED`
	argsCol := `args`
	if q.db.Engine == store.SQLite {
		from = `FROM river_job
			WHERE state = 'available' AND queue = $1 AND kind = $2 AND attempt = 0
				AND scheduled_at <= coalesce(CAST($4 AS TEXT), datetime('now', 'subsec'))
				AND json_extract(args, '$.alone') IS NULL
			ORDER BY priority, scheduled_at, id
			LIMIT $3`
		argsCol = `CAST(json(args) AS TEXT)`
	}
	query := `SELECT id, ` + argsCol + ` ` + from
	switch {
	case claim && q.db.Engine == store.SQLite:
		query = q.runJobs(`id IN (SELECT id `+from+`)`, 4) + ` RETURNING id, ` + argsCol
	case claim:
		query = `WITH picked AS MATERIALIZED (SELECT id ` + from + `) ` +
			q.runJobs(`id IN (SELECT id FROM picked)`, 4) + ` RETURNING id, ` + argsCol
	}
	queue := river.QueueDefault
	if kind == (deliverArgs{}).Kind() {
		queue = DeliveryQueue
	}
	rows, err := tx.QueryContext(ctx, query, queue, kind, limit, q.riverStamp())
	if err != nil {
		return nil, fmt.Errorf("take waiting %s jobs: %w", kind, err)
	}
	defer rows.Close()
	var all []takenJob
	for rows.Next() {
		var t takenJob
		var raw []byte
		if err := rows.Scan(&t.job, &raw); err != nil {
			return nil, fmt.Errorf("take waiting %s jobs: %w", kind, err)
		}
		var args takenArgs
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("take waiting %s jobs: job %d: args %q: %w", kind, t.job, raw, err)
		}
		t.event, t.replay = args.EventID, args.Replay != 0
		if kind == (deliverArgs{}).Kind() {
			t.event = args.Delivery
		}
		all = append(all, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take waiting %s jobs: %w", kind, err)
	}
	rows.Close()
	if claim {
		// An UPDATE's RETURNING follows no ORDER BY (PostgreSQL's comes
		// in the order its join met the rows): the deliveries are taken
		// and sent in the order they were written, oldest first, alike
		// on both engines.
		slices.SortFunc(all, func(a, b takenJob) int { return cmp.Compare(a.event, b.event) })
	}
	var taken []takenJob
	var back []int64
	q.mu.Lock()
	for _, t := range all {
		if alone[t.event] || len(taken) >= n {
			back = append(back, t.job)
			continue
		}
		taken = append(taken, t)
	}
	q.mu.Unlock()
	if !claim {
		return taken, nil // the others were only locked
	}
	if err := q.putBackTx(ctx, tx, back); err != nil {
		return nil, err
	}
	return taken, nil
}

// riverStamp is the time River's columns get from a take: nil for the
// database's own clock, or Now with StampWithNow.
func (q *Queue) riverStamp() any {
	switch {
	case !q.cfg.StampWithNow:
		return nil
	case q.db.Engine == store.SQLite:
		return q.cfg.Now().UTC().Round(time.Millisecond).Format(riverSQLiteTime)
	default:
		return q.cfg.Now().UTC()
	}
}

// completeJobs is the statement that marks the jobs where holds
// completed after one attempt, as River marks a job that succeeded, at
// the time of parameter $stamp (riverStamp).
func (q *Queue) completeJobs(where string, stamp int) string {
	at := q.stampAt(stamp)
	return `UPDATE river_job SET state = 'completed', attempt = attempt + 1, attempted_at = ` + at +
		`, finalized_at = ` + at + ` WHERE ` + where
}

// runJobs is the statement that marks the jobs where holds running their
// first attempt, as River's fetch does, at the time of parameter $stamp:
// live still, so that no second job of theirs is inserted (the sweep's)
// while they run, and rescued by River if the process dies first.
func (q *Queue) runJobs(where string, stamp int) string {
	return `UPDATE river_job SET state = 'running', attempt = attempt + 1, attempted_at = ` + q.stampAt(stamp) + ` WHERE ` + where
}

// stampAt is the SQL time of parameter $stamp (riverStamp).
func (q *Queue) stampAt(stamp int) string {
	if q.db.Engine == store.SQLite {
		return fmt.Sprintf(`coalesce(CAST($%d AS TEXT), datetime('now', 'subsec'))`, stamp)
	}
	return fmt.Sprintf(`coalesce($%d::timestamptz, now())`, stamp)
}

// endJobsTx ends, in tx, the jobs lockJobsTx took (taken) but those in
// back, whose events the batch left out. A job whose event the batch
// marked processed is deleted: the event's row is the record of its
// attempt, and marking it completed would cost what deleting it does and
// more (on PostgreSQL a new version of the row with an entry in each of
// River's nine indexes, two of them GIN; then River's cleaner deleting it
// a day later, docs/benchmarks.md). A replay's job, or one whose event
// ended otherwise (ignored), is marked completed, as River marks a job
// that succeeded, so that the event's attempts show it (Attempts). Any
// other (a second job of an event the batch did not apply: its own
// failed event's, whose job is retried, or one of an event whose other
// job went back) is deleted too: the job left runs its event.
func (q *Queue) endJobsTx(ctx context.Context, tx *sql.Tx, taken []takenJob, back []int64, done []finished) error {
	left := make(map[int64]bool, len(back))
	for _, job := range back {
		left[job] = true
	}
	status := make(map[int64]payhook.Status, len(done))
	for _, d := range done {
		status[d.ev.ID] = d.status
	}
	var gone, completed []int64
	for _, t := range taken {
		st, applied := status[t.event]
		switch {
		case left[t.job]:
		case applied && (t.replay || st != payhook.StatusProcessed):
			completed = append(completed, t.job)
		default:
			gone = append(gone, t.job)
		}
	}
	if len(gone) > 0 {
		in, arg := q.db.InIDs("id", 1, gone)
		if _, err := tx.ExecContext(ctx, `DELETE FROM river_job WHERE `+in, arg); err != nil {
			return fmt.Errorf("end %d event jobs: %w", len(gone), err)
		}
	}
	if len(completed) > 0 {
		in, arg := q.db.InIDs("id", 1, completed)
		if _, err := tx.ExecContext(ctx, q.completeJobs(in, 2), arg, q.riverStamp()); err != nil {
			return fmt.Errorf("complete %d event jobs: %w", len(completed), err)
		}
	}
	return nil
}

// putBackTx makes the jobs takeJobsTx took available again, untried.
func (q *Queue) putBackTx(ctx context.Context, tx *sql.Tx, jobs []int64) error {
	return q.setTakenTx(ctx, tx, jobs, "put back", `state = 'available', attempt = 0, attempted_at = NULL, finalized_at = NULL`)
}

// completeTakenTx marks the jobs takeJobsTx took completed, as River marks
// a job that succeeded.
func (q *Queue) completeTakenTx(ctx context.Context, tx *sql.Tx, jobs []int64) error {
	return q.setTakenTx(ctx, tx, jobs, "complete", `state = 'completed', finalized_at = `+q.stampAt(2), q.riverStamp())
}

// setTakenTx sets, in tx, the columns of set of the jobs takeJobsTx took
// and that still run (what names it in an error); args are set's
// parameters from $2.
func (q *Queue) setTakenTx(ctx context.Context, tx *sql.Tx, jobs []int64, what, set string, args ...any) error {
	if len(jobs) == 0 {
		return nil
	}
	in, arg := q.db.InIDs("id", 1, jobs)
	if _, err := tx.ExecContext(ctx, `UPDATE river_job SET `+set+` WHERE `+in+` AND state = 'running'`, append([]any{arg}, args...)...); err != nil {
		return fmt.Errorf("%s %d jobs: %w", what, len(jobs), err)
	}
	return nil
}
