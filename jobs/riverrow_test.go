package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

// TestIngestedJobsAreRiversJobs: the jobs Ingest writes into River's
// table itself (riverrow.go), in a batch, alone, one at a time, and
// through IngestBounded (PostgreSQL: store.StoreEvents), are
// the rows River's InsertManyTx writes for the same args, but without a
// unique key; once the sweep's keyLiveJobsTx has given them theirs, River's
// own insert of the same job finds each one live (its unique key and
// states), and the other columns equal those of a job River inserted. An
// event stored as ignored gets no job.
func TestIngestedJobsAreRiversJobs(t *testing.T) {
	for _, stamp := range []bool{false, true} {
		t.Run(fmt.Sprintf("stamp=%v", stamp), func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := migrated(t, dbURL)
				now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
				cfg := Config{Logger: slog.New(slog.DiscardHandler), MaxAttempts: 7}
				if stamp {
					cfg.StampWithNow, cfg.Now = true, func() time.Time { return now }
				}
				q, err := New(db, cfg)
				if err != nil {
					t.Fatal(err)
				}
				ev := func(id string) *payhook.Event {
					return &payhook.Event{Source: "src", EventID: id, Type: "t", ReceivedAt: now, Payload: []byte(`{}`)}
				}
				ignored := ev("evt_ignored")
				ignored.Status, ignored.LastError = payhook.StatusIgnored, "environment"
				batch := []*payhook.Event{ev("evt_a"), ignored, ev("evt_b")}
				if _, err := q.Ingest(ctx, batch); err != nil {
					t.Fatal(err)
				}
				single := ev("evt_c")
				if _, err := q.Ingest(ctx, []*payhook.Event{single}); err != nil {
					t.Fatal(err)
				}
				// One at a time, as after a failed batch.
				apart := []*payhook.Event{ev("evt_d"), ev("evt_e")}
				if _, err := q.ingestTx(ctx, apart, 0, false); err != nil {
					t.Fatal(err)
				}
				// As the group committer stores them: on PostgreSQL one
				// statement on the Ingest pool.
				bounded := []*payhook.Event{ev("evt_f"), ev("evt_g")}
				if _, err := q.IngestBounded(ctx, bounded); err != nil {
					t.Fatal(err)
				}
				boundedOne := ev("evt_h")
				if _, err := q.IngestBounded(ctx, []*payhook.Event{boundedOne}); err != nil {
					t.Fatal(err)
				}
				ours := []*payhook.Event{batch[0], batch[2], single, apart[0], apart[1], bounded[0], bounded[1], boundedOne}

				// A job River inserts, for comparison.
				ref := ev("evt_river")
				tx, err := db.SQL.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				if _, err := db.InsertEventsTx(ctx, tx, []*payhook.Event{ref}); err != nil {
					t.Fatal(err)
				}
				var unkeyed int
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE unique_key IS NULL AND unique_states IS NULL`).Scan(&unkeyed); err != nil {
					t.Fatal(err)
				}
				if unkeyed != len(ours) {
					t.Errorf("%d jobs without a unique key, want %d: Ingest writes none", unkeyed, len(ours))
				}
				params := []river.InsertManyParams{{Args: processArgs{EventID: ref.ID}}}
				var ids []int64
				for _, e := range ours {
					params = append(params, river.InsertManyParams{Args: processArgs{EventID: e.ID}})
					ids = append(ids, e.ID)
				}
				if err := q.keyLiveJobsTx(ctx, tx, append(ids, ref.ID)); err != nil { // ref's: no job yet, nothing to key
					t.Fatal(err)
				}
				res, err := q.client.InsertManyTx(ctx, tx, params)
				if err != nil {
					t.Fatal(err)
				}
				if res[0].UniqueSkippedAsDuplicate {
					t.Fatal("River's job for a fresh event skipped as a duplicate")
				}
				want := res[0].Job
				for i, r := range res[1:] {
					if !r.UniqueSkippedAsDuplicate {
						t.Errorf("River inserted a second job for %s: the ingested one's unique key or states differ", ours[i].EventID)
						continue
					}
					compareJobs(t, ours[i], r.Job, want, stamp)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				var n int
				if err := db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM river_job`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != len(ours)+1 {
					t.Errorf("%d jobs, want %d (none for the ignored event)", n, len(ours)+1)
				}
			})
		})
	}
}

// compareJobs checks that got, the job of ev, is like want, River's job
// of another event; stamp says that both took their times from Now.
func compareJobs(t *testing.T, ev *payhook.Event, got, want *rivertype.JobRow, stamp bool) {
	t.Helper()
	var args processArgs
	if err := json.Unmarshal(got.EncodedArgs, &args); err != nil || args != (processArgs{EventID: ev.ID}) {
		t.Errorf("%s: args %s (%v), want event_id %d", ev.EventID, got.EncodedArgs, err, ev.ID)
	}
	type cols struct {
		Kind, Queue  string
		State        rivertype.JobState
		Priority     int
		MaxAttempts  int
		Metadata     string
		Tags         []string
		UniqueStates []rivertype.JobState
		Attempt      int
	}
	c := func(j *rivertype.JobRow) cols {
		// River's SQLite insert marks its rows with a nonce, to tell them
		// from those it met: no part of the job.
		var meta map[string]any
		if err := json.Unmarshal(j.Metadata, &meta); err != nil {
			t.Fatalf("job %d: metadata %s: %v", j.ID, j.Metadata, err)
		}
		delete(meta, "river:unique_nonce")
		m, _ := json.Marshal(meta)
		return cols{j.Kind, j.Queue, j.State, j.Priority, j.MaxAttempts, string(m), j.Tags, j.UniqueStates, j.Attempt}
	}
	if g, w := c(got), c(want); fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("%s: job %+v, want River's %+v", ev.EventID, g, w)
	}
	// Below the sweep's priority (River's default, 1), which River then
	// fetches ahead of a backlog.
	if got.Priority != workPriority || workPriority <= river.PriorityDefault {
		t.Errorf("%s: priority %d; want %d, after River's default %d", ev.EventID, got.Priority, workPriority, river.PriorityDefault)
	}
	// Times: the database's clock, or Now with StampWithNow, as River's own.
	if !got.ScheduledAt.Equal(got.CreatedAt) || got.CreatedAt.IsZero() ||
		(stamp && (!got.CreatedAt.Equal(want.CreatedAt) || !got.ScheduledAt.Equal(want.ScheduledAt))) {
		t.Errorf("%s: created %v, scheduled %v; River's %v, %v", ev.EventID, got.CreatedAt, got.ScheduledAt, want.CreatedAt, want.ScheduledAt)
	}
}

// keyLiveJobsTx leaves a job whose key another live job holds, as when
// an instance of a version that keyed its jobs at ingest inserted one for
// the same event beside ours: the sweep goes on, and River finds the
// keyed one live.
func TestKeyLiveJobsLeavesAKeyTaken(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := migrated(t, dbURL)
		q, err := New(db, Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ev := &payhook.Event{Source: "src", EventID: "evt_twice", Type: "t", ReceivedAt: time.Now(), Payload: []byte(`{}`)}
		if _, err := q.Ingest(ctx, []*payhook.Event{ev}); err != nil {
			t.Fatal(err)
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		params := []river.InsertManyParams{{Args: processArgs{EventID: ev.ID}}}
		if res, err := q.client.InsertManyTx(ctx, tx, params); err != nil || res[0].UniqueSkippedAsDuplicate {
			t.Fatalf("River's insert beside the unkeyed job: %v (skipped: %v); want a second, keyed job", err, err == nil && res[0].UniqueSkippedAsDuplicate)
		}
		if err := q.keyLiveJobsTx(ctx, tx, []int64{ev.ID}); err != nil {
			t.Fatalf("keyLiveJobsTx with the key taken: %v", err)
		}
		var unkeyed int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE unique_key IS NULL`).Scan(&unkeyed); err != nil {
			t.Fatal(err)
		}
		if unkeyed != 1 {
			t.Errorf("%d jobs without a key, want 1 (ours, its key taken)", unkeyed)
		}
		if res, err := q.client.InsertManyTx(ctx, tx, params); err != nil || !res[0].UniqueSkippedAsDuplicate {
			t.Errorf("River's insert again: %v; want it skipped, the keyed job live", err)
		}
	})
}

// migrated opens the database at dbURL with payhook's and River's tables,
// closed when the test ends.
func migrated(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	db := storetest.Migrated(t, dbURL)
	if err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}
