package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
)

// TestStepOnTheQueuesClock steps a queue that is never started on a clock
// of its own, far from the database's: River's times follow it
// (StampWithNow), a failed attempt is retried only once the clock reaches
// its backoff, and the retry processes the event.
func TestStepOnTheQueuesClock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
		fail := true
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			if fail {
				return errors.New("not yet")
			}
			return effect(ctx, tx, ev)
		})
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, StampWithNow: true, Now: func() time.Time { return now },
			Backoff: func(int) time.Duration { return time.Hour }})
		ev := event("evt_step")
		ev.ReceivedAt = now
		ingest(t, q, ev)
		stamped := func(col string) time.Time {
			t.Helper()
			var at time.Time
			if err := db.SQL.QueryRow(`SELECT ` + col + ` FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&at); err != nil {
				t.Fatal(err)
			}
			return at.UTC()
		}
		step := func(want bool) {
			t.Helper()
			ran, err := q.Step(ctx)
			if err != nil || ran != want {
				t.Fatalf("Step() = %v, %v; want %v, nil", ran, err, want)
			}
		}
		if got := stamped("created_at"); !got.Equal(now) {
			t.Fatalf("job created at %s; want the queue's clock %s", got, now)
		}
		step(true) // fails
		if got, want := stamped("scheduled_at"), now.Add(time.Hour); !got.Equal(want) {
			t.Fatalf("retry scheduled at %s; want %s", got, want)
		}
		step(false) // not due yet
		fail, now = false, now.Add(time.Hour)
		step(true)
		step(false)
		if got := stamped("finalized_at"); !got.Equal(now) {
			t.Fatalf("job finalized at %s; want %s", got, now)
		}
		if n := effects(t, db, "evt_step"); n != 1 {
			t.Fatalf("%d effects; want 1", n)
		}
		var attempts int
		if err := db.SQL.QueryRow(`SELECT attempt FROM river_job`).Scan(&attempts); err != nil || attempts != 2 {
			t.Fatalf("job attempts %d (%v); want 2", attempts, err)
		}
	})
}

// TestDeliveryBatchOldestFirst: a batch of deliveries sends them in the
// order they were written, whatever the order of their jobs: an UPDATE's
// RETURNING, with which the batch takes the jobs, follows no ORDER BY (on
// SQLite the jobs' order; on PostgreSQL its join's), and the seeds of the
// deterministic simulation ran apart on the two engines by it.
func TestDeliveryBatchOldestFirst(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
		var batches [][]int64
		db, q := setup(t, dbURL, jobs.Config{StampWithNow: true, Now: func() time.Time { return now },
			Deliver: func(context.Context, int64, bool) error { return nil },
			DeliverMany: func(_ context.Context, ids []int64) ([]error, func(context.Context, *sql.Tx) error) {
				batches = append(batches, slices.Clone(ids))
				return make([]error, len(ids)), func(context.Context, *sql.Tx) error { return nil }
			},
			DeliverySweep: func(context.Context, *sql.Tx, time.Time, time.Time, int) ([]int64, error) { return nil, nil }})
		// Deliveries 1 to 5, their jobs written newest first.
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, []int64{5, 4, 3, 2, 1}, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if ran, err := q.Step(ctx); !ran || err != nil {
			t.Fatalf("Step() = %v, %v; want a delivery run", ran, err)
		}
		if len(batches) != 1 || !slices.Equal(batches[0], []int64{5, 1, 2, 3, 4}) {
			t.Fatalf("DeliverMany got %v; want 5 (the job run) and then 1 to 4, oldest first", batches)
		}
	})
}

// TestDeliveryFailedInABatchRunsAlone: a delivery that failed in another's
// batch is put back to run alone: its own job sends it once more, alone,
// not in a batch of the deliveries waiting by then and then alone again.
func TestDeliveryFailedInABatchRunsAlone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
		var sends []string
		db, q := setup(t, dbURL, jobs.Config{StampWithNow: true, Now: func() time.Time { return now },
			Deliver: func(_ context.Context, id int64, _ bool) error {
				sends = append(sends, fmt.Sprint("alone ", id))
				return nil
			},
			DeliverMany: func(_ context.Context, ids []int64) ([]error, func(context.Context, *sql.Tx) error) {
				errs := make([]error, len(ids))
				for i, id := range ids {
					sends = append(sends, fmt.Sprint("batch ", id))
					if id == 2 {
						errs[i] = errors.New("the sink refused it")
					}
				}
				return errs, func(context.Context, *sql.Tx) error { return nil }
			},
			DeliverySweep: func(context.Context, *sql.Tx, time.Time, time.Time, int) ([]int64, error) { return nil, nil }})
		enqueue := func(ids ...int64) {
			tx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.EnqueueDeliveriesTx(ctx, tx, ids, false); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		enqueue(1, 2, 3)
		if ran, err := q.Step(ctx); !ran || err != nil {
			t.Fatalf("Step() = %v, %v; want a batch run", ran, err)
		}
		enqueue(4, 5) // waiting when delivery 2's job runs
		for {
			ran, err := q.Step(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ran {
				break
			}
		}
		var twos []string
		for _, s := range sends {
			if strings.HasSuffix(s, " 2") {
				twos = append(twos, s)
			}
		}
		if !slices.Equal(twos, []string{"batch 2", "alone 2"}) {
			t.Fatalf("delivery 2 sent %q (all sends %q); want once in the first batch, then once alone", twos, sends)
		}
	})
}

// TestStepLater: a Fetch's jobs.Later under Step puts the job off as
// River's workers do (a snooze): not an attempt of the job or of the
// event, due again when the Later says, and the event is then processed,
// with MaxAttempts 1. Before, Step took the snooze for a failure: the job
// was retried with backoff, counting River's attempt, and with
// MaxAttempts 1 discarded at once while the event stayed received, its
// job gone until the sweep's.
func TestStepLater(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
		reads := 0
		fetch := func(context.Context, *payhook.Event) ([]byte, error) {
			if reads++; reads == 1 {
				return nil, jobs.Later(time.Minute, "its turn is later")
			}
			return []byte(`{}`), nil
		}
		mux := &payhook.Mux{}
		mux.HandleFunc("*", effect)
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Fetch: fetch, MaxAttempts: 1,
			StampWithNow: true, Now: func() time.Time { return now }})
		ev := event("evt_step_later")
		ev.ReceivedAt = now
		ingest(t, q, ev)
		step := func(want bool) {
			t.Helper()
			ran, err := q.Step(ctx)
			if err != nil || ran != want {
				t.Fatalf("Step() = %v, %v; want %v, nil", ran, err, want)
			}
		}
		job := func() (state string, attempt int, scheduled time.Time) {
			t.Helper()
			if err := db.SQL.QueryRow(`SELECT state, attempt, scheduled_at FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&state, &attempt, &scheduled); err != nil {
				t.Fatal(err)
			}
			return state, attempt, scheduled.UTC()
		}
		step(true) // put off
		if state, attempt, at := job(); state != "scheduled" || attempt != 0 || !at.Equal(now.Add(time.Minute)) {
			t.Fatalf("job put off: %s, attempt %d, due %s; want scheduled, attempt 0, due %s", state, attempt, at, now.Add(time.Minute))
		}
		if a, err := q.Attempts(ctx, ev.ID); err != nil || len(a) != 1 || a[0].Outcome != "waiting" {
			t.Fatalf("attempts %+v (%v); want one waiting", a, err)
		}
		step(false) // not due yet
		now = now.Add(time.Minute)
		step(true)
		got, err := db.Event(ctx, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != payhook.StatusProcessed || got.Attempts != 1 || effects(t, db, ev.EventID) != 1 {
			t.Fatalf("%s after %d attempts with %d effects (%q); want processed after 1, with 1", got.Status, got.Attempts, effects(t, db, ev.EventID), got.LastError)
		}
		if state, attempt, _ := job(); state != "completed" || attempt != 1 {
			t.Fatalf("job %s, attempt %d; want completed, attempt 1", state, attempt)
		}
	})
}
