package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// TestYield: while acknowledging a burst, an attempt whose job waited less
// than PauseLag (3s by default) waits, under a steady load one that waited
// less than steadyPause; while acknowledging, one that waited less than
// BusyMaxLag takes one of the BusyWorkers slots and batches for
// BusyBatchTime, and one that waited longer runs at once with BatchTime;
// without acks, or once the Queue stops, every attempt runs at once.
func TestYield(t *testing.T) {
	for _, tc := range []struct {
		name      string
		engine    store.Engine // default SQLite
		pauseLag  time.Duration
		waited    time.Duration
		acking    bool
		steady    bool // acking, one event a commit: no burst
		stopping  bool
		slotTaken bool // by another attempt
		want      string
	}{
		{name: "no acks", waited: 0, want: "runs"},
		{name: "no acks, slot taken", waited: 0, slotTaken: true, want: "runs"},
		{name: "no acks, behind", waited: time.Hour, want: "runs behind"},
		{name: "fresh", waited: 0, acking: true, want: "waits"},
		{name: "just under the pause", waited: 3*time.Second - time.Millisecond, acking: true, want: "waits"},
		{name: "paused no more", waited: 3 * time.Second, acking: true, want: "takes a slot"},
		{name: "steady, fresh", waited: 0, acking: true, steady: true, want: "waits"},
		{name: "steady, just under its pause", waited: steadyPause - time.Millisecond, acking: true, steady: true, want: "waits"},
		{name: "steady, under a shorter PauseLag", pauseLag: 100 * time.Millisecond, waited: 100 * time.Millisecond, acking: true, steady: true, want: "takes a slot"},
		{name: "steady, never paused", pauseLag: -1, waited: 0, acking: true, steady: true, want: "takes a slot"},
		{name: "steady, paused no more", waited: steadyPause, acking: true, steady: true, want: "takes a slot"},
		{name: "steady, slot taken", waited: steadyPause, acking: true, steady: true, slotTaken: true, want: "waits"},
		{name: "slot taken", waited: 5 * time.Second, acking: true, slotTaken: true, want: "waits"},
		{name: "at the max lag", waited: 10 * time.Second, acking: true, want: "takes a slot"},
		{name: "behind", waited: 10*time.Second + time.Millisecond, acking: true, slotTaken: true, want: "runs behind"},
		{name: "stopping", waited: 0, acking: true, stopping: true, slotTaken: true, want: "runs"},
		{name: "never paused", pauseLag: -1, waited: 0, acking: true, want: "takes a slot"},
		{name: "PostgreSQL pauses too", engine: store.Postgres, waited: 0, acking: true, want: "waits"},
		{name: "PostgreSQL paused no more", engine: store.Postgres, waited: 3 * time.Second, acking: true, want: "takes a slot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.engine == "" {
				tc.engine = store.SQLite
			}
			// A clock that stands still: the wait is the job's alone.
			now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
			cfg := Config{PauseLag: tc.pauseLag, StampWithNow: true, Now: func() time.Time { return now }}.
				withDefaults(tc.engine)
			q := &Queue{cfg: cfg, busy: make(chan struct{}, 1)}
			if tc.slotTaken {
				q.busy <- struct{}{}
			}
			if tc.acking {
				size := 2 * burstSize
				if tc.steady {
					size = 1
				}
				for range 50 { // the moving average forgets the ingests before
					q.ingestStarted(size)
					q.ingestDone(size)
				}
				q.ingestStarted(size)
				defer q.ingestDone(size)
			}
			q.stopping.Store(tc.stopping)
			// One that would wait fails once ctx has ended: soon where it
			// should, else after a minute (the clock stands still: it
			// would wait for ever). Not at once: a free slot must be
			// refused, not lost to an ended ctx in a select.
			wait := time.Minute
			if tc.want == "waits" {
				wait = 20 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			release, behind, err := q.yield(ctx, tc.waited)
			got := "runs"
			switch {
			case err != nil:
				got = "waits"
			case behind:
				got = "runs behind"
			case len(q.busy) == 1 && !tc.slotTaken:
				got = "takes a slot"
			}
			if got != tc.want {
				t.Fatalf("an attempt due %v ago %s, want it %s", tc.waited, got, tc.want)
			}
			if release != nil {
				release()
			}
			if tc.slotTaken != (len(q.busy) == 1) {
				t.Error("the slot is not given back as it was")
			}
			want := cfg.BatchTime
			if tc.acking && !behind {
				want = cfg.BusyBatchTime
			}
			if bt := q.batchTime(behind); bt != want {
				t.Errorf("batch time %v, want %v", bt, want)
			}
		})
	}
}

// TestLagDefaults: BusyMaxLag stays well within JobTimeout, which the
// wait counts against (New refuses one that does not: TestConfigRefused).
func TestLagDefaults(t *testing.T) {
	for _, tc := range []struct {
		engine                           store.Engine
		jobTimeout, busyMaxLag, pauseLag time.Duration
		busyBatchTime                    time.Duration
	}{
		{store.SQLite, 0, 10 * time.Second, 3 * time.Second, 2 * time.Millisecond},
		{store.SQLite, time.Second, 250 * time.Millisecond, 250 * time.Millisecond, 2 * time.Millisecond},
		{store.Postgres, 0, 10 * time.Second, 3 * time.Second, 20 * time.Millisecond},
	} {
		cfg := Config{JobTimeout: tc.jobTimeout}.withDefaults(tc.engine)
		if cfg.BusyMaxLag != tc.busyMaxLag || cfg.PauseLag != tc.pauseLag || cfg.BusyBatchTime != tc.busyBatchTime {
			t.Errorf("%s, job timeout %v: busy max lag %v, pause lag %v, busy batch time %v; want %v, %v, %v",
				tc.engine, tc.jobTimeout, cfg.BusyMaxLag, cfg.PauseLag, cfg.BusyBatchTime,
				tc.busyMaxLag, tc.pauseLag, tc.busyBatchTime)
		}
	}
}

// TestIngestGoesFirst: on SQLite an attempt that is not behind lets an
// ingest under way have the connection first, unless the Queue stops;
// never on PostgreSQL, whose acks commit on connections of their own.
func TestIngestGoesFirst(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		engine                     store.Engine
		ingesting, behind, stopped bool
		want                       bool
	}{
		{"SQLite, an ingest under way", store.SQLite, true, false, false, true},
		{"SQLite, no ingest", store.SQLite, false, false, false, false},
		{"SQLite, behind", store.SQLite, true, true, false, false},
		{"SQLite, stopping", store.SQLite, true, false, true, false},
		{"PostgreSQL", store.Postgres, true, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &Queue{db: &store.DB{Engine: tc.engine}}
			if tc.ingesting {
				q.ingestStarted(1)
			}
			q.stopping.Store(tc.stopped)
			if got := q.ingestGoesFirst(tc.behind); got != tc.want {
				t.Errorf("ingestGoesFirst = %v; want %v", got, tc.want)
			}
			q.ingestFirst(tc.behind) // returns, at the latest after ingestFirstMax
		})
	}
}

// TestBursting: acknowledging is a burst once the recent ingests hold
// burstSize events or more on average, and no longer once they hold
// fewer; an ingest of a different size moves the average, not past it.
func TestBursting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int // ingests, oldest first, each repeated 100 times
		want  bool
	}{
		{"one event a commit", []int{1}, false},
		{"just under", []int{burstSize - 1}, false},
		{"at the size", []int{burstSize}, true},
		{"a c=64 burst", []int{13}, true},
		{"a burst that ended in a steady load", []int{13, 1}, false},
		{"a steady load that turned into a burst", []int{1, 13}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &Queue{}
			for _, n := range tc.sizes {
				for range 100 {
					q.ingestStarted(n)
					q.ingestDone(n)
				}
			}
			if got := q.bursting(); got != tc.want {
				t.Errorf("bursting = %v, want %v", got, tc.want)
			}
		})
	}
	// PostgreSQL's committers: three commits of 3 under way at once are a
	// burst, one commit of 3 at a time is not.
	for _, together := range []int{1, 3} {
		q := &Queue{}
		for range 100 {
			for range together {
				q.ingestStarted(3)
			}
			for range together {
				q.ingestDone(3)
			}
		}
		q.ingestStarted(3)
		if got := q.bursting(); got != (together == 3) {
			t.Errorf("%d commits of 3 at once: bursting = %v", together, got)
		}
		q.ingestDone(3)
	}
	q := &Queue{}
	for range 100 {
		q.ingestStarted(1)
		q.ingestDone(1)
	}
	q.ingestStarted(1000) // under way: a backfill's page, say
	defer q.ingestDone(1000)
	if q.bursting() {
		t.Error("one large commit in a steady load counts as a burst")
	}
	q.ingestStarted(1000) // a second one under way
	defer q.ingestDone(1000)
	if !q.bursting() {
		t.Error("two large commits in a row are no burst")
	}
	q.lastIngest.Store(time.Now().Add(-time.Hour).UnixNano())
	q.ingesting.Store(0)
	if q.bursting() {
		t.Error("a burst while no ingest is under way or just ended")
	}
}

// TestWorkersDefaults: while Fetch is set each attempt waits on a
// provider's API outside any transaction, so 20 workers read at once on
// either engine; before, SQLite's 4 read four at a time, 74 events/s at
// 50 ms a read against 335/s (BenchmarkProcessFetch).
func TestWorkersDefaults(t *testing.T) {
	fetch := func(context.Context, *payhook.Event) ([]byte, error) { return nil, nil }
	for _, tc := range []struct {
		engine store.Engine
		cfg    Config
		want   int
	}{
		{store.Postgres, Config{}, 8},
		{store.Postgres, Config{Fetch: fetch}, 20},
		{store.SQLite, Config{}, 4},
		{store.SQLite, Config{Fetch: fetch}, 20},
		{store.SQLite, Config{Fetch: fetch, Workers: 3}, 3},
	} {
		if got := tc.cfg.withDefaults(tc.engine).Workers; got != tc.want {
			t.Errorf("%s, fetch %t: %d workers, want %d", tc.engine, tc.cfg.Fetch != nil, got, tc.want)
		}
	}
}

// TestDeliveryWorkersDefaults: while Fetch is set every event is processed
// alone and its deliveries' first attempts are jobs of DeliveryQueue, so
// as many workers send them as process the events (before that queue they
// shared the Workers, 20): with 4, a sink answering in 200 ms would be
// sent 20 deliveries a second, whatever the rate of events.
func TestDeliveryWorkersDefaults(t *testing.T) {
	fetch := func(context.Context, *payhook.Event) ([]byte, error) { return nil, nil }
	for _, tc := range []struct {
		engine store.Engine
		cfg    Config
		want   int
	}{
		{store.Postgres, Config{}, 4},
		{store.Postgres, Config{Fetch: fetch}, 20},
		{store.Postgres, Config{Fetch: fetch, Workers: 30}, 30},
		{store.Postgres, Config{Fetch: fetch, DeliveryWorkers: 3}, 3},
		{store.SQLite, Config{}, 2},
		{store.SQLite, Config{Fetch: fetch}, 20},
		{store.SQLite, Config{Fetch: fetch, Workers: 6}, 6},
	} {
		if got := tc.cfg.withDefaults(tc.engine).DeliveryWorkers; got != tc.want {
			t.Errorf("%s, fetch %t, workers %d: %d delivery workers, want %d",
				tc.engine, tc.cfg.Fetch != nil, tc.cfg.Workers, got, tc.want)
		}
	}
}
