package jobs_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
)

// TestLaterFromAHandlerIsAFailure: jobs.Later is for a Fetch (a read
// whose turn is later). A handler that returns it, alone or in a batch,
// fails its attempt like any other error: counted, retried, and failed
// at MaxAttempts. Before, alone it was snoozed for ever without an
// attempt (never failed, never alerted), and in a batch its failure was
// recorded each time while River's attempt was given back, so that the
// event's attempts grew past MaxAttempts and it never failed either.
func TestLaterFromAHandlerIsAFailure(t *testing.T) {
	for _, batch := range []int{1, 16} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				var calls atomic.Int64
				mux := &payhook.Mux{}
				mux.HandleFunc("*", func(context.Context, *sql.Tx, *payhook.Event) error {
					calls.Add(1)
					return jobs.Later(time.Millisecond, "not a fetch")
				})
				const maxAttempts = 2
				db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Batch: batch, MaxAttempts: maxAttempts})
				ev := event("evt_later")
				ingest(t, q, ev)
				start(t, q)
				last, moved := int64(-1), time.Now()
				for {
					got, err := db.Event(context.Background(), ev.ID)
					if err != nil {
						t.Fatal(err)
					}
					n := calls.Load()
					if got.Status != payhook.StatusReceived || n > maxAttempts+2 {
						if got.Status != payhook.StatusFailed || got.Attempts != maxAttempts {
							t.Fatalf("after %d handler calls: %s, %d attempts (%q); want failed after %d",
								n, got.Status, got.Attempts, got.LastError, maxAttempts)
						}
						return
					}
					if n != last {
						last, moved = n, time.Now()
					}
					if time.Since(moved) > stall {
						t.Fatalf("nothing moved for %s: %d calls, %s", stall, n, got.Status)
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		})
	}
}

// TestLaterBounded: a Fetch's jobs.Later puts its job off for at least a
// second and at most maxPostpone (10 minutes). Before, Later(0) made the
// job available again at once (River's snooze of 0): a Fetch that
// returns it while it cannot read fetched, read and snoozed the job in a
// loop as fast as the database went; and a huge one parked the event for
// that long, received, without an error recorded or an alert, the
// sweep's stand-in held off by the job it meets.
func TestLaterBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		after    time.Duration
		min, max time.Duration
	}{
		{"zero", 0, time.Second - time.Millisecond, time.Hour},
		{"huge", 1000 * time.Hour, 0, 10*time.Minute + time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				mux := &payhook.Mux{}
				mux.HandleFunc("*", effect)
				var first atomic.Pointer[time.Time]
				fetch := func(context.Context, *payhook.Event) ([]byte, error) {
					if now := time.Now(); first.CompareAndSwap(nil, &now) {
						return nil, jobs.Later(tc.after, "not yet")
					}
					return []byte(`{}`), nil
				}
				db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Fetch: fetch})
				ev := event("evt_later")
				ingest(t, q, ev)
				start(t, q)
				if tc.name == "zero" {
					waitDone(t, db, ev.ID)
				} else {
					waitJobState(t, db, "payhook_process_event", "scheduled")
				}
				res, err := q.River().JobList(context.Background(), river.NewJobListParams().Kinds("payhook_process_event"))
				if err != nil || len(res.Jobs) != 1 {
					t.Fatalf("jobs %v, %v; want one", res, err)
				}
				if d := res.Jobs[0].ScheduledAt.Sub(*first.Load()); d < tc.min || d > tc.max {
					t.Errorf("Later(%s): the job put off for %s; want %s to %s", tc.after, d, tc.min, tc.max)
				}
			})
		})
	}
}

// TestMaxPutOffs: a Fetch that says Later for ever puts the event's job
// off MaxPutOffs times (River's snoozes, counted in the job's row), then
// its Later is a failed attempt, recorded, and at MaxAttempts the event
// fails: never read, it does not wait for ever without an alert. Before,
// only the reads' own bound in billing/process (in the memory of one
// process) stopped it.
func TestMaxPutOffs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("*", effect)
		var calls atomic.Int64
		fetch := func(context.Context, *payhook.Event) ([]byte, error) {
			calls.Add(1)
			return nil, jobs.Later(time.Second, "the provider asked for no read yet")
		}
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Fetch: fetch, MaxPutOffs: 2, MaxAttempts: 1})
		ev := event("evt_put_off")
		ingest(t, q, ev)
		start(t, q)
		got := waitDone(t, db, ev.ID)
		if got.Status != payhook.StatusFailed || got.Attempts != 1 || calls.Load() != 3 ||
			!strings.Contains(got.LastError, "put off 2 times, the most (MaxPutOffs): the provider asked for no read yet") {
			t.Fatalf("after %d reads: %s after %d attempts (%q); want failed at its one attempt, after 2 put off",
				calls.Load(), got.Status, got.Attempts, got.LastError)
		}
	})
}
