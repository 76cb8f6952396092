package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

// setup opens and migrates a database with an effects table that test
// handlers write to, and returns a queue over it (not started).
func setup(t testing.TB, dbURL string, cfg jobs.Config) (*store.DB, *jobs.Queue) {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec(`CREATE TABLE effects (event_id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db, newQueue(t, db, cfg)
}

// newQueue returns a queue over db with the tests' fast settings, as one
// more payhook instance on the same database.
func newQueue(t testing.TB, db *store.DB, cfg jobs.Config) *jobs.Queue {
	t.Helper()
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 10 * time.Millisecond }
	}
	q, err := jobs.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func start(t *testing.T, q *jobs.Queue) {
	t.Helper()
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		q.Stop(ctx)
	})
}

// effect is a handler that records one row per application.
func effect(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, ev.EventID)
	return err
}

func effects(t *testing.T, db *store.DB, eventID string) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM effects WHERE event_id = $1`, eventID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func jobCount(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func event(id string) *payhook.Event {
	return &payhook.Event{Source: "src", EventID: id, Type: "payment.succeeded",
		ReceivedAt: time.Now(), Payload: []byte(`{}`)}
}

// stall is how long a wait may see nothing move before it fails: long
// enough for a loaded machine, and never a deadline for the whole wait.
const stall = 2 * time.Minute

// waitDone waits until the event has left the received status, failing
// only when its attempts have not moved for stall.
func waitDone(t *testing.T, db *store.DB, id int64) *payhook.Event {
	t.Helper()
	last, moved := -1, time.Now()
	for {
		ev, err := db.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Status != payhook.StatusReceived {
			return ev
		}
		if ev.Attempts != last {
			last, moved = ev.Attempts, time.Now()
		}
		if time.Since(moved) > stall {
			t.Fatalf("event %d still %s, nothing moved for %s (attempts %d, error %q)", id, ev.Status, stall, ev.Attempts, ev.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ingestN ingests n events, evt_0 to evt_n-1, in one call, and returns
// them.
func ingestN(t *testing.T, q *jobs.Queue, n int) []*payhook.Event {
	t.Helper()
	evs := make([]*payhook.Event, n)
	for i := range evs {
		evs[i] = event(fmt.Sprint("evt_", i))
	}
	if _, err := q.Ingest(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

func ingest(t *testing.T, q *jobs.Queue, ev *payhook.Event) bool {
	t.Helper()
	ins, err := q.Ingest(context.Background(), []*payhook.Event{ev})
	if err != nil {
		t.Fatal(err)
	}
	return ins[0]
}

func TestConcurrentDeliveriesOneJobOneEffect(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", effect)
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux})
		var wg sync.WaitGroup
		var inserted atomic.Int32
		var first atomic.Pointer[payhook.Event]
		for range 50 {
			wg.Go(func() {
				ev := event("evt_once")
				if ingest(t, q, ev) {
					inserted.Add(1)
					first.Store(ev)
				}
			})
		}
		wg.Wait()
		if inserted.Load() != 1 || jobCount(t, db) != 1 {
			t.Fatalf("50 deliveries: %d inserted, %d jobs; want 1 and 1", inserted.Load(), jobCount(t, db))
		}
		start(t, q)
		ev := waitDone(t, db, first.Load().ID)
		if ev.Status != payhook.StatusProcessed || ev.Attempts != 1 || ev.ProcessedAt.IsZero() {
			t.Fatalf("event = %s, %d attempts, processed at %v; want processed once", ev.Status, ev.Attempts, ev.ProcessedAt)
		}
		if n := effects(t, db, "evt_once"); n != 1 {
			t.Fatalf("effect applied %d times, want 1", n)
		}
	})
}

func TestFailTwiceThenSucceed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var calls atomic.Int32
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			// The effect is written before failing: the rollback must undo it.
			if err := effect(ctx, tx, ev); err != nil {
				return err
			}
			if calls.Add(1) <= 2 {
				return errors.New("provider API timed out")
			}
			return nil
		})
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux})
		ev := event("evt_flaky")
		ingest(t, q, ev)
		start(t, q)
		got := waitDone(t, db, ev.ID)
		if got.Status != payhook.StatusProcessed || got.Attempts != 3 {
			t.Fatalf("event = %s after %d attempts, want processed after 3", got.Status, got.Attempts)
		}
		if n := effects(t, db, ev.EventID); n != 1 {
			t.Fatalf("effect applied %d times, want 1", n)
		}
	})
}

func TestLastAttemptFails(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(context.Context, *sql.Tx, *payhook.Event) error {
			return errors.New("order 42 not found")
		})
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, MaxAttempts: 3})
		ev := event("evt_doomed")
		ingest(t, q, ev)
		start(t, q)
		got := waitDone(t, db, ev.ID)
		if got.Status != payhook.StatusFailed || got.Attempts != 3 || got.LastError == "" {
			t.Fatalf("event = %s after %d attempts (%q), want failed after 3 with its error", got.Status, got.Attempts, got.LastError)
		}
	})
}

func TestJobRunTwiceEffectOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", effect)
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux})
		ctx := context.Background()
		ev := event("evt_twice")
		ingest(t, q, ev)
		// Sequentially, as after a crash between commit and acknowledgement…
		for range 2 {
			if err := q.Process(ctx, ev.ID); err != nil {
				t.Fatal(err)
			}
		}
		// …and two workers at the same moment.
		ev2 := event("evt_race")
		ingest(t, q, ev2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if err := q.Process(ctx, ev2.ID); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, id := range []string{"evt_twice", "evt_race"} {
			if n := effects(t, db, id); n != 1 {
				t.Errorf("%s: effect applied %d times, want 1", id, n)
			}
		}
	})
}

func TestUnhandledTypeIgnored(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db, q := setup(t, dbURL, jobs.Config{})
		ev := event("evt_unknown")
		ingest(t, q, ev)
		if err := q.Process(context.Background(), ev.ID); err != nil {
			t.Fatal(err)
		}
		got, _ := db.Event(context.Background(), ev.ID)
		if got.Status != payhook.StatusIgnored || got.LastError == "" {
			t.Fatalf("event = %s (%q), want ignored with a reason", got.Status, got.LastError)
		}
		if err := q.Replay(context.Background(), ev.ID); !errors.Is(err, payhook.ErrInvalid) {
			t.Fatalf("Replay of an ignored event = %v, want an error wrapping ErrInvalid (the caller's mistake)", err)
		}
	})
}

func TestReplay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", effect)
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux})
		ctx := context.Background()
		ev := event("evt_replay")
		ingest(t, q, ev)
		start(t, q)
		waitDone(t, db, ev.ID)
		if err := q.Replay(ctx, ev.ID); err != nil {
			t.Fatal(err)
		}
		got := waitDone(t, db, ev.ID)
		if got.Status != payhook.StatusProcessed || got.Attempts != 2 || effects(t, db, ev.EventID) != 2 {
			t.Fatalf("after replay: %s, %d attempts, %d effects; want processed, 2, 2 (replay runs handlers again)",
				got.Status, got.Attempts, effects(t, db, ev.EventID))
		}
		if err := q.Replay(ctx, 424242); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("Replay(unknown) = %v, want ErrNotFound", err)
		}
	})
}

func TestSweepReenqueuesWaitingEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		now := time.Now()
		// SweepBatch 2: the orphan waits behind three events whose jobs
		// are live (as if waiting out a retry), and one Sweep still
		// finds it, in its second transaction.
		db, q := setup(t, dbURL, jobs.Config{SweepAge: time.Minute, SweepBatch: 2, Now: func() time.Time { return now }})
		ctx := context.Background()
		for i := range 3 {
			waiting := event(fmt.Sprintf("evt_waiting_%d", i))
			waiting.ReceivedAt = now.Add(-3 * time.Minute)
			ingest(t, q, waiting)
		}
		// An event stored without its job, as if the queue had been replaced.
		ev := event("evt_orphan")
		ev.ReceivedAt = now.Add(-2 * time.Minute)
		tx, _ := db.SQL.Begin()
		if _, err := db.InsertEventsTx(ctx, tx, []*payhook.Event{ev}); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
		recent := event("evt_recent")
		ingest(t, q, recent)
		for i, want := range []int{1, 0} {
			n, err := q.Sweep(ctx)
			if err != nil || n != want {
				t.Fatalf("sweep %d = %d, %v; want %d", i+1, n, err, want)
			}
		}
		start(t, q)
		if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusIgnored {
			t.Fatalf("orphan event = %s, want handled (ignored: no handlers)", got.Status)
		}
	})
}

// TestSweepLeavesRetriesUntilDue: an event whose job waits out a retry
// is looked at by the sweep once, and then not until the retry is due,
// or for 10 minutes if sooner: a backlog of retries costs the sweep one
// look per row per 10 minutes, not one per SweepAge.
func TestSweepLeavesRetriesUntilDue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var clock atomic.Int64
		clock.Store(time.Now().UnixNano())
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(context.Context, *sql.Tx, *payhook.Event) error { return errors.New("not yet") })
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, SweepAge: time.Minute,
			Backoff: func(int) time.Duration { return time.Hour },
			Now:     func() time.Time { return time.Unix(0, clock.Load()) }})
		ctx := context.Background()
		ev := event("evt_retrying")
		ingest(t, q, ev)
		start(t, q)
		waitJobState(t, db, "payhook_process_event", "retryable")
		enqueuedAt := func() time.Time {
			var at time.Time
			if err := db.SQL.QueryRow(`SELECT enqueued_at FROM payhook_events WHERE id = $1`, ev.ID).Scan(store.ScanTime(&at)); err != nil {
				t.Fatal(err)
			}
			return at
		}
		clock.Add(int64(2 * time.Minute)) // stale: the sweep looks
		if n, err := q.Sweep(ctx); err != nil || n != 0 {
			t.Fatalf("sweep = %d, %v; want 0 (the job is live)", n, err)
		}
		// The retry is an hour on; the sweep looks again in 10 minutes.
		due := enqueuedAt()
		if want := time.Unix(0, clock.Load()).Add(10 * time.Minute); due.Sub(want).Abs() > time.Millisecond {
			t.Fatalf("enqueued_at %s after the sweep; want %s, 10 minutes on (the retry is an hour on)", due, want)
		}
		clock.Add(int64(10 * time.Minute))
		if _, err := q.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if again := enqueuedAt(); !again.Equal(due) {
			t.Errorf("a second sweep moved enqueued_at from %s to %s; want it left until the retry is due", due, again)
		}
	})
}

// TestSweepPostponesRetryingDeliveries: a delivery the sweep returns
// whose job waits out a retry is handed to DeliveryPostpone with the
// time the retry is due, or 10 minutes on if sooner.
func TestSweepPostponesRetryingDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var clock atomic.Int64
		clock.Store(time.Now().UnixNano())
		var mu sync.Mutex
		postponed := map[int64]time.Time{}
		db, q := setup(t, dbURL, jobs.Config{
			Deliver:         func(context.Context, int64, bool) error { return errors.New("sink down") },
			DeliveryBackoff: func(int) time.Duration { return time.Hour },
			DeliverySweep: func(context.Context, *sql.Tx, time.Time, time.Time, int) ([]int64, error) {
				return []int64{42}, nil
			},
			DeliveryPostpone: func(_ context.Context, _ *sql.Tx, id int64, at time.Time) error {
				mu.Lock()
				defer mu.Unlock()
				postponed[id] = at
				return nil
			},
			Now: func() time.Time { return time.Unix(0, clock.Load()) }})
		ctx := context.Background()
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, []int64{42}, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		start(t, q)
		waitJobState(t, db, "payhook_deliver", "retryable")
		clock.Add(int64(2 * time.Minute))
		if _, err := q.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if at, ok := postponed[42]; !ok || !at.Equal(time.Unix(0, clock.Load()).Add(10*time.Minute)) {
			t.Fatalf("postponed %v; want delivery 42 for 10 minutes (its retry is an hour on)", postponed)
		}
	})
}

// waitJobState waits until the one job of kind is in state, failing when
// it has not got there for stall.
func waitJobState(t *testing.T, db *store.DB, kind, state string) {
	t.Helper()
	for since := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		var got string
		err := db.SQL.QueryRow(`SELECT state FROM river_job WHERE kind = $1`, kind).Scan(&got)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if got == state {
			return
		}
		if time.Since(since) > stall {
			t.Fatalf("%s job %q after %s; want %s", kind, got, stall, state)
		}
	}
}

func TestPanickingHandlerIsAFailedAttempt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(context.Context, *sql.Tx, *payhook.Event) error { panic("nil map") })
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux})
		ev := event("evt_panic")
		ingest(t, q, ev)
		if err := q.Process(context.Background(), ev.ID); err == nil {
			t.Fatal("Process with a panicking handler returned nil")
		}
		got, _ := db.Event(context.Background(), ev.ID)
		if got.Status != payhook.StatusReceived || got.Attempts != 1 || !strings.Contains(got.LastError, "panicked: nil map") {
			t.Fatalf("event = %s, %d attempts, %q; want received, 1, the panic", got.Status, got.Attempts, got.LastError)
		}
	})
}

// A panicking Fetch is a failed attempt too, its text storable: River,
// which would keep the panic's value in JSONB, never sees it.
func TestPanickingFetchIsAFailedAttempt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", effect)
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, MaxAttempts: 2,
			Fetch: func(_ context.Context, ev *payhook.Event) ([]byte, error) {
				if ev.EventID == "evt_panic" {
					panic("resource pi_x\x00y")
				}
				return nil, nil
			}})
		bad := event("evt_panic")
		ingest(t, q, bad)
		start(t, q)
		got := waitDone(t, db, bad.ID)
		if got.Status != payhook.StatusFailed || got.Attempts != 2 || !strings.Contains(got.LastError, "panicked: resource pi_x\uFFFDy") {
			t.Fatalf("event = %s, %d attempts, %q; want failed after 2 with the panic", got.Status, got.Attempts, got.LastError)
		}
		ev := event("evt_after_panic")
		ingest(t, q, ev)
		if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusProcessed {
			t.Fatalf("%s = %s (%q), want processed", ev.EventID, got.Status, got.LastError)
		}
	})
}

func TestStopLetsRunningJobsFinish(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		started, release := make(chan struct{}), make(chan struct{})
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			close(started)
			<-release
			return effect(ctx, tx, ev)
		})
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux})
		ev := event("evt_inflight")
		ingest(t, q, ev)
		if err := q.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- q.Stop(context.Background()) }()
		time.Sleep(100 * time.Millisecond)
		close(release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		got, _ := db.Event(context.Background(), ev.ID)
		if got.Status != payhook.StatusProcessed || effects(t, db, ev.EventID) != 1 {
			t.Fatalf("after Stop: %s with %d effects, want processed with 1", got.Status, effects(t, db, ev.EventID))
		}
	})
}

func TestFetchIgnoreAndOnFailed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var failed atomic.Int32
		fetches := map[string]int{}
		var mu sync.Mutex
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			switch string(ev.Resource) {
			case `{"state":"current"}`:
				return effect(ctx, tx, ev)
			case `{"state":"irrelevant"}`:
				return fmt.Errorf("%w: nothing to do for %s", payhook.ErrIgnored, ev.EventID)
			}
			return fmt.Errorf("unexpected resource %q", ev.Resource)
		})
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, MaxAttempts: 2,
			Fetch: func(_ context.Context, ev *payhook.Event) ([]byte, error) {
				mu.Lock()
				fetches[ev.EventID]++
				mu.Unlock()
				switch ev.EventID {
				case "evt_fetch":
					return []byte(`{"state":"current"}`), nil
				case "evt_ignore":
					return []byte(`{"state":"irrelevant"}`), nil
				}
				return nil, errors.New("provider API unreachable")
			},
			OnFailed: func(_ context.Context, _ *sql.Tx, ev *payhook.Event, cause error) error {
				if ev.EventID == "evt_unreachable" && ev.Status == payhook.StatusFailed && strings.Contains(cause.Error(), "unreachable") {
					failed.Add(1)
				}
				return nil
			},
		})
		evs := []*payhook.Event{event("evt_fetch"), event("evt_ignore"), event("evt_unreachable")}
		for _, ev := range evs {
			ingest(t, q, ev)
		}
		start(t, q)
		for i, want := range []payhook.Status{payhook.StatusProcessed, payhook.StatusIgnored, payhook.StatusFailed} {
			if got := waitDone(t, db, evs[i].ID); got.Status != want {
				t.Errorf("%s = %s (%q), want %s", evs[i].EventID, got.Status, got.LastError, want)
			}
		}
		if effects(t, db, "evt_fetch") != 1 || failed.Load() != 1 {
			t.Fatalf("effects %d, OnFailed %d times; want 1 and 1", effects(t, db, "evt_fetch"), failed.Load())
		}
		got, _ := db.Event(context.Background(), evs[1].ID)
		if !strings.Contains(got.LastError, "nothing to do for evt_ignore") {
			t.Fatalf("ignored event's reason = %q", got.LastError)
		}
		mu.Lock()
		defer mu.Unlock()
		if fetches["evt_unreachable"] != 2 {
			t.Fatalf("fetched %d times for 2 attempts", fetches["evt_unreachable"])
		}
	})
}

func TestMalformedFailsAtOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var calls, alerted atomic.Int32
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(context.Context, *sql.Tx, *payhook.Event) error {
			calls.Add(1)
			return fmt.Errorf("mapping: field \"data.refund.id\" is missing: %w", payhook.ErrMalformed)
		})
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, MaxAttempts: 5,
			OnFailed: func(context.Context, *sql.Tx, *payhook.Event, error) error { alerted.Add(1); return nil }})
		ev := event("evt_malformed")
		ingest(t, q, ev)
		start(t, q)
		got := waitDone(t, db, ev.ID)
		time.Sleep(100 * time.Millisecond) // a retry, if one were scheduled, would run by now
		if got.Status != payhook.StatusFailed || calls.Load() != 1 || alerted.Load() != 1 || !strings.Contains(got.LastError, "data.refund.id") {
			t.Fatalf("event %s after %d calls, %d alerts (%q); want failed after 1 with 1 alert", got.Status, calls.Load(), alerted.Load(), got.LastError)
		}
	})
}

// An error text that no text column or JSONB document can hold (NUL,
// invalid UTF-8) must neither lose the attempt nor stall River's
// completer, which stores every job's error.
func TestUnstorableErrorIsRecorded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			if ev.EventID == "evt_nul" {
				return fmt.Errorf("payment pi_x\x00y (\xff\xfe) not found: %w", errSentinel)
			}
			return effect(ctx, tx, ev)
		})
		var causes atomic.Int32
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, MaxAttempts: 3,
			OnFailed: func(_ context.Context, _ *sql.Tx, _ *payhook.Event, cause error) error {
				if errors.Is(cause, errSentinel) {
					causes.Add(1)
				}
				return nil
			}})
		bad := event("evt_nul")
		ingest(t, q, bad)
		start(t, q)
		got := waitDone(t, db, bad.ID)
		if got.Status != payhook.StatusFailed || got.Attempts != 3 || !strings.Contains(got.LastError, "pi_x\uFFFDy") {
			t.Fatalf("event = %s after %d attempts (%q); want failed after 3 with its error made storable", got.Status, got.Attempts, got.LastError)
		}
		// River stored the job's errors, so its completer still works:
		// later events are processed.
		for i := range 3 {
			ev := event(fmt.Sprintf("evt_after_%d", i))
			ingest(t, q, ev)
			if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusProcessed {
				t.Fatalf("%s = %s (%q), want processed", ev.EventID, got.Status, got.LastError)
			}
		}
		if causes.Load() != 1 {
			t.Fatalf("OnFailed saw the handler's error %d times, want 1 (errors.Is through the storable wrapper)", causes.Load())
		}
	})
}

var errSentinel = errors.New("sentinel")

// kill leaves the database as a payhook process killed while its jobs ran
// leaves it: every processing job running, attempted by a client that is
// gone, which also held River's leadership for a few seconds more. The
// events' claims rolled back with the dead connections.
func kill(t *testing.T, db *store.DB) {
	t.Helper()
	stmts := []string{
		`UPDATE river_job SET state = 'running', attempt = attempt + 1, attempted_at = now(),
			attempted_by = ARRAY['dead-client'] WHERE kind = 'payhook_process_event'`,
		`INSERT INTO river_leader (elected_at, expires_at, leader_id, name)
			VALUES (now(), now() + interval '2 seconds', 'dead-client', 'default')`,
	}
	if db.Engine == store.SQLite {
		stmts = []string{
			`UPDATE river_job SET state = 'running', attempt = attempt + 1, attempted_at = datetime('now', 'subsec'),
				attempted_by = jsonb('["dead-client"]') WHERE kind = 'payhook_process_event'`,
			`INSERT INTO river_leader (elected_at, expires_at, leader_id, name)
				VALUES (datetime('now', 'subsec'), datetime('now', '+2 seconds', 'subsec'), 'dead-client', 'default')`,
		}
	}
	for _, stmt := range stmts {
		if _, err := db.SQL.Exec(stmt); err != nil {
			t.Fatalf("simulate a killed process: %v", err)
		}
	}
}

// recovery is a queue configuration with small timeouts, so that a job
// left running by a dead process is taken for stuck within seconds.
func recovery(mux *payhook.Mux) jobs.Config {
	return jobs.Config{Handlers: mux, JobTimeout: time.Second, RescueAfter: 2 * time.Second,
		SweepInterval: 200 * time.Millisecond, SweepAge: 500 * time.Millisecond}
}

// A job left running by a killed process (or one whose completion could
// not be written) must not hold its event for River's hour: after Start,
// the event is processed once the job has run longer than any job can.
// On PostgreSQL two live instances share the database.
func TestJobOfADeadProcessIsRecovered(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", effect)
		cfg := recovery(mux)
		db, q := setup(t, dbURL, cfg)
		evs := []*payhook.Event{event("evt_crash_1"), event("evt_crash_2")}
		for _, ev := range evs {
			ingest(t, q, ev)
		}
		kill(t, db)
		start(t, q)
		if db.Engine == store.Postgres {
			db2, err := store.Open(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db2.Close() })
			start(t, newQueue(t, db2, cfg))
		}
		for _, ev := range evs {
			if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusProcessed || effects(t, db, ev.EventID) != 1 {
				t.Fatalf("%s = %s with %d effects (%q), want processed once", ev.EventID, got.Status, effects(t, db, ev.EventID), got.LastError)
			}
		}
	})
}

// A job whose context is cancelled mid-attempt (a shutdown that did not
// wait) leaves its event waiting, and the next instance processes it.
func TestCancelledJobIsProcessedLater(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		started := make(chan struct{})
		var once sync.Once
		blocking := &payhook.Mux{}
		blocking.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return ctx.Err()
		})
		db, q := setup(t, dbURL, recovery(blocking))
		ev := event("evt_cancelled")
		ingest(t, q, ev)
		if err := q.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := q.Stop(ctx); err == nil {
			t.Fatal("Stop with a cancelled context returned nil, want the cancelled jobs reported")
		}
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", effect)
		start(t, newQueue(t, db, recovery(mux)))
		if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusProcessed || effects(t, db, ev.EventID) != 1 {
			t.Fatalf("%s = %s with %d effects (%q), want processed once", ev.EventID, got.Status, effects(t, db, ev.EventID), got.LastError)
		}
	})
}

// The sweep sees through a job that has been running longer than any live
// attempt can: its event gets one stand-in job at once, however many
// instances sweep, and a job running for less is looked at again the
// moment it will have run that long.
func TestSweepStandsInForAStuckJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var offset atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		mux := &payhook.Mux{}
		mux.HandleFunc("payment.succeeded", effect)
		cfg := jobs.Config{Handlers: mux, JobTimeout: time.Second, RescueAfter: 10 * time.Second,
			SweepAge: 5 * time.Second, Now: clock}
		db, q := setup(t, dbURL, cfg)
		other := newQueue(t, db, cfg) // a second instance, sweeping too
		ctx := context.Background()
		ev := event("evt_stuck")
		ingest(t, q, ev)
		kill(t, db)
		for _, step := range []struct {
			at   time.Duration
			q    *jobs.Queue
			want int
		}{
			{6 * time.Second, q, 0},                       // running for 6s: alive as far as anyone knows
			{8 * time.Second, other, 0},                   // not looked at again before 10s
			{10*time.Second + 500*time.Millisecond, q, 1}, // stuck: one stand-in, before SweepAge has passed again
			{16 * time.Second, other, 0},                  // the same stand-in, not a second one
		} {
			offset.Store(int64(step.at))
			if n, err := step.q.Sweep(ctx); err != nil || n != step.want {
				t.Fatalf("sweep %s after the crash = %d, %v; want %d", step.at, n, err, step.want)
			}
		}
		if n := jobCount(t, db); n != 2 {
			t.Fatalf("%d processing jobs, want 2 (the stuck one and its stand-in)", n)
		}
		start(t, q)
		if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusProcessed || effects(t, db, ev.EventID) != 1 {
			t.Fatalf("%s = %s with %d effects, want processed once", ev.EventID, got.Status, effects(t, db, ev.EventID))
		}
	})
}

// TestConfigRefused: New refuses what would break a promise: a rescue
// that could take a job still running, and deliveries sent by batches
// with no sweep to find those a crash left without a job.
func TestConfigRefused(t *testing.T) {
	many := func(context.Context, []int64) ([]error, func(context.Context, *sql.Tx) error) { return nil, nil }
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db, _ := setup(t, dbURL, jobs.Config{})
		for name, cfg := range map[string]jobs.Config{
			"rescue after = job timeout":   {JobTimeout: time.Minute, RescueAfter: time.Minute},
			"rescue after < job timeout":   {JobTimeout: time.Minute, RescueAfter: time.Second},
			"DeliverMany without a sweep":  {DeliverMany: many},
			"busy max lag > job timeout/2": {JobTimeout: time.Minute, BusyMaxLag: 31 * time.Second},
		} {
			if _, err := jobs.New(db, cfg); !errors.Is(err, payhook.ErrConfig) {
				t.Errorf("%s: New = %v, want ErrConfig", name, err)
			}
		}
	})
}

// TestNewWithoutDatabase: New without a database returns an error
// wrapping payhook.ErrConfig, as the other constructors do, not a panic.
func TestNewWithoutDatabase(t *testing.T) {
	if _, err := jobs.New(nil, jobs.Config{}); !errors.Is(err, payhook.ErrConfig) {
		t.Fatalf("New(nil) = %v, want ErrConfig", err)
	}
}

// An event's failure and its alert commit together: the alert OnFailed
// writes is there the moment the event is failed, for the last attempt of
// a failing handler and at once for a malformed event, and an alert that
// cannot be written leaves the event waiting (its attempt counted), never
// failed without an alert.
func TestFailedAndAlertedInOneTransaction(t *testing.T) {
	for _, c := range []struct {
		name       string
		err        error
		alertFails bool
		attempts   int
		want       payhook.Status
		alerts     int
	}{
		{"last attempt", errors.New("order 42 not found"), false, 2, payhook.StatusFailed, 1},
		{"malformed", fmt.Errorf("field data.id is missing: %w", payhook.ErrMalformed), false, 1, payhook.StatusFailed, 1},
		{"alert fails", errors.New("order 42 not found"), true, 2, payhook.StatusReceived, 0},
		{"malformed, alert fails", fmt.Errorf("field data.id is missing: %w", payhook.ErrMalformed), true, 1, payhook.StatusReceived, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				var offset atomic.Int64
				mux := &payhook.Mux{}
				mux.HandleFunc("*", func(context.Context, *sql.Tx, *payhook.Event) error { return c.err })
				db, q := setup(t, dbURL, jobs.Config{Handlers: mux, MaxAttempts: 2,
					Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
					OnFailed: func(ctx context.Context, tx *sql.Tx, ev *payhook.Event, cause error) error {
						if ev.Status != payhook.StatusFailed || ev.Attempts != c.attempts {
							return fmt.Errorf("OnFailed got the event %s after %d attempts", ev.Status, ev.Attempts)
						}
						if _, err := tx.ExecContext(ctx, `INSERT INTO alerts (event_id, message) VALUES ($1, $2)`,
							ev.EventID, cause.Error()); err != nil {
							return err
						}
						if c.alertFails {
							return errors.New("alerts table unavailable")
						}
						return nil
					}})
				if _, err := db.SQL.Exec(`CREATE TABLE alerts (event_id TEXT NOT NULL, message TEXT NOT NULL)`); err != nil {
					t.Fatal(err)
				}
				ev := event("evt_doomed")
				ingest(t, q, ev)
				start(t, q)
				got := waitAttempts(t, db, ev.ID, c.attempts)
				var alerts int
				if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM alerts`).Scan(&alerts); err != nil {
					t.Fatal(err)
				}
				if got.Status != c.want || alerts != c.alerts {
					t.Fatalf("event %s after %d attempts with %d alerts (%q); want %s with %d",
						got.Status, got.Attempts, alerts, got.LastError, c.want, c.alerts)
				}
				// An event left waiting, its job over, gets a new job from the sweep.
				offset.Store(int64(2 * time.Minute))
				if n, err := q.Sweep(context.Background()); err != nil || (n == 1) != (c.want == payhook.StatusReceived) {
					t.Fatalf("sweep = %d, %v; want a new job only for an event left waiting", n, err)
				}
			})
		})
	}
}

// waitAttempts waits until the event's job has run its course (River no
// longer has it live) after the event saw at least n attempts, and returns
// the event.
func waitAttempts(t *testing.T, db *store.DB, id int64, n int) *payhook.Event {
	t.Helper()
	last, moved := -1, time.Now()
	for {
		ev, err := db.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var live int
		if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'
			AND state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if ev.Attempts >= n && live == 0 {
			return ev
		}
		if ev.Attempts != last {
			last, moved = ev.Attempts, time.Now()
		}
		if time.Since(moved) > stall {
			t.Fatalf("event %d: %s, nothing moved for %s (attempts %d, error %q)", id, ev.Status, stall, ev.Attempts, ev.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBatchLeavesAloneJobs: a delivery batch takes the jobs of
// deliveries waiting their first try, never one marked Alone (a delivery
// that already failed in a batch, to be tried by Deliver).
func TestBatchLeavesAloneJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, q := setup(t, dbURL, jobs.Config{})
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := q.EnqueueAloneTx(ctx, tx, []int64{7}); err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, []int64{8}, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx, err = db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		got, err := q.TakeDeliveriesTx(ctx, tx, 5)
		if err != nil || !slices.Equal(got, []int64{8}) {
			t.Fatalf("taken %v, %v; want [8], not the Alone delivery 7", got, err)
		}
	})
}

// TestBatch: with one worker, the first job's attempt takes the jobs of
// the events waiting their first try and applies them all in its
// transaction. An event whose handler fails there is rolled back alone:
// the others commit, and it runs in its own job, where its failure is
// its one attempt (malformed: failed at once, alerted once). The batch
// deletes the jobs of the events it applied besides its own; the jobs
// that ran end completed (or cancelled) after one attempt, and the deliveries the
// handlers enqueued go out for the events that succeeded only: together
// (DeliverMany) just after the commit, without jobs, their attempts
// recorded in one transaction; one that fails there gets a job and is
// tried again alone (Deliver) and delivered once.
func TestBatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var mu sync.Mutex
		txOf := map[string]*sql.Tx{}
		var alerted atomic.Int32
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			mu.Lock()
			txOf[ev.EventID] = tx
			mu.Unlock()
			if err := jobs.EnqueueDeliveries(ctx, tx, []int64{ev.ID}); err != nil {
				return err
			}
			if ev.EventID == "evt_bad" {
				return fmt.Errorf("no such field: %w", payhook.ErrMalformed)
			}
			return effect(ctx, tx, ev)
		})
		delivered := map[int64]int{}
		var batches [][]int64
		var failing int64 // the delivery that fails in its batch
		alone := map[int64]int{}
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1, Batch: 16,
			BatchTime: time.Hour, BusyBatchTime: time.Hour, // one batch, however slow the machine
			OnFailed: func(context.Context, *sql.Tx, *payhook.Event, error) error { alerted.Add(1); return nil },
			Deliver: func(_ context.Context, id int64, _ bool) error {
				mu.Lock()
				defer mu.Unlock()
				delivered[id]++
				alone[id]++
				return nil
			},
			DeliverMany: func(_ context.Context, ids []int64) ([]error, func(context.Context, *sql.Tx) error) {
				mu.Lock()
				defer mu.Unlock()
				batches = append(batches, ids)
				errs := make([]error, len(ids))
				var ok []int64
				for i, id := range ids {
					if id == failing {
						errs[i] = errors.New("sink down")
						continue
					}
					ok = append(ok, id)
				}
				return errs, func(ctx context.Context, tx *sql.Tx) error {
					mu.Lock()
					defer mu.Unlock()
					for _, id := range ok {
						delivered[id]++
						if _, err := tx.ExecContext(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, fmt.Sprint("delivery ", id)); err != nil {
							return err
						}
					}
					return nil
				}
			},
			// Nothing crashes here: no delivery is left for the sweep.
			DeliverySweep: func(context.Context, *sql.Tx, time.Time, time.Time, int) ([]int64, error) { return nil, nil },
		})
		var evs []*payhook.Event
		for i := range 6 {
			id := fmt.Sprint("evt_", i)
			if i == 3 {
				id = "evt_bad"
			}
			evs = append(evs, event(id))
		}
		if _, err := q.Ingest(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		failing = evs[4].ID
		mu.Unlock()
		start(t, q)
		for _, ev := range evs {
			got := waitDone(t, db, ev.ID)
			want := payhook.StatusProcessed
			if ev.EventID == "evt_bad" {
				want = payhook.StatusFailed
			}
			if got.Status != want || got.Attempts != 1 {
				t.Errorf("%s: %s after %d attempts; want %s after 1", ev.EventID, got.Status, got.Attempts, want)
			}
			if n := effects(t, db, ev.EventID); ev.EventID != "evt_bad" && n != 1 {
				t.Errorf("%s: %d effects; want 1", ev.EventID, n)
			}
		}
		if n := alerted.Load(); n != 1 {
			t.Errorf("OnFailed called %d times; want 1", n)
		}
		mu.Lock()
		for _, ev := range evs[1:] {
			if ev.EventID != "evt_bad" && txOf[ev.EventID] != txOf[evs[0].EventID] {
				t.Errorf("%s was not applied in the transaction of %s", ev.EventID, evs[0].EventID)
			}
		}
		mu.Unlock()
		// River writes its own jobs' completion after the attempt returns.
		for since := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			var running int
			if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE state = 'running'`).Scan(&running); err != nil {
				t.Fatal(err)
			}
			if running == 0 {
				break
			}
			if time.Since(since) > stall {
				t.Fatalf("%d jobs still running after %s", running, stall)
			}
		}
		// The batch deleted the jobs of the events it applied besides its
		// own; River ended the two that ran (the batch's, evt_bad's).
		rows, err := db.SQL.Query(`SELECT state, attempt FROM river_job WHERE kind = 'payhook_process_event'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		kept := 0
		for rows.Next() {
			var state string
			var attempt int
			if err := rows.Scan(&state, &attempt); err != nil {
				t.Fatal(err)
			}
			if kept++; (state != "completed" && state != "cancelled") || attempt != 1 {
				t.Errorf("a job is %s after %d attempts; want completed (or cancelled) after 1", state, attempt)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if kept != 2 {
			t.Errorf("%d event jobs kept; want 2, the batch's own and evt_bad's", kept)
		}
		// Each event that succeeded enqueued its delivery once; the failed
		// one's rolled back with it.
		for since, n := time.Now(), 0; ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			got := len(delivered)
			mu.Unlock()
			if got >= len(evs)-1 {
				break
			}
			if got != n {
				since, n = time.Now(), got
			}
			if time.Since(since) > stall {
				t.Fatalf("%d of %d deliveries after %s", got, len(evs)-1, stall)
			}
		}
		mu.Lock()
		for _, ev := range evs {
			if want := map[bool]int{true: 0, false: 1}[ev.EventID == "evt_bad"]; delivered[ev.ID] != want {
				t.Errorf("%s: delivered %d times; want %d", ev.EventID, delivered[ev.ID], want)
			}
		}
		if len(batches) == 0 || len(batches[0]) != len(evs)-1 {
			t.Errorf("DeliverMany got %v; want the %d deliveries in one batch", batches, len(evs)-1)
		}
		if alone[failing] != 1 || len(alone) != 1 {
			t.Errorf("delivered alone: %v; want only %d, once", alone, failing)
		}
		mu.Unlock()
		// The batch's worker sent the deliveries after its commit, without
		// jobs: only the one that failed there got one, which ran once.
		for since := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			var done, all int
			if err := db.SQL.QueryRow(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN state = 'completed' AND attempt = 1 THEN 1 ELSE 0 END), 0)
				FROM river_job WHERE kind = 'payhook_deliver'`).Scan(&all, &done); err != nil {
				t.Fatal(err)
			}
			if all == 1 && done == all {
				break
			}
			if time.Since(since) > stall {
				t.Fatalf("%d of %d delivery jobs completed after one attempt", done, all)
			}
		}
		for _, ev := range evs {
			want := 1
			if ev.EventID == "evt_bad" || ev.ID == failing {
				want = 0
			}
			if n := effects(t, db, fmt.Sprint("delivery ", ev.ID)); n != want {
				t.Errorf("%s: %d deliveries recorded in a batch; want %d", ev.EventID, n, want)
			}
		}
		processed := waitDone(t, db, evs[1].ID).ProcessedAt
		att, err := q.Attempts(context.Background(), evs[1].ID)
		if want := (jobs.Attempt{N: 1, At: processed, Outcome: "succeeded"}); err != nil || len(att) != 1 || att[0] != want {
			t.Errorf("attempts of a batched event = %+v, %v; want %+v, read from the event", att, err, want)
		}
		if att, err := q.Attempts(context.Background(), evs[0].ID); err != nil || len(att) != 1 || att[0].Job == 0 || att[0].Outcome != "succeeded" {
			t.Errorf("attempts of the batch's own event = %+v, %v; want its job's success", att, err)
		}
	})
}

// TestBatchEndsJobs: of the jobs a batch takes, it deletes those of the
// events it marks processed, whose attempt the event's row then tells,
// and marks completed the job of an event it ignored (an ignored event
// records no time of its own); River ends the batch's own job.
func TestBatchEndsJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			if ev.EventID == "evt_ign" {
				return fmt.Errorf("%w: nothing to do", payhook.ErrIgnored)
			}
			return effect(ctx, tx, ev)
		})
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1, Batch: 16,
			BatchTime: time.Hour, BusyBatchTime: time.Hour}) // one batch, however slow the machine
		evs := []*payhook.Event{event("evt_0"), event("evt_1"), event("evt_ign")}
		if _, err := q.Ingest(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		start(t, q)
		for _, ev := range evs {
			waitDone(t, db, ev.ID)
		}
		jobOf := func(ev *payhook.Event) (state string, attempt int) {
			for since := time.Now(); ; time.Sleep(10 * time.Millisecond) {
				err := db.SQL.QueryRow(`SELECT state, attempt FROM river_job
					WHERE kind = 'payhook_process_event' AND `+jobs.JobEventID(db.Engine)+` = $1`, ev.ID).Scan(&state, &attempt)
				if errors.Is(err, sql.ErrNoRows) {
					return "", 0
				}
				if err != nil {
					t.Fatal(err)
				}
				if state != "running" || time.Since(since) > stall { // River ends its own job after the attempt
					return state, attempt
				}
			}
		}
		for _, c := range []struct {
			ev      *payhook.Event
			state   string
			fromRow bool
		}{{evs[0], "completed", false}, {evs[1], "", true}, {evs[2], "completed", false}} {
			if state, attempt := jobOf(c.ev); state != c.state || (state != "" && attempt != 1) {
				t.Errorf("%s: job %q after %d attempts; want %q", c.ev.EventID, state, attempt, c.state)
			}
			att, err := q.Attempts(context.Background(), c.ev.ID)
			if err != nil || len(att) != 1 || att[0].Outcome != "succeeded" || (att[0].Job == 0) != c.fromRow {
				t.Errorf("%s: attempts %+v, %v; want one succeeded, read from the event's row: %v", c.ev.EventID, att, err, c.fromRow)
			}
		}
	})
}

// TestBatchEnds: a batch takes no more events once Stop is called (Stop
// then waits for one event, not a batch) or once it has run for
// BatchTime; the events it left out keep their jobs, untried, and are
// each processed once, with one attempt, by the next batches.
func TestBatchEnds(t *testing.T) {
	for _, end := range []string{"stop", "batch time"} {
		t.Run(end, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				var mu sync.Mutex
				txOf := map[string]*sql.Tx{}
				started, release := make(chan struct{}), make(chan struct{})
				mux := &payhook.Mux{}
				mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
					mu.Lock()
					txOf[ev.EventID] = tx
					mu.Unlock()
					if ev.EventID == "evt_0" && end == "stop" {
						close(started)
						<-release
					}
					return effect(ctx, tx, ev)
				})
				cfg := jobs.Config{Handlers: mux, Workers: 1, Batch: 16}
				if end == "batch time" {
					cfg.BatchTime, cfg.BusyBatchTime = time.Nanosecond, time.Nanosecond
				}
				db, q := setup(t, dbURL, cfg)
				evs := ingestN(t, q, 6)
				if end == "stop" {
					if err := q.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
					<-started
					stopped := make(chan error, 1)
					go func() { stopped <- q.Stop(context.Background()) }()
					for !q.Stopping() {
						time.Sleep(time.Millisecond)
					}
					close(release)
					if err := <-stopped; err != nil {
						t.Fatal(err)
					}
					for _, ev := range evs {
						got, err := db.Event(context.Background(), ev.ID)
						if err != nil {
							t.Fatal(err)
						}
						if want := map[bool]payhook.Status{true: payhook.StatusProcessed, false: payhook.StatusReceived}[ev == evs[0]]; got.Status != want || got.Attempts != map[bool]int{true: 1}[ev == evs[0]] {
							t.Errorf("after Stop, %s is %s after %d attempts; want %s", ev.EventID, got.Status, got.Attempts, want)
						}
					}
					q = newQueue(t, db, cfg) // the next start
				}
				start(t, q)
				for _, ev := range evs {
					if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusProcessed || got.Attempts != 1 || effects(t, db, ev.EventID) != 1 {
						t.Errorf("%s: %s after %d attempts with %d effects; want processed after 1 with 1", ev.EventID, got.Status, got.Attempts, effects(t, db, ev.EventID))
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for _, ev := range evs[1:] {
					if txOf[ev.EventID] == txOf[evs[0].EventID] {
						t.Errorf("%s was applied in the transaction of %s, which had ended", ev.EventID, evs[0].EventID)
					}
				}
			})
		})
	}
}

// TestEventsNotBehindDeliveries: the deliveries' jobs run in a queue of
// their own (jobs.DeliveryQueue), so an event is processed while every
// delivery worker is held by a slow sink and more deliveries are due.
// In one queue, a sink down or slow for a while left its retries due by
// the thousand, fetched before the events' newer jobs: every event's
// processing waited behind them (an upgrade review measured 145 s after a
// kill, past the 90 s recovery bound, with 50,000 deliveries pending).
func TestEventsNotBehindDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		release := make(chan struct{})
		var sending atomic.Int32
		mux := &payhook.Mux{}
		mux.HandleFunc("*", effect)
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1, DeliveryWorkers: 1,
			Deliver: func(ctx context.Context, _ int64, _ bool) error {
				sending.Add(1)
				select { // a sink that does not answer
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}})
		defer close(release)
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, []int64{1, 2, 3, 4, 5}, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		start(t, q)
		waitFor(t, "a delivery holding its worker", func() int { return int(sending.Load()) })
		ingest(t, q, event("evt_behind"))
		waitFor(t, "the event processed while the deliveries wait", func() int { return effects(t, db, "evt_behind") })
	})
}
