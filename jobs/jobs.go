// Package jobs is payhook's job queue, built on River. It is the only
// package that imports River.
//
// A Queue stores verified events and enqueues their processing job in one
// transaction (Ingest), runs the workers that apply each event's handlers
// inside the transaction that marks it processed (Process), re-enqueues on
// purpose (Replay), and sweeps events left waiting without a job, so that
// the events table, not the queue, is the truth about what is processed.
// It also runs the after-commit deliveries of the outbox, one job each
// (Config.Deliver, EnqueueDeliveries), retried on their own.
package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/logthrottle"
	"github.com/payhook/payhook/store"
)

// Config configures a Queue. Zero fields take the documented defaults.
type Config struct {
	// Handlers routes events to their handlers. Events whose type no
	// handler takes are marked ignored. If nil, every event is ignored.
	Handlers *payhook.Mux
	// Workers is how many jobs of River's default queue (the events',
	// the sweep's, Periodic's) run at once. Default 20 when Fetch is set,
	// on either engine (each attempt then waits on a provider's API, one
	// event at a time, outside any transaction); else 8 on PostgreSQL,
	// and 4 on SQLite, whose one connection serialises them. Without Fetch
	// each worker applies a batch of events (Batch) in one transaction:
	// more workers only take CPU from the ack path.
	Workers int
	// DeliveryWorkers is how many deliveries' jobs (retries, the sweep's
	// stand-ins, resends, and the first attempts of the deliveries of an
	// event processed alone: a retry, Batch 1, every event Fetch reads)
	// run at once, in a River queue of their own (DeliveryQueue)
	// beside the Workers of the events' jobs: a sink down or slow for a
	// while leaves thousands of retries due, which in one queue were
	// fetched before the events' newer jobs and held every event's
	// processing behind them. Default Workers when Fetch is set; else 4,
	// or 2 on SQLite.
	DeliveryWorkers int
	// PauseLag, BusyWorkers and BusyMaxLag say how processing gives way
	// to the acks while the Queue is storing deliveries, by how long an
	// attempt's job has waited since it was due (see yield.go): less than
	// PauseLag during a burst (deliveries stored faster than one at a
	// time), or 200ms (PauseLag if less) under a steady load, it waits;
	// less than BusyMaxLag, it is one of at most BusyWorkers attempts at
	// once, each batching for BusyBatchTime; longer, it runs as when no
	// delivery is being stored. A burst is acknowledged first; a steady
	// load is batched over 200ms; a sustained load the machine can
	// process is processed about BusyMaxLag behind at most, not ever
	// further behind. The wait counts against the attempt's JobTimeout:
	// BusyMaxLag may be half of it at most. Defaults: PauseLag 3s (or
	// BusyMaxLag if less): on SQLite a batch holds the one connection the
	// acks' commits wait for, and on PostgreSQL the acks take the CPU a
	// batch would (docs/benchmarks.md); BusyWorkers 1; BusyMaxLag 10s, or
	// a quarter of JobTimeout if less.
	// A negative PauseLag never pauses; with BusyWorkers of Workers or
	// more no attempt waits for a slot.
	PauseLag    time.Duration
	BusyWorkers int
	BusyMaxLag  time.Duration
	// Batch is how many events one worker may apply in one transaction:
	// the event of its job and others waiting their first try, whose jobs
	// it completes in the same transaction. A batch commits only if every
	// event in it succeeds, or failed under a savepoint (a
	// payhook.BatchHandler's own, or one per event after a batch that
	// failed) and was left out; otherwise it rolls back and each event is
	// tried on its own, as with a Batch of 1. Retries, and every event
	// Fetch reads (see FetchSource), are processed one by one. A batch
	// after one that failed applies each event under a savepoint, a
	// PostgreSQL subtransaction (past 64 in one transaction they slow every
	// snapshot): it takes 32 events at most, as do the batches of the
	// first attempts of after-commit deliveries (DeliverMany).
	// Default 512 (a payhook.BatchHandler, billing's processing, costs a
	// statement per table for the whole batch; on 2 cores 512 processed a
	// backlog 20% faster than 128 on SQLite, 9% on PostgreSQL,
	// docs/benchmarks.md); 1 turns batching off.
	Batch int
	// BatchBytes bounds the payloads of a batch's events, which it holds
	// in memory with what its handlers make of them: taken in the order
	// of their row ids, an event whose payload does not fit any more goes
	// back untried for a later batch (a batch always takes the event of
	// its own job). Default DefaultBatchBytes.
	BatchBytes int64
	// BatchTime bounds how long a batch goes on taking its events: past
	// it, the events not applied yet are left out and their jobs put back
	// untried for the next batch. It bounds how long a processing
	// transaction holds its locks (on SQLite the one connection an ack's
	// commit waits for) and how long Stop waits for a running batch; once
	// Stop is called, a batch applies no more than the event it is on. A
	// batch a payhook.BatchHandler takes at once is applied whole: it is
	// bounded by the events it takes, as many as the last batch's time
	// per event says fit in BatchTime.
	// Default 100ms.
	BatchTime time.Duration
	// BusyBatchTime is BatchTime while the Queue is storing deliveries
	// and the batch's attempt is not behind (see BusyWorkers): acks come
	// first. Default 2ms on SQLite, whose one connection an ack waits
	// for while a batch holds it; 20ms on PostgreSQL, where it does not:
	// there a longer batch commits less often for the same events, and
	// the one busy worker takes no more CPU from the acks.
	BusyBatchTime time.Duration
	// MaxAttempts is how many times an event is tried before it is marked
	// failed. Default 25 (River's default; about three weeks of retries).
	MaxAttempts int
	// MaxPutOffs is how many times a Fetch's Later may put an event's job
	// off (River's snoozes, counted in the job's row, so across restarts
	// and instances); the next Later is a failed attempt, so that a read
	// put off for ever still ends failed, with its alert. Default 3600:
	// an hour at least, a Later being a second at least.
	MaxPutOffs int
	// Backoff gives the delay before retry n (1 for the first retry).
	// Default: River's policy, attempt^4 seconds with jitter.
	Backoff func(attempt int) time.Duration
	// PollInterval is how often idle workers look for new jobs. payhook
	// enqueues through database/sql, which has no LISTEN, so this bounds
	// the pickup latency of a job inserted by another process. Default
	// 100ms.
	PollInterval time.Duration
	// FetchCooldown is the least time between two fetches. Default 5ms.
	FetchCooldown time.Duration
	// SweepInterval is how often events left waiting are re-enqueued.
	// Default 15 seconds.
	SweepInterval time.Duration
	// SweepAge is how long after its last enqueue an event still received
	// is looked at by the sweep, and a fact or delivery left untold or
	// pending (DeliverySweep). Default 1 minute. Keep it above the
	// outbox's AttemptTimeout (30 seconds by default): a Tell sends for
	// that long after claiming its facts, and the sweep must not route
	// them meanwhile.
	SweepAge time.Duration
	// SweepBatch bounds the events, and the deliveries, that one of a
	// sweep's transactions looks at; a sweep runs more of them while one
	// fills it (see Sweep). Default 1000.
	SweepBatch int
	// JobTimeout bounds one processing attempt. Default
	// DefaultJobTimeout.
	JobTimeout time.Duration
	// RescueAfter is how long a job may be running before it is taken for
	// the job of a dead process (killed, or cut off from the database
	// before its completion was written): River's rescuer retries it and
	// the sweep gives its event a new job at once. It must be more than
	// JobTimeout, which every live attempt ends within. Default
	// JobTimeout + 15 seconds. See the README's "Recovery" for the bound
	// it sets.
	RescueAfter time.Duration
	// Logger receives the queue's logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// StampWithNow, if true, makes River's own times (a job's creation,
	// schedule, attempt and end, leadership) read Now instead of the
	// database's clock, which River's queries use by default (SQLite's
	// datetime('now'), PostgreSQL's now()). A simulation on fake time
	// (testing/synctest) needs it: there the database's clock is the real
	// one. Default false: one clock, the database's, for every instance
	// sharing it.
	StampWithNow bool
	// OnDone, if set, is called after an attempt ends an event's
	// processing (metrics): status is processed, ignored or failed (its
	// last attempt), took the attempt's time, ev the event as it was
	// claimed (its Source and ReceivedAt). It must be cheap. For a
	// failure it costs one read of the event, off the hot path.
	OnDone func(ev *payhook.Event, status payhook.Status, took time.Duration)
	// OnStop, if set, is called by Stop before it returns, on every call
	// and whatever it returns: once River has stopped and no attempt runs
	// any more or, when Stop's ctx ends first, once the attempts it
	// cancels have returned or 5 s more have passed (then some may still
	// run, and log, after OnStop). The handlers' own work that outlives an
	// attempt ends there (billing/process tells the rate limits' log lines
	// it held back); it must bear being called more than once.
	OnStop func()
	// Fetch, if set, reads the current state of the resource an event is
	// about from the provider's API before each attempt, outside any
	// transaction, and the handlers find it in Event.Resource. It returns
	// nil when there is nothing to fetch; an error fails the attempt,
	// but one of Later, which puts it off without counting it.
	Fetch func(ctx context.Context, ev *payhook.Event) ([]byte, error)
	// FetchSource, if set with Fetch, reports whether Fetch reads the
	// resources of a source's events: those of the other sources are
	// then applied in batches (Batch), as without a Fetch. If nil, every
	// event is read and processed alone.
	FetchSource func(source string) bool
	// OnFailed, if set, is called when an event fails for good (its last
	// attempt failed, or at once when the error wraps
	// payhook.ErrMalformed), inside tx, the transaction that marks it
	// failed: ev is failed, with its attempts counted. What it writes in tx
	// (an alert) commits with the failure, so a crash never leaves a
	// failed event without it. If it returns an error, neither commits:
	// the attempt is counted, the event stays received and the sweep gives
	// it a new job later. cause's text is storable.
	OnFailed func(ctx context.Context, tx *sql.Tx, ev *payhook.Event, cause error) error
	// Deliver, if set, runs one attempt of the after-commit delivery with
	// row id delivery (an outbox delivery, enqueued by EnqueueDeliveries
	// or the sweep) in a job of its own, after the commit that wrote it:
	// an error retries it with DeliveryBackoff, never touching the event
	// that made it; final marks the last of DeliveryAttempts. The attempt
	// of a process that died is retried by River's rescuer once it has run
	// for RescueAfter: deliveries are at least once.
	Deliver func(ctx context.Context, delivery int64, final bool) error
	// DeliverMany, if set, runs the first attempt of several after-commit
	// deliveries at once (Deliver's, but sent together). The deliveries
	// a batch of events wrote get no job: the batch's worker calls
	// DeliverMany with them just after the commit (see deliverCommitted
	// for what a crash then leaves to the sweep). For the others (from
	// events processed alone, the sweep, a resend), the worker running a
	// delivery's first attempt takes the jobs of up to Batch-1 other
	// deliveries waiting their first try, marked running in a
	// transaction of its own, and calls DeliverMany with all their ids,
	// outside any transaction. It returns, in the order of ids, nil for a
	// delivery that needs nothing more (delivered, or no longer pending)
	// and an error for one it did not deliver (its sink failed, or it
	// left it to Deliver: a paused or unknown sink), and record, which
	// writes its attempts in the transaction that also puts the jobs of
	// the failed ones back untried; each failed one is then tried again
	// at once by Deliver, alone, and retried from there with
	// DeliveryBackoff. A process that dies before that commit leaves
	// them pending with a completed job: the sweep (DeliverySweep)
	// enqueues them again. If nil, deliveries run one by one.
	DeliverMany func(ctx context.Context, deliveries []int64) (errs []error, record func(ctx context.Context, tx *sql.Tx) error)
	// DeliverySweep, if set, is called by every sweep inside its
	// transaction: it returns up to limit deliveries to enqueue (pending,
	// and last enqueued before before), which the sweep enqueues in the
	// same transaction.
	DeliverySweep func(ctx context.Context, tx *sql.Tx, now, before time.Time, limit int) ([]int64, error)
	// DeliveryPostpone, if set, is called by the sweep, in its
	// transaction, for each delivery DeliverySweep returned whose job is
	// waiting out a retry: at is when the retry is due, or 10 minutes on
	// if that is sooner. DeliverySweep should not return it again before
	// SweepAge after at (outbox.Outbox.PostponeSweepTx), so that a
	// backlog of retries (a sink down) costs the sweep one look per
	// delivery per 10 minutes at most, not one per SweepAge.
	DeliveryPostpone func(ctx context.Context, tx *sql.Tx, delivery int64, at time.Time) error
	// AfterCommit, if set, is called in the worker once a transaction of
	// handlers (or of OnFailed) has committed, with what they gave Defer
	// in it, in order: a batch's, those of its events that succeeded,
	// together. It is for effects that a crash between the commit and the
	// call may lose because something else finds them: the outbox's
	// untold facts (outbox.Outbox.Tell), which its sweep routes.
	AfterCommit func(ctx context.Context, deferred []any)
	// DeliveryAttempts is how many times a delivery is tried. Default 25
	// (about three weeks with the default backoff).
	DeliveryAttempts int
	// DeliveryBackoff gives the delay before a delivery's retry n.
	// Default: River's policy, attempt^4 seconds with jitter.
	DeliveryBackoff func(attempt int) time.Duration
	// Periodic is work run periodically on one instance (see Periodic).
	// Names and intervals are checked by New.
	Periodic []Periodic
}

// DefaultJobTimeout is Config.JobTimeout's default.
const DefaultJobTimeout = time.Minute

// DefaultBatchBytes is Config.BatchBytes's default: 8 MiB of payloads a
// batch, far more than Batch events of a few KiB (Stripe's and Paddle's
// usual size), and eight events of receiver.DefaultMaxBodyBytes, so that a
// backlog of large events cannot make the workers' batches outgrow the
// process's memory (512 events of 1 MiB each, several batches at once).
const DefaultBatchBytes = 8 << 20

// rescueMargin is how much longer than JobTimeout a job may be running
// before it is rescued by default: time for a handler to return once its
// context is cancelled and for River to write the completion.
const rescueMargin = 15 * time.Second

func (c Config) withDefaults(engine store.Engine) Config {
	if c.Handlers == nil {
		c.Handlers = &payhook.Mux{}
	}
	if c.Workers <= 0 {
		switch {
		case c.Fetch != nil:
			// Each attempt waits on a provider's API outside any
			// transaction: the reads overlap, on SQLite too, whose one
			// connection then serialises only the short transactions
			// (BenchmarkProcessFetch: 4 workers 74 events/s at 50 ms a
			// read, 20 workers 335/s).
			c.Workers = 20
		case engine == store.SQLite:
			c.Workers = 4
		default:
			c.Workers = 8
		}
	}
	if c.DeliveryWorkers <= 0 {
		switch {
		case c.Fetch != nil:
			// Every event is processed alone, and each enqueues its
			// deliveries' first attempts as jobs of DeliveryQueue: as many
			// workers send them as process the events, as before that
			// queue, when they shared the Workers.
			c.DeliveryWorkers = c.Workers
		case engine == store.SQLite:
			c.DeliveryWorkers = 2
		default:
			c.DeliveryWorkers = 4
		}
	}
	if c.BusyWorkers <= 0 {
		c.BusyWorkers = 1
	}
	if c.Batch <= 0 {
		c.Batch = 512
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.JobTimeout <= 0 {
		c.JobTimeout = DefaultJobTimeout
	}
	if c.BusyMaxLag <= 0 {
		// Well within an attempt's JobTimeout, which yield's wait counts
		// against.
		c.BusyMaxLag = min(10*time.Second, c.JobTimeout/4)
	}
	if c.PauseLag == 0 {
		c.PauseLag = min(3*time.Second, c.BusyMaxLag)
	}
	if c.BatchTime <= 0 {
		c.BatchTime = 100 * time.Millisecond
	}
	if c.BusyBatchTime <= 0 {
		// Measured at 1,000 deliveries/s (docs/benchmarks.md): on SQLite
		// p99 ack 34 ms with 5ms, 16 ms with 2ms; on PostgreSQL, for 22
		// s, 9.0 and 15.5 ms with 5ms, 5.1-5.9 ms with 20ms, which
		// processed 810-884 events/s against 735-781 (acks at c=64 alike).
		c.BusyBatchTime = 20 * time.Millisecond
		if engine == store.SQLite {
			c.BusyBatchTime = 2 * time.Millisecond
		}
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 25
	}
	if c.MaxPutOffs <= 0 {
		c.MaxPutOffs = 3600
	}
	if c.DeliveryAttempts <= 0 {
		c.DeliveryAttempts = 25
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.FetchCooldown <= 0 {
		c.FetchCooldown = 5 * time.Millisecond
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 15 * time.Second
	}
	if c.SweepAge <= 0 {
		c.SweepAge = time.Minute
	}
	if c.SweepBatch <= 0 {
		c.SweepBatch = 1000
	}
	if c.RescueAfter <= 0 {
		c.RescueAfter = c.JobTimeout + rescueMargin
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Queue stores events once with their job and processes them.
type Queue struct {
	db     *store.DB
	cfg    Config
	client *river.Client[*sql.Tx]
	// periodic and retry are what Step runs and retries with, as River
	// does (retry nil: River's default policy).
	periodic river.Worker[periodicArgs]
	retry    river.ClientRetryPolicy
	// riverLog is River's logger's handler (quiet), flushed by Stop.
	riverLog *logthrottle.Handler

	// ingesting counts the events of the ingests under way, lastIngest is
	// when the last one ended (UnixNano), ingestSize is the events under
	// way when an ingest began, on average (see ingestSizeShift), busy
	// holds the BusyWorkers slots (see yield.go).
	ingesting  atomic.Int64
	lastIngest atomic.Int64
	ingestSize atomic.Int64
	busy       chan struct{}
	// stopping is set by Stop: batches end at the event they are on.
	// eventCost is the time per event of the last batch (ns), and
	// payloadSize its events' payload bytes on average, for batchRoom.
	// guardBatches is set after a batch without savepoints met a
	// failing handler (see applyBatch).
	stopping     atomic.Bool
	eventCost    atomic.Int64
	payloadSize  atomic.Int64
	guardBatches atomic.Bool

	mu sync.Mutex
	// alone holds the events that failed in another event's batch: no
	// batch takes them again, so that they run alone (see processBatch).
	alone map[int64]bool
	// aloneDeliveries is alone for deliveries (see deliverBatch).
	aloneDeliveries map[int64]bool
}

// processArgs is the job of one event: payhook's row id of the event.
// Replay sets Replay so that its job is not taken for a duplicate of the
// previous one, which River may not have marked completed yet. The sweep
// sets Rescue to the id of a job left running by a dead process, which
// still counts as live for uniqueness: one stand-in per stuck job, however
// many instances sweep.
type processArgs struct {
	EventID int64 `json:"event_id" river:"unique"`
	Replay  int64 `json:"replay,omitempty" river:"unique"`
	Rescue  int64 `json:"rescue,omitempty" river:"unique"`
}

func (processArgs) Kind() string { return "payhook_process_event" }

// liveStates are the job states in which an event's job is still going to
// run: a second job for the event is not inserted while one of them exists.
var liveStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

func (processArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Priority: workPriority, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}}
}

// workPriority is River's priority of the jobs that process events and
// send deliveries: below the sweep's and the scheduled jobs' (River's
// default, 1, the highest), which River fetches first, so that a backlog
// of events does not hold up the sweep that rescues stuck ones.
const workPriority = 2

// sweepArgs is the periodic job that re-enqueues waiting events.
type sweepArgs struct{}

func (sweepArgs) Kind() string { return "payhook_sweep" }

// driver returns River's driver for the engine; both take a *sql.Tx, so one
// Queue serves both engines.
func driver(db *store.DB) riverdriver.Driver[*sql.Tx] {
	if db.Engine == store.SQLite {
		return riversqlite.New(db.SQL)
	}
	return riverdatabasesql.New(db.SQL)
}

// riverMigrationLock is the PostgreSQL advisory lock key that serialises
// River's migrations from several payhook instances ("payr"; the store's
// own migrations take another key).
const riverMigrationLock = 0x70617972

// Migrate applies River's migrations to db, one transaction per version.
// Several instances may call it at once on one database. River's migrator
// reads which versions exist and then applies the rest without a lock, so
// two instances starting together would both create its tables and one
// would fail: on PostgreSQL each instance waits for an advisory lock held
// for the whole run; on SQLite, whose one connection cannot hold a lock
// while the migrator uses it, an instance that failed while another
// applied versions starts again from what the other left.
func Migrate(ctx context.Context, db *store.DB) error {
	m, err := rivermigrate.New(driver(db), &rivermigrate.Config{Logger: slog.New(quiet(slog.Default().Handler()))})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if db.Engine == store.Postgres {
		// A transaction-level lock in a transaction of its own, left open
		// while the migrator works on other connections of the pool: the
		// rollback releases it, or the server if the connection dies; it is
		// never left behind on a pooled connection.
		lock, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate river tables: begin lock: %w", err)
		}
		defer lock.Rollback()
		// Idle while the migrator works, for as long as an index takes to
		// build: exempt from the pool's store.IdleInTransaction, which
		// would end it and release the lock halfway.
		if _, err := lock.ExecContext(ctx, `SET LOCAL idle_in_transaction_session_timeout = 0`); err != nil {
			return fmt.Errorf("migrate river tables: begin lock: %w", err)
		}
		if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, riverMigrationLock); err != nil {
			return fmt.Errorf("migrate river tables: wait for other instances' migrations: %w", err)
		}
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("migrate river tables: %w", err)
		}
		return riverIndexes(ctx, db)
	}
	for {
		before := riverVersions(ctx, db)
		_, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err == nil {
			return riverIndexes(ctx, db)
		}
		// Each new try needs more versions applied than the last: bounded
		// by the number of versions, and a real error is returned at once.
		if riverVersions(ctx, db) <= before {
			return fmt.Errorf("migrate river tables: %w", err)
		}
	}
}

// riverIndexes makes payhook's indexes on River's table:
//   - payhook_river_job_first_tries, of the jobs a batch takes
//     (lockJobsTx, takeJobsTx): those of one kind waiting their first try, in the
//     order River fetches. Without it a take of deliveries walks every
//     event job waiting before them, a cost that grows with the backlog.
//   - payhook_river_job_unkeyed, by which the sweep finds the job Ingest
//     wrote for an event, without River's unique key (keyLiveJobsTx):
//     event ids grow, so each job's entry lands where the last one did.
func riverIndexes(ctx context.Context, db *store.DB) error {
	for _, ix := range []struct{ name, def, what string }{
		{"payhook_river_job_first_tries",
			`(kind, queue, priority, scheduled_at, id) WHERE state = 'available' AND attempt = 0`, "index of first tries"},
		{"payhook_river_job_unkeyed",
			`(` + jobEventID(db.Engine) + `) WHERE kind = '` + processArgs{}.Kind() + `' AND unique_key IS NULL`,
			"index of jobs without a unique key"},
	} {
		// On PostgreSQL, CREATE INDEX IF NOT EXISTS takes the table's SHARE
		// lock before it finds the index there: at every start it waited
		// for the transactions writing river_job, and every instance's
		// acks (each writes its event's job) queued behind it. An index
		// already made is left alone without a lock. It is looked for in
		// river_job's schema, as CREATE INDEX does, not along the
		// search_path, where another schema's index of that name hid it.
		if db.Engine == store.Postgres {
			var exists bool
			if err := db.SQL.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_class i JOIN pg_class t ON t.relnamespace = i.relnamespace
				WHERE t.oid = 'river_job'::regclass AND i.relname = $1)`, ix.name).Scan(&exists); err != nil {
				return fmt.Errorf("migrate river tables: %s: %w", ix.what, err)
			}
			if exists {
				continue
			}
		}
		if _, err := db.SQL.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS `+ix.name+` ON river_job `+ix.def); err != nil {
			return fmt.Errorf("migrate river tables: %s: %w", ix.what, err)
		}
	}
	return nil
}

// riverVersions counts the River migrations applied to db, 0 before its
// table exists. It reads the table itself: River's ExistingVersions fails
// on versions newer than this build knows, which a rollback to an older
// payhook finds.
func riverVersions(ctx context.Context, db *store.DB) int {
	var n int
	if err := db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM river_migration`).Scan(&n); err != nil {
		return 0
	}
	return n
}

// quiet keeps River's own logs to warnings and errors, at most one line
// of each message, job kind and queue every logthrottle period, the last
// left out told with their count when the period ends: with the database
// down, River fails a fetch every 100 ms. (A kind of job, or a queue,
// does not hide another's: a stuck sweep is told while events' jobs are
// stuck too.)
func quiet(h slog.Handler) *logthrottle.Handler {
	return logthrottle.New(levelHandler{slog.LevelWarn, h}, riverFloodPeriod, "job_kind", "queue")
}

// riverFloodPeriod is how often River's logs say one thing at most.
const riverFloodPeriod = 10 * time.Second

type levelHandler struct {
	min slog.Level
	slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.min, h.Handler.WithAttrs(as)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.min, h.Handler.WithGroup(name)}
}

// New returns a Queue over db, whose schema (store and River) must be
// migrated. Call Start to process events; a Queue that is never started
// still ingests and replays (the CLI does that). It returns an error
// wrapping payhook.ErrConfig if db is nil, if RescueAfter is not more
// than JobTimeout, if BusyMaxLag is more than half of it, or if
// DeliverMany is set without DeliverySweep (a crash just after a batch's
// commit would leave its deliveries without a job for good).
func New(db *store.DB, cfg Config) (*Queue, error) {
	if db == nil {
		return nil, fmt.Errorf("job queue: no database: %w", payhook.ErrConfig)
	}
	cfg = cfg.withDefaults(db.Engine)
	if cfg.RescueAfter <= cfg.JobTimeout {
		return nil, fmt.Errorf("job queue: rescue after %s is not more than the job timeout %s: %w",
			cfg.RescueAfter, cfg.JobTimeout, payhook.ErrConfig)
	}
	if cfg.BusyMaxLag > cfg.JobTimeout/2 {
		return nil, fmt.Errorf("job queue: busy max lag %s is more than half the job timeout %s, which an attempt's wait for the acks counts against: %w",
			cfg.BusyMaxLag, cfg.JobTimeout, payhook.ErrConfig)
	}
	if cfg.DeliverMany != nil && cfg.DeliverySweep == nil {
		return nil, fmt.Errorf("job queue: DeliverMany needs DeliverySweep, which finds the deliveries a crash left without a job: %w",
			payhook.ErrConfig)
	}
	q := &Queue{db: db, cfg: cfg, alone: map[int64]bool{}, aloneDeliveries: map[int64]bool{},
		busy: make(chan struct{}, cfg.BusyWorkers), riverLog: quiet(cfg.Logger.Handler())}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(q.work))
	river.AddWorker(workers, river.WorkFunc(q.deliver))
	river.AddWorker(workers, river.WorkFunc(q.sweep))
	periodic, periodicWorker, err := periodicJobs(db, cfg.Periodic, cfg.Now, cfg.Logger.Error)
	if err != nil {
		return nil, fmt.Errorf("job queue: %v: %w", err, payhook.ErrConfig)
	}
	river.AddWorker(workers, periodicWorker)
	q.periodic = periodicWorker
	rc := &river.Config{
		Logger:  slog.New(q.riverLog),
		Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers},
			DeliveryQueue: {MaxWorkers: cfg.DeliveryWorkers}},
		MaxAttempts:   cfg.MaxAttempts,
		FetchCooldown: cfg.FetchCooldown,
		// FetchPollInterval may not be below FetchCooldown.
		FetchPollInterval: max(cfg.PollInterval, cfg.FetchCooldown),
		JobTimeout:        cfg.JobTimeout,
		// River's default is an hour, during which the event of a job
		// left running by a dead process would wait.
		RescueStuckJobsAfter: cfg.RescueAfter,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(
			river.PeriodicInterval(cfg.SweepInterval),
			func() (river.JobArgs, *river.InsertOpts) { return sweepArgs{}, nil },
			&river.PeriodicJobOpts{ID: "payhook_sweep"},
		)},
	}
	rc.PeriodicJobs = append(rc.PeriodicJobs, periodic...)
	if cfg.StampWithNow {
		rc.Test.Time = stampClock(cfg.Now)
	}
	if cfg.Backoff != nil || cfg.DeliveryBackoff != nil {
		rc.RetryPolicy = retryPolicy{events: cfg.Backoff, deliveries: cfg.DeliveryBackoff, now: cfg.Now,
			river: &river.DefaultClientRetryPolicy{}}
	}
	client, err := river.NewClient(driver(db), rc)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	q.client = client
	q.retry = rc.RetryPolicy
	return q, nil
}

// work runs one attempt of an event's job.
func (q *Queue) work(ctx context.Context, job *river.Job[processArgs]) error {
	var waited time.Duration // in the queue before River fetched it
	if job.AttemptedAt != nil {
		waited = max(0, job.AttemptedAt.Sub(job.ScheduledAt))
	}
	release, behind, err := q.yield(ctx, waited)
	if err != nil {
		return err
	}
	release = sync.OnceFunc(release)
	defer release() // on a panic too
	final := job.Attempt >= job.MaxAttempts
	// What the attempt's committed transactions deferred (Defer), for
	// AfterCommit once the slot is given back.
	after := &afterCommit{}
	actx := context.WithValue(ctx, afterKey{}, after)
	ran, sends := false, []int64(nil)
	// Before the batch's transaction, which writes its deliveries: the
	// sweep's SweepAge counts from their writing (deliverCommitted).
	begun := q.cfg.Now()
	if job.Attempt == 1 {
		ran, sends = q.processBatch(actx, job.Args.EventID, final, behind, &err)
	}
	if !ran {
		err = q.process(actx, job.Args.EventID, final, snoozes(job.JobRow) < q.cfg.MaxPutOffs)
	}
	release()
	// Sent with the slot given back: a slow sink of the application must
	// not hold processing up behind the acks.
	if len(sends) > 0 || len(after.items) > 0 {
		q.ingestFirst(behind)
	}
	q.deliverCommitted(ctx, sends, begun)
	q.afterCommitted(ctx, after)
	if l, ok := asLater(err); ok {
		return river.JobSnooze(l.after) // no attempt: its worker goes to other jobs
	}
	if errors.Is(err, payhook.ErrMalformed) {
		return river.JobCancel(err) // retrying cannot fix it
	}
	return err
}

// riverNow is the clock of River's times in this process: Now with
// StampWithNow (a simulation's fake time), else this machine's.
func (q *Queue) riverNow() time.Time {
	if q.cfg.StampWithNow {
		return q.cfg.Now()
	}
	return time.Now()
}

// sweep runs the periodic sweep's job.
func (q *Queue) sweep(ctx context.Context, _ *river.Job[sweepArgs]) error {
	_, err := q.Sweep(ctx)
	return err
}

// storableError is an error whose text any text column or JSONB document
// can hold (see payhook.Storable); errors.Is and errors.As still see the
// error it wraps.
type storableError struct {
	err error
	msg string
}

func (e *storableError) Error() string { return e.msg }
func (e *storableError) Unwrap() error { return e.err }

// storable returns err with a storable text, err itself when its text
// already is.
func storable(err error) error {
	msg := err.Error()
	if s := payhook.Storable(msg); s != msg {
		return &storableError{err: err, msg: s}
	}
	return err
}

// Start starts the workers and the sweep. It returns once they run. The
// jobs' contexts derive from ctx: cancelling it cancels running handlers,
// so pass a context that outlives a graceful shutdown and call Stop.
func (q *Queue) Start(ctx context.Context) error {
	q.stopping.Store(false) // a Queue stopped and started again batches again
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("start job queue: %w", err)
	}
	return nil
}

// Stop stops fetching new jobs and waits for the running ones to finish.
// If ctx ends first, it cancels them (their transactions roll back and
// the events are retried later) and returns ctx's error.
func (q *Queue) Stop(ctx context.Context) error {
	q.stopping.Store(true)
	err := q.client.Stop(ctx)
	defer q.stopped()
	if ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		q.client.StopAndCancel(cctx)
		return fmt.Errorf("stop job queue: running jobs cancelled: %w", ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("stop job queue: %w", err)
	}
	return nil
}

// stopped ends what outlives the attempts as Stop returns (River stopped,
// but for a hard stop that timed out; see Config.OnStop): River's log
// lines held back are told, and Config.OnStop called.
func (q *Queue) stopped() {
	q.riverLog.Flush()
	if q.cfg.OnStop != nil {
		q.cfg.OnStop()
	}
}

// Ingest stores the events and enqueues a processing job for each one it
// inserted with status received, all in one transaction, and returns only
// after the commit. It reports which events were new; a duplicate is
// neither stored nor enqueued again. Any failure to store or commit wraps
// payhook.ErrUnavailable, and then nothing of the batch was written; when
// one event caused it, the error is a *payhook.EventError naming it; when
// the store refused the transaction as a whole (at begin, enqueue or
// commit: the disk is full, the database is down) while ctx was live, the
// error has a WholeBatch method that returns true. An event whose key
// another transaction holds (the same event being stored by another
// instance, or processed) waits for it, until ctx ends; see
// IngestBounded for callers that must not wait. An event that is nil or
// has no Source, EventID, ReceivedAt or Payload is refused before
// anything is written, with a *payhook.EventError naming it that wraps
// payhook.ErrInvalid: storing it again cannot succeed.
func (q *Queue) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	return q.ingest(ctx, evs, 0)
}

// Process runs one processing attempt of the event with row id id: it
// claims the event, runs its handlers and marks it processed, all in one
// transaction. An event no longer waiting (processed, ignored, failed) is
// left alone, so running the job again changes nothing. A handler error
// rolls back, is recorded on the event and returned.
func (q *Queue) Process(ctx context.Context, id int64) error {
	return q.process(ctx, id, false, true)
}

// process is Process; final marks the last attempt, whose failure leaves
// the event failed. An error wrapping payhook.ErrMalformed (a handler that
// cannot read the event) is final at once: retrying cannot fix it, and a
// replay after a fix processes the event again.
func (q *Queue) process(ctx context.Context, id int64, final, mayPutOff bool) error {
	start := time.Now()
	err := q.apply(ctx, id, start)
	if l, later := asLater(err); later && !mayPutOff {
		// Put off MaxPutOffs times: this one is an attempt.
		err = fmt.Errorf("put off %d times, the most (MaxPutOffs): %s", q.cfg.MaxPutOffs, l.why)
	} else if err == nil || later {
		return err
	}
	return q.failed(ctx, id, err, final, start)
}

// Later returns the error a Fetch returns when it cannot read now, and
// could after: waiting its turn under a provider's rate limit, say. The
// attempt's job then gives its worker back to the other jobs and is tried
// again after that time (River's snooze), counted neither as an attempt
// nor as a failure. why says what it waits for. Returned by a handler, it
// is a failed attempt like any other error.
//
// The job is put off for a second at least (a shorter wait is better
// waited in the worker: River's snooze of 0 fetches the job again at once,
// in a loop as fast as the database goes) and maxPostpone at most (so that
// an event is not parked, received without an error, for however long a
// Fetch said): a Fetch asked again too early says Later again. Put off
// Config.MaxPutOffs times, the job's next Later is a failed attempt.
func Later(after time.Duration, why string) error {
	return &laterError{after: min(max(minLater, after), maxPostpone), why: why}
}

// minLater is the shortest a Later puts its job off.
const minLater = time.Second

type laterError struct {
	after time.Duration
	why   string
}

func (e *laterError) Error() string {
	return fmt.Sprintf("tried again in %s: %s", e.after, e.why)
}

// fetchLater is a Later that a Fetch returned. Only it snoozes the job: a
// Later from a handler (alone or in a batch) is a failed attempt like any
// other error, or it would be tried for ever, never failed.
type fetchLater struct{ *laterError }

// asLater returns the Later error of a Fetch that err wraps, if any.
func asLater(err error) (*laterError, bool) {
	var l *fetchLater
	if errors.As(err, &l) {
		return l.laterError, true
	}
	return nil, false
}

// failed records err, the failure of an attempt of event id begun at
// start, outside the attempt's rolled-back transaction, and returns err
// made storable.
func (q *Queue) failed(ctx context.Context, id int64, err error, final bool, start time.Time) error {
	// The error goes to the event's row and to River, which keeps it in a
	// JSONB column: one it cannot store fails the completer's whole batch,
	// and every later one.
	err = storable(err)
	final = final || errors.Is(err, payhook.ErrMalformed)
	// The attempt is counted and its error kept outside the rolled-back
	// transaction, which is closed by now (SQLite has one connection).
	ctx = context.WithoutCancel(ctx)
	if rerr := q.recordFailure(ctx, id, err, final); rerr != nil {
		q.cfg.Logger.Error("record processing failure", "event", id, "err", rerr)
	} else if final && q.cfg.OnDone != nil {
		if ev, eerr := q.db.Event(ctx, id); eerr == nil && ev.Status == payhook.StatusFailed {
			q.cfg.OnDone(ev, payhook.StatusFailed, time.Since(start))
		}
	}
	level := slog.LevelWarn
	if final {
		level = slog.LevelError
	}
	q.cfg.Logger.Log(ctx, level, "event processing failed", "event", id, "final", final, "err", err)
	return err
}

// recordFailure counts the failed attempt of event id and keeps its error;
// when final, it marks the event failed and calls OnFailed in the same
// transaction. If OnFailed fails, that transaction rolls back and the
// attempt is counted without the failure.
func (q *Queue) recordFailure(ctx context.Context, id int64, cause error, final bool) error {
	if !final || q.cfg.OnFailed == nil {
		return q.db.RecordFailure(ctx, id, cause.Error(), final)
	}
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record the failure of event %d: %w", id, err)
	}
	ctx = context.WithValue(ctx, queueKey{}, q)
	ctx, committed := q.deferIn(ctx)
	defer tx.Rollback()
	ev, err := q.db.RecordFailureTx(ctx, tx, id, cause.Error(), true)
	if err != nil || ev == nil {
		return err
	}
	if ferr := q.cfg.OnFailed(ctx, tx, ev, cause); ferr != nil {
		tx.Rollback()
		if err := q.db.RecordFailure(ctx, id, cause.Error(), false); err != nil {
			return fmt.Errorf("event %d: on failed: %w; then %w", id, ferr, err)
		}
		return fmt.Errorf("event %d left waiting: on failed: %w", id, ferr)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit the failure of event %d: %w", id, err)
	}
	committed()
	return nil
}

func (q *Queue) apply(ctx context.Context, id int64, start time.Time) (err error) {
	// A panicking handler or Fetch is a failed attempt like any other:
	// recorded, retried, and failed at the last attempt. Left to River,
	// its value and trace would go to River's JSONB unmade storable.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("processing event %d panicked: %v", id, r)
		}
	}()
	var resource []byte
	if q.cfg.Fetch != nil {
		// Outside the transaction: a provider call must not hold a
		// connection (on SQLite, the only one).
		ev, err := q.db.Event(ctx, id)
		if err != nil || ev.Status != payhook.StatusReceived {
			return err
		}
		if resource, err = q.cfg.Fetch(ctx, ev); err != nil {
			if l := (*laterError)(nil); errors.As(err, &l) {
				return &fetchLater{l} // only a Fetch's Later snoozes the job
			}
			return fmt.Errorf("fetch the resource of event %d: %w", id, err)
		}
	}
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin processing of event %d: %w", id, err)
	}
	defer tx.Rollback()
	ev, err := q.db.ClaimEventTx(ctx, tx, id)
	if err != nil || ev == nil {
		return err
	}
	ev.Resource = resource
	ctx = context.WithValue(ctx, queueKey{}, q)
	ctx, committed := q.deferIn(ctx)
	status, note, err := q.dispatch(ctx, tx, ev)
	if err != nil {
		return err
	}
	if err := q.db.FinishEventTx(ctx, tx, id, status, q.cfg.Now(), note); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit processing of event %d: %w", id, err)
	}
	committed()
	if q.cfg.OnDone != nil {
		q.cfg.OnDone(ev, status, time.Since(start))
	}
	return nil
}

// dispatch runs ev's handlers in tx and returns the status the event ends
// with (processed, or ignored with the reason in note), or the handler's
// error.
func (q *Queue) dispatch(ctx context.Context, tx *sql.Tx, ev *payhook.Event) (payhook.Status, string, error) {
	if !q.cfg.Handlers.Handles(ev.Type) {
		return payhook.StatusIgnored, fmt.Sprintf("no handler for event type %q", ev.Type), nil
	}
	return handled(q.cfg.Handlers.Dispatch(ctx, tx, ev))
}

// handled returns the status an event ends with after its handlers
// returned err (processed, or ignored with the reason in note), or err
// when they failed.
func handled(err error) (payhook.Status, string, error) {
	switch {
	case errors.Is(err, payhook.ErrIgnored):
		return payhook.StatusIgnored, err.Error(), nil
	case err != nil:
		return "", "", err
	}
	return payhook.StatusProcessed, "", nil
}

// Replay processes an event again on purpose: it puts it back to received
// and enqueues its job in one transaction. Handlers must be idempotent. It
// refuses an ignored event (it was ignored for a reason, kept in its
// LastError) with an error wrapping payhook.ErrInvalid, as PlanReplay
// refuses a filter for ignored events, and returns an error wrapping
// payhook.ErrNotFound for an unknown id.
func (q *Queue) Replay(ctx context.Context, id int64) error {
	ev, err := q.db.Event(ctx, id)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if ev.Status == payhook.StatusIgnored {
		return fmt.Errorf("%w: replay event %d: it was ignored (%s): there is nothing to replay", payhook.ErrInvalid, id, ev.LastError)
	}
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("replay event %d: %w", id, err)
	}
	defer tx.Rollback()
	if err := q.db.ResetEventTx(ctx, tx, id, q.cfg.Now()); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if _, err := q.client.InsertTx(ctx, tx, processArgs{EventID: id, Replay: q.cfg.Now().UnixNano()}, nil); err != nil {
		return fmt.Errorf("replay event %d: enqueue: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("replay event %d: commit: %w", id, err)
	}
	return nil
}

// Sweep enqueues a job for the events still received whose job was last
// enqueued more than SweepAge ago, oldest first. An event whose job is
// still live is not given a second one (the job's uniqueness), except when
// that job has been running for more than RescueAfter: no live attempt
// runs that long, so its process is dead, and the event gets a stand-in
// job at once instead of waiting for River's rescuer and the job's
// backoff. An event whose job is running but not for that long yet is
// looked at again the moment it will have. It returns how many jobs it
// inserted.
//
// In the same transaction it enqueues the after-commit deliveries that
// Config.DeliverySweep returns (written without a job, or whose job was
// lost), which the count does not include.
//
// Each transaction handles at most SweepBatch events and SweepBatch
// deliveries; while one fills either, Sweep goes on with another, for at
// most half a SweepInterval (or JobTimeout, if shorter). Rows whose job
// is only waiting out a retry are marked looked at and move to the back,
// events and deliveries (Config.DeliveryPostpone) until the retry is due
// or for 10 minutes if that is sooner, so a lost one behind thousands of
// them is still found in this one sweep, not SweepInterval after
// SweepInterval.
func (q *Queue) Sweep(ctx context.Context) (int, error) {
	total := 0
	until := time.Now().Add(min(q.cfg.SweepInterval, q.cfg.JobTimeout) / 2)
	for {
		n, full, err := q.sweepRound(ctx)
		total += n
		if err != nil || !full || time.Now().After(until) {
			return total, err
		}
	}
}

// sweepRound is one transaction of Sweep; full reports that it reached
// SweepBatch events or deliveries, so more may wait.
func (q *Queue) sweepRound(ctx context.Context) (n int, full bool, err error) {
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("sweep: %w", err)
	}
	defer tx.Rollback()
	now := q.cfg.Now()
	deliveries, err := q.sweepDeliveries(ctx, tx, now)
	if err != nil {
		return 0, false, err
	}
	ids, err := q.db.RequeueStaleTx(ctx, tx, now.Add(-q.cfg.SweepAge), now, q.cfg.SweepBatch)
	if err != nil {
		return 0, false, err
	}
	full = len(ids) >= q.cfg.SweepBatch || deliveries >= q.cfg.SweepBatch
	// River's insert below is to find the jobs Ingest wrote live.
	if err := q.keyLiveJobsTx(ctx, tx, ids); err != nil {
		return 0, false, fmt.Errorf("sweep: %w", err)
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: processArgs{EventID: id}}
	}
	stuck := now.Add(-q.cfg.RescueAfter)
	// Each round inserts stand-ins for the stuck jobs the previous one
	// met; a stand-in can itself be stuck after a second crash.
	for round := 0; len(params) > 0 && round < 4; round++ {
		res, err := q.client.InsertManyTx(ctx, tx, params)
		if err != nil {
			return 0, false, fmt.Errorf("sweep: enqueue %d waiting events: %w", len(params), err)
		}
		params = params[:0]
		for _, r := range res {
			if !r.UniqueSkippedAsDuplicate {
				n++
				continue
			}
			job := r.Job
			var args processArgs
			if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
				return 0, false, fmt.Errorf("sweep: job %d: %w", job.ID, err)
			}
			due, retrying := retryDue(r, now) // looked at again SweepAge after it
			switch {
			case job.State == rivertype.JobStateRunning && job.AttemptedAt != nil:
				if job.AttemptedAt.Before(stuck) {
					params = append(params, river.InsertManyParams{Args: processArgs{EventID: args.EventID, Rescue: job.ID}})
					continue
				}
				due = job.AttemptedAt.Add(q.cfg.RescueAfter - q.cfg.SweepAge)
			case !retrying:
				continue // it is going to run
			}
			if err := q.db.PostponeSweepTx(ctx, tx, args.EventID, due); err != nil {
				return 0, false, fmt.Errorf("sweep: %w", err)
			}
		}
	}
	// Committed even with nothing enqueued: the outbox's sweep may have
	// marked facts routed that have no sink.
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("sweep: commit: %w", err)
	}
	if n > 0 {
		q.cfg.Logger.Warn("sweep re-enqueued waiting events", "count", n)
	}
	if deliveries > 0 {
		q.cfg.Logger.Info("sweep enqueued after-commit deliveries", "count", deliveries)
	}
	return n, full, nil
}
