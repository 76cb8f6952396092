package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// batchHandler is a payhook.BatchHandler over effect: the event fail
// names fails (HandleBatch leaves it out, or fails whole if whole), and
// the event ignore names is ignored, as Handle does.
type batchHandler struct {
	fail, ignore string
	whole        bool
	mu           sync.Mutex
	batches      int // HandleBatch calls that applied their batch
	largest      int // the most events HandleBatch was given at once
	alone        int // Handle calls
	onBatch      func(evs []*payhook.Event)
}

func (h *batchHandler) Handle(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
	h.mu.Lock()
	h.alone++
	h.mu.Unlock()
	return h.apply(ctx, tx, ev)
}

func (h *batchHandler) apply(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
	switch ev.EventID {
	case h.fail:
		return errors.New("this event fails")
	case h.ignore:
		return fmt.Errorf("%w: nothing to do", payhook.ErrIgnored)
	}
	return effect(ctx, tx, ev)
}

func (h *batchHandler) HandleBatch(ctx context.Context, tx *sql.Tx, evs []*payhook.Event) ([]error, error) {
	errs := make([]error, len(evs))
	for i, ev := range evs {
		// A failing event writes nothing: left out, it leaves nothing.
		err := h.apply(ctx, tx, ev)
		if err != nil && !errors.Is(err, payhook.ErrIgnored) && h.whole {
			return nil, err
		}
		errs[i] = err
	}
	h.mu.Lock()
	h.batches++
	h.largest = max(h.largest, len(evs))
	h.mu.Unlock()
	if h.onBatch != nil {
		h.onBatch(evs)
	}
	return errs, nil
}

// TestBatchHandler: a queue hands its batches to a payhook.BatchHandler
// at once, each event then processed (or ignored) after one attempt with
// one effect. An event the handler fails and leaves out goes back, and
// fails alone; a batch that fails whole rolls back and its events are
// applied alone, the failing one failing on its own.
func TestBatchHandler(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  string
		whole bool
	}{{"all succeed", "", false}, {"one fails", "evt_3", false}, {"one fails the batch", "evt_3", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				h := &batchHandler{fail: tc.fail, ignore: "evt_5", whole: tc.whole}
				mux := &payhook.Mux{}
				mux.Handle("*", h)
				db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1, Batch: 16, MaxAttempts: 1})
				evs := ingestN(t, q, 8)
				start(t, q)
				for _, ev := range evs {
					got := waitDone(t, db, ev.ID)
					want, effect := payhook.StatusProcessed, 1
					switch ev.EventID {
					case tc.fail:
						want, effect = payhook.StatusFailed, 0
					case h.ignore:
						want, effect = payhook.StatusIgnored, 0
					}
					if got.Status != want || got.Attempts != 1 || effects(t, db, ev.EventID) != effect {
						t.Errorf("%s: %s after %d attempts with %d effects; want %s after 1 with %d",
							ev.EventID, got.Status, got.Attempts, effects(t, db, ev.EventID), want, effect)
					}
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				switch {
				case !tc.whole && (h.batches == 0 || h.alone > 1):
					t.Errorf("%d batches handled at once, %d events alone; want the events in batches, the failing one alone", h.batches, h.alone)
				case tc.whole && h.alone < len(evs)-1:
					t.Errorf("%d events handled alone after the batch failed; want them all but the first", h.alone)
				}
			})
		})
	}
}

// TestBatchBytes: a batch holds no more payload bytes than BatchBytes
// (but for its own event); the events past it go back and are processed
// by later batches, each once.
func TestBatchBytes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h, db, q := bytesQueue(t, dbURL)
		// Two of these payloads fit in a batch, three do not.
		payload := []byte(`{"pad":"` + strings.Repeat("x", 1000-10) + `"}`)
		var evs []*payhook.Event
		for i := range 9 {
			ev := event(fmt.Sprint("evt_", i))
			ev.Payload = payload
			evs = append(evs, ev)
		}
		if _, err := q.Ingest(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		start(t, q)
		processedOnce(t, db, evs)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.batches == 0 || h.largest > 2 {
			t.Errorf("%d batches handled at once, the largest of %d events; want batches of 2 at most (2,500 bytes of 1,000-byte payloads)",
				h.batches, h.largest)
		}
	})
}

// TestBatchBytesLargeEvent: an event too large for any batch but its own
// keeps out of the others' batches only itself, even with the lowest row
// id and its job behind theirs (as the sweep's job of an event is): the
// small events after it still go in batches, and it is processed by its
// own job.
func TestBatchBytesLargeEvent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h, db, q := bytesQueue(t, dbURL)
		big := event("evt_big")
		big.Payload = []byte(`{"pad":"` + strings.Repeat("x", 3000) + `"}`)
		evs := []*payhook.Event{big}
		for i := range 8 {
			evs = append(evs, event(fmt.Sprint("evt_", i)))
		}
		if _, err := q.Ingest(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		// The small events' jobs first, in the order River and the
		// batches take them.
		early := "2000-01-01 00:00:00.000"
		if db.Engine == store.Postgres {
			early = "2000-01-01T00:00:00Z"
		}
		if _, err := db.SQL.Exec(`UPDATE river_job SET scheduled_at = $1 WHERE kind = 'payhook_process_event' AND id <> (SELECT min(id) FROM river_job WHERE kind = 'payhook_process_event')`, early); err != nil {
			t.Fatal(err)
		}
		start(t, q)
		processedOnce(t, db, evs)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.largest < 2 {
			t.Errorf("the largest batch held %d events; want the small ones together (%d bytes each, room 2,500)", h.largest, len(evs[1].Payload))
		}
	})
}

// bytesQueue returns a Queue of one worker over a batchHandler, whose
// batches take 16 events and 2,500 payload bytes at most.
func bytesQueue(t *testing.T, dbURL string) (*batchHandler, *store.DB, *jobs.Queue) {
	h := &batchHandler{}
	mux := &payhook.Mux{}
	mux.Handle("*", h)
	db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1, Batch: 16, BatchBytes: 2500, MaxAttempts: 1})
	return h, db, q
}

// processedOnce waits for each of evs to be done, and fails unless it was
// processed, with one effect.
func processedOnce(t *testing.T, db *store.DB, evs []*payhook.Event) {
	t.Helper()
	for _, ev := range evs {
		if got := waitDone(t, db, ev.ID); got.Status != payhook.StatusProcessed || effects(t, db, ev.EventID) != 1 {
			t.Errorf("%s: %s with %d effects; want processed with 1", ev.EventID, got.Status, effects(t, db, ev.EventID))
		}
	}
}

// apiReads is what a queue of apiQueue read (by event id) and applied
// in batches.
type apiReads struct {
	mu      sync.Mutex
	fetched map[string]int
	inBatch map[string]bool
}

// apiQueue sets up a queue over h, of workers and batches of 16, whose
// Fetch reads the events of source "api" alone (FetchSource), recording
// those it reads and the events h is given in batches.
func apiQueue(t *testing.T, dbURL string, h *batchHandler, workers int) (*store.DB, *jobs.Queue, *apiReads) {
	r := &apiReads{fetched: map[string]int{}, inBatch: map[string]bool{}}
	mux := &payhook.Mux{}
	mux.Handle("*", h)
	fetch := func(_ context.Context, ev *payhook.Event) ([]byte, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if ev.Source == "api" {
			r.fetched[ev.EventID]++
			return []byte(`{}`), nil
		}
		return nil, nil
	}
	h.onBatch = func(evs []*payhook.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, ev := range evs {
			r.inBatch[ev.EventID] = true
		}
	}
	db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: workers, Batch: 16, MaxAttempts: 1,
		Fetch: fetch, FetchSource: func(source string) bool { return source == "api" }})
	return db, q, r
}

// TestFetchSourceBatchesTheOthers: with a Fetch that reads the events of
// one source only (FetchSource), that source's events are each read and
// processed alone, and the other sources' are applied in batches, as
// without a Fetch; before, one source with API credentials had every
// event of every source processed alone.
func TestFetchSourceBatchesTheOthers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := &batchHandler{}
		db, q, r := apiQueue(t, dbURL, h, 2)
		mu, fetched, inBatch := &r.mu, r.fetched, r.inBatch
		var evs []*payhook.Event
		for i := range 12 {
			ev := event(fmt.Sprint("evt_", i))
			if i%3 == 0 {
				ev.Source = "api"
			}
			evs = append(evs, ev)
		}
		if _, err := q.Ingest(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		start(t, q)
		processedOnce(t, db, evs)
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			switch {
			case ev.Source == "api" && (fetched[ev.EventID] != 1 || inBatch[ev.EventID]):
				t.Errorf("%s of the source that fetches: read %d times, in a batch %v; want read once, alone",
					ev.EventID, fetched[ev.EventID], inBatch[ev.EventID])
			case ev.Source != "api" && fetched[ev.EventID] != 0:
				t.Errorf("%s of a source that does not fetch: read %d times", ev.EventID, fetched[ev.EventID])
			}
		}
		if h.batches == 0 {
			t.Error("no batch: the events of the source that does not fetch were processed alone")
		}
	})
}

// TestFetchSourceReplaysAndFailures: with FetchSource, a batch that
// fails unguarded and runs again guarded, and replays of both sources'
// events, still read each event of the source that fetches once per
// processing, never in a batch, and leave no job behind.
func TestFetchSourceReplaysAndFailures(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := &batchHandler{fail: "evt_fail"}
		db, q, r := apiQueue(t, dbURL, h, 3)
		mu, fetched, inBatch := &r.mu, r.fetched, r.inBatch
		var evs, ok []*payhook.Event
		for i := range 40 {
			ev := event(fmt.Sprint("evt_", i))
			if i%2 == 0 {
				ev.Source = "api"
			}
			if i == 7 {
				ev.EventID = "evt_fail"
			}
			evs = append(evs, ev)
		}
		if _, err := q.Ingest(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.EventID != "evt_fail" {
				ok = append(ok, ev)
			}
		}
		start(t, q)
		processedOnce(t, db, ok)
		if got := waitDone(t, db, evs[7].ID); got.Status != payhook.StatusFailed {
			t.Errorf("evt_fail %s; want failed", got.Status)
		}
		if _, err := db.SQL.Exec(`DELETE FROM effects`); err != nil {
			t.Fatal(err)
		}
		for _, ev := range ok {
			if err := q.Replay(context.Background(), ev.ID); err != nil {
				t.Fatal(err)
			}
		}
		processedOnce(t, db, ok)
		waitFor(t, "the jobs to end", func() int {
			var n int
			if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event' AND state IN ('available', 'running', 'retryable', 'scheduled')`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return 1
			}
			return -n
		})
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range ok {
			if ev.Source == "api" && (fetched[ev.EventID] != 2 || inBatch[ev.EventID]) {
				t.Errorf("%s: read %d times, in a batch %v; want read twice (processed, replayed), never in a batch",
					ev.EventID, fetched[ev.EventID], inBatch[ev.EventID])
			}
		}
	})
}

// TestFetchLater: a Fetch that returns jobs.Later (a read whose turn under
// the provider's rate limit is far off) gives the worker back: the event
// is tried again later, its attempt neither counted nor failed, and is
// then processed once. Before, such a wait held the worker, and every
// other source's events waited behind a slow provider's turns.
func TestFetchLater(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := &batchHandler{}
		mux := &payhook.Mux{}
		mux.Handle("*", h)
		var mu sync.Mutex
		reads := map[string]int{}
		fetch := func(_ context.Context, ev *payhook.Event) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			if reads[ev.EventID]++; reads[ev.EventID] == 1 {
				return nil, jobs.Later(time.Second, "its turn is later") // the shortest Later
			}
			return []byte(`{}`), nil
		}
		db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 2, MaxAttempts: 1, Fetch: fetch})
		evs := ingestN(t, q, 4)
		start(t, q)
		for _, ev := range evs {
			got := waitDone(t, db, ev.ID)
			// MaxAttempts 1: had the put-off read counted, the event
			// would have failed.
			if got.Status != payhook.StatusProcessed || got.Attempts != 1 || got.LastError != "" || effects(t, db, ev.EventID) != 1 {
				t.Errorf("%s: %s after %d attempts (%q) with %d effects; want processed after 1, no error, 1 effect",
					ev.EventID, got.Status, got.Attempts, got.LastError, effects(t, db, ev.EventID))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			if reads[ev.EventID] != 2 {
				t.Errorf("%s read %d times; want 2 (put off, then read)", ev.EventID, reads[ev.EventID])
			}
		}
	})
}

// TestLaterShowsWaiting: an event put off (a Fetch's Later) shows its
// next attempt as waiting, due when it was put off to; before, it read
// received with no attempt at all.
func TestLaterShowsWaiting(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		mux := &payhook.Mux{}
		mux.HandleFunc("*", effect)
		fetch := func(context.Context, *payhook.Event) ([]byte, error) {
			return nil, jobs.Later(5*time.Minute, "its turn is later")
		}
		_, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1, Fetch: fetch})
		ev := event("evt_later")
		ingest(t, q, ev)
		before := time.Now()
		start(t, q)
		var got []jobs.Attempt
		waitFor(t, "the event put off", func() int {
			var err error
			if got, err = q.Attempts(context.Background(), ev.ID); err != nil {
				t.Fatal(err)
			}
			if len(got) == 1 && got[0].Outcome == "waiting" {
				return 1
			}
			return 0
		})
		if a := got[0]; a.N != 1 || a.At.Before(before.Add(4*time.Minute)) {
			t.Errorf("waiting attempt %+v; want attempt 1 due about 5 minutes on", a)
		}
	})
}
