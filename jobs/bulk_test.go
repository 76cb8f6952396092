package jobs_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
)

// TestBulkFilterRefused: a bulk replay without its bounds, of a status
// that cannot be replayed, or at a bad rate is refused and replays
// nothing.
func TestBulkFilterRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db, q := setup(t, dbURL, jobs.Config{})
		ctx := context.Background()
		since := time.Now().Add(-time.Hour)
		ok := jobs.BulkFilter{Source: "src", Status: payhook.StatusFailed, Since: since}
		for _, tc := range []struct {
			name string
			f    jobs.BulkFilter
		}{
			{"no source", jobs.BulkFilter{Status: payhook.StatusFailed, Since: since}},
			{"no status", jobs.BulkFilter{Source: "src", Since: since}},
			{"received", jobs.BulkFilter{Source: "src", Status: payhook.StatusReceived, Since: since}},
			{"ignored", jobs.BulkFilter{Source: "src", Status: payhook.StatusIgnored, Since: since}},
			{"unknown status", jobs.BulkFilter{Source: "src", Status: "stuck", Since: since}},
			{"no since", jobs.BulkFilter{Source: "src", Status: payhook.StatusFailed}},
			{"since out of range", jobs.BulkFilter{Source: "src", Status: payhook.StatusFailed, Since: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)}},
		} {
			if _, err := q.PlanReplay(ctx, tc.f, 10); !errors.Is(err, payhook.ErrInvalid) {
				t.Errorf("%s: PlanReplay = %v; want ErrInvalid", tc.name, err)
			}
			if _, err := q.ReplayBulk(ctx, &jobs.BulkPlan{Filter: tc.f, IDs: []int64{1}}, jobs.BulkOptions{}); !errors.Is(err, payhook.ErrInvalid) {
				t.Errorf("%s: ReplayBulk = %v; want ErrInvalid", tc.name, err)
			}
		}
		for _, rate := range []float64{-1, math.NaN(), math.Inf(1)} {
			if _, err := q.ReplayBulk(ctx, &jobs.BulkPlan{Filter: ok, IDs: []int64{1}}, jobs.BulkOptions{Rate: rate}); !errors.Is(err, payhook.ErrInvalid) {
				t.Errorf("rate %v: ReplayBulk = %v; want ErrInvalid", rate, err)
			}
		}
		if n := jobCount(t, db); n != 0 {
			t.Errorf("%d jobs after refused replays; want none", n)
		}
	})
}

// TestReplayBulk: the plan selects the filter's events (source, status,
// type, since), oldest first; two bulk replays of it at once enqueue each
// event once (the conditional UPDATE decides, the other reports it
// skipped); the replayed attempts run, in one batch, and are marked as
// replays (a batch keeps the jobs of the replays it applies).
func TestReplayBulk(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("*", effect)
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1,
			BatchTime: time.Hour, BusyBatchTime: time.Hour}) // one batch, however slow the machine
		ctx := context.Background()
		now := time.Now()
		since := now.Add(-24 * time.Hour)
		mk := func(id, source, typ string, status payhook.Status, age time.Duration) *payhook.Event {
			ev := event(id)
			ev.Source, ev.Type, ev.Status, ev.ReceivedAt = source, typ, status, now.Add(-age)
			return ev
		}
		evs := []*payhook.Event{
			mk("evt_1", "src", "a", payhook.StatusFailed, time.Hour),
			mk("evt_old", "src", "a", payhook.StatusFailed, 25*time.Hour),
			mk("evt_2", "src", "b", payhook.StatusFailed, time.Hour),
			mk("evt_other", "other", "a", payhook.StatusFailed, time.Hour),
			mk("evt_done", "src", "a", payhook.StatusProcessed, time.Hour),
			mk("evt_ign", "src", "a", payhook.StatusIgnored, time.Hour),
			mk("evt_3", "src", "a", payhook.StatusFailed, time.Hour),
		}
		// Stored without jobs, as after their last attempt failed.
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.InsertEventsTx(ctx, tx, evs); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		id := func(i int) int64 { return evs[i].ID }

		for _, tc := range []struct {
			name  string
			f     jobs.BulkFilter
			want  []int64
			first []int64
		}{
			{"failed", jobs.BulkFilter{Source: "src", Status: payhook.StatusFailed, Since: since}, []int64{id(0), id(2), id(6)}, []int64{id(6), id(2)}},
			{"type", jobs.BulkFilter{Source: "src", Status: payhook.StatusFailed, Since: since, Type: "a"}, []int64{id(0), id(6)}, []int64{id(6), id(0)}},
			{"processed", jobs.BulkFilter{Source: "src", Status: payhook.StatusProcessed, Since: since}, []int64{id(4)}, []int64{id(4)}},
			{"before", jobs.BulkFilter{Source: "src", Status: payhook.StatusFailed, Since: since, Before: id(6)}, []int64{id(0), id(2)}, []int64{id(2), id(0)}},
			{"none", jobs.BulkFilter{Source: "nope", Status: payhook.StatusFailed, Since: since}, nil, nil},
		} {
			p, err := q.PlanReplay(ctx, tc.f, 2)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var first []int64
			for _, ev := range p.First {
				first = append(first, ev.ID)
			}
			if !slices.Equal(p.IDs, tc.want) || !slices.Equal(first, tc.first) {
				t.Errorf("%s: plan %v, first %v; want %v, %v", tc.name, p.IDs, first, tc.want, tc.first)
			}
		}
		if n := jobCount(t, db); n != 0 {
			t.Fatalf("%d jobs after dry runs; want none", n)
		}

		plan, err := q.PlanReplay(ctx, jobs.BulkFilter{Source: "src", Status: payhook.StatusFailed, Since: since}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		res := make([]jobs.BulkResult, 2)
		var last [2]int
		for i := range res {
			wg.Go(func() {
				var err error
				res[i], err = q.ReplayBulk(ctx, plan, jobs.BulkOptions{Rate: 1e6,
					Progress: func(done, total int) { last[i] = done }})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		replayed := res[0].Replayed + res[1].Replayed
		skipped := slices.Sorted(slices.Values(append(slices.Clone(res[0].Skipped), res[1].Skipped...)))
		if replayed != 3 || !slices.Equal(skipped, plan.IDs) || last != [2]int{3, 3} {
			t.Fatalf("two bulk replays at once: %+v; progress %v; want 3 replayed between them, the rest skipped, progress 3", res, last)
		}
		if n := jobCount(t, db); n != 3 {
			t.Fatalf("%d jobs after the replays; want 3, one per event", n)
		}
		start(t, q)
		for _, i := range []int{0, 2, 6} {
			if ev := waitAttempts(t, db, id(i), 1); ev.Status != payhook.StatusProcessed {
				t.Fatalf("%s after the replay: %s; want processed", ev.EventID, ev.Status)
			}
			as, err := q.Attempts(ctx, id(i))
			if err != nil || len(as) != 1 || !as[0].Replay || as[0].Outcome != "succeeded" {
				t.Fatalf("attempts of %s: %+v, %v; want one succeeded replay", evs[i].EventID, as, err)
			}
		}
		for _, i := range []int{1, 3, 4, 5} {
			if ev, _ := db.Event(ctx, id(i)); ev.Status != evs[i].Status {
				t.Errorf("%s outside the filter: %s; want %s", ev.EventID, ev.Status, evs[i].Status)
			}
		}
	})
}
