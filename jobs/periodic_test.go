package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// TestPeriodicRunsOncePerPeriod: instances sharing one database (two on
// PostgreSQL, one on SQLite, whose file one process owns) run a periodic
// job once per period between them. The test waits on progress (periods
// seen), never on a number of seconds.
func TestPeriodicRunsOncePerPeriod(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const every = time.Second
		var mu sync.Mutex
		runs := map[time.Time][]string{} // period → instances that ran it
		periodic := func(instance string) []jobs.Periodic {
			return []jobs.Periodic{{Name: "reconcile:shop", Every: every, Run: func(_ context.Context, period time.Time) error {
				mu.Lock()
				defer mu.Unlock()
				runs[period] = append(runs[period], instance)
				return nil
			}}}
		}
		db, q := setup(t, dbURL, jobs.Config{Periodic: periodic("a")})
		start(t, q)
		if db.Engine == store.Postgres {
			other, err := store.Open(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			start(t, newQueue(t, other, jobs.Config{Periodic: periodic("b")}))
		}
		const want = 4
		waitFor(t, fmt.Sprintf("%d periods run", want), func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(runs) - want + 1
		})
		mu.Lock()
		defer mu.Unlock()
		for period, who := range runs {
			if len(who) != 1 {
				t.Errorf("period %s ran %d times (%v); want once", period.Format(time.RFC3339Nano), len(who), who)
			}
			if !period.Equal(period.Truncate(every)) {
				t.Errorf("period %s is not a multiple of %s", period, every)
			}
		}
	})
}

// TestPeriodicConfigErrors: a periodic job without a name, a run or a
// sensible interval, or given twice, is a configuration error.
func TestPeriodicConfigErrors(t *testing.T) {
	t.Parallel()
	run := func(context.Context, time.Time) error { return nil }
	db, err := store.Open(context.Background(), "sqlite://"+t.TempDir()+"/p.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		name string
		ps   []jobs.Periodic
	}{
		{"no name", []jobs.Periodic{{Every: time.Minute, Run: run}}},
		{"a space in the name", []jobs.Periodic{{Name: "reconcile shop", Every: time.Minute, Run: run}}},
		{"no run", []jobs.Periodic{{Name: "x", Every: time.Minute}}},
		{"interval under a second", []jobs.Periodic{{Name: "x", Every: time.Millisecond, Run: run}}},
		{"twice", []jobs.Periodic{{Name: "x", Every: time.Minute, Run: run}, {Name: "x", Every: time.Hour, Run: run}}},
	} {
		if _, err := jobs.New(db, jobs.Config{Periodic: tc.ps}); !errors.Is(err, payhook.ErrConfig) {
			t.Errorf("%s: New = %v; want an error wrapping payhook.ErrConfig", tc.name, err)
		}
	}
}

// TestPeriodicRunsNeverOverlap: a run that outlasts its period (here held
// until a later period's job has come and gone) is not joined by the
// next period's, on any instance (two on PostgreSQL): that period is
// skipped, and the periods after the run ends run again.
func TestPeriodicRunsNeverOverlap(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var mu sync.Mutex
		active, most, runs := 0, 0, 0
		first, release := make(chan struct{}), make(chan struct{})
		periodic := []jobs.Periodic{{Name: "backfill:shop", Every: time.Second, Run: func(ctx context.Context, _ time.Time) error {
			mu.Lock()
			active, runs = active+1, runs+1
			most = max(most, active)
			n := runs
			mu.Unlock()
			if n == 1 {
				close(first)
				<-release
			}
			mu.Lock()
			active--
			mu.Unlock()
			return nil
		}}}
		db, q := setup(t, dbURL, jobs.Config{Periodic: periodic})
		start(t, q)
		if db.Engine == store.Postgres {
			other, err := store.Open(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			start(t, newQueue(t, other, jobs.Config{Periodic: periodic}))
		}
		select {
		case <-first:
		case <-time.After(stall):
			t.Fatalf("no period ran in %s", stall)
		}
		// A later period's job ends (skipped) while the first run holds on.
		waitFor(t, "a later period's job", func() int {
			var n int
			if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_periodic' AND state = 'completed'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
		close(release)
		waitFor(t, "a run after the first", func() int {
			mu.Lock()
			defer mu.Unlock()
			return runs - 1
		})
		mu.Lock()
		defer mu.Unlock()
		if most != 1 {
			t.Fatalf("%d runs at once; want 1", most)
		}
	})
}

// waitFor waits until count returns more than 0, failing when it has not
// moved for stall (counts below 0 are progress too).
func waitFor(t *testing.T, what string, count func() int) {
	t.Helper()
	last, moved := -1, time.Now()
	for {
		n := count()
		if n > 0 {
			return
		}
		if n != last {
			last, moved = n, time.Now()
		} else if time.Since(moved) > stall {
			t.Fatalf("waiting for %s: nothing moved for %s", what, stall)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPeriodicRunOutlastsJobTimeout: a periodic run (a scheduled backfill
// of a day, then its wait for the workers) is not bounded by JobTimeout,
// which bounds one processing attempt of an event: cut there, a run that
// needs longer failed at the same point every period, and the source was
// never reconciled.
func TestPeriodicRunOutlastsJobTimeout(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const timeout = 2 * time.Second
		result := make(chan error, 10)
		periodic := []jobs.Periodic{{Name: "reconcile:shop", Every: time.Second, Run: func(ctx context.Context, _ time.Time) error {
			select {
			case <-ctx.Done():
				result <- ctx.Err()
			case <-time.After(timeout + time.Second):
				result <- nil
			}
			return nil
		}}}
		_, q := setup(t, dbURL, jobs.Config{Periodic: periodic, JobTimeout: timeout})
		start(t, q)
		select {
		case err := <-result:
			if err != nil {
				t.Fatalf("a periodic run longer than JobTimeout was cut: %v", err)
			}
		case <-time.After(stall):
			t.Fatalf("no period ran in %s", stall)
		}
	})
}
