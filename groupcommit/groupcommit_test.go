package groupcommit_test

import (
	"context"
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
	"github.com/payhook/payhook/groupcommit"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

// The queue's lock-bounded ingest is what keeps one locked key from
// holding up a batch.
var _ groupcommit.BoundedInbox = (*jobs.Queue)(nil)

// TestConcurrentDeliveriesStoredOnce sends 400 deliveries of 100 events
// (each four times) from 50 goroutines through a committer over a real
// queue: every event is stored once and reported new exactly once, in
// fewer transactions than deliveries. The first commit waits until every
// other goroutine's request is queued, and the second commit must hold
// them all.
func TestConcurrentDeliveriesStoredOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, q := openQueue(t, dbURL)
		counting := &countingInbox{inner: q, gate: make(chan struct{})}
		c := groupcommit.New(counting, groupcommit.Config{})
		defer c.Close()

		var wg sync.WaitGroup
		news := make([]atomic.Int32, 100)
		work := make(chan int, 400)
		for i := range 400 {
			work <- i % 100
		}
		close(work)
		for range 50 {
			wg.Go(func() {
				for i := range work {
					ev := &payhook.Event{Source: "src", EventID: fmt.Sprint("evt_", i), Type: "t",
						ReceivedAt: time.Now(), Payload: []byte(`{}`), Status: payhook.StatusReceived}
					ins, err := c.Ingest(ctx, []*payhook.Event{ev})
					if err != nil {
						t.Error(err)
						return
					}
					if ins[0] {
						news[i].Add(1)
					}
				}
			})
		}
		// The first commit holds the requests queued before it started;
		// the others queue behind it.
		waitUntil(t, "the other requests to queue", c.Queued, func() bool {
			sizes := counting.seen()
			return len(sizes) == 1 && sizes[0]+c.Queued() == 50
		})
		close(counting.gate)
		wg.Wait()
		sizes := counting.seen()
		// A requester freed by the first commit may queue its next
		// delivery before the second batch is taken: at least, not exactly.
		if sizes[0] < 50 && sizes[1] < 50-sizes[0] {
			t.Fatalf("commits of %v events: the second holds %d, want at least the %d requests queued during the first", sizes[:2], sizes[1], 50-sizes[0])
		}
		if len(sizes) >= 400 {
			t.Fatalf("400 deliveries in %d commits, want fewer", len(sizes))
		}
		for i := range news {
			if n := news[i].Load(); n != 1 {
				t.Fatalf("evt_%d reported new %d times, want 1", i, n)
			}
		}
		evs, _ := db.ListEvents(ctx, store.Filter{Limit: 1000})
		var jobsN int
		db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&jobsN)
		if len(evs) != 100 || jobsN != 100 {
			t.Fatalf("%d events and %d jobs stored, want 100 and 100", len(evs), jobsN)
		}
		t.Logf("400 deliveries in %d commits", len(sizes))
	})
}

// countingInbox records the size of each call to inner; its first call
// waits on gate.
type countingInbox struct {
	inner payhook.Inbox
	gate  chan struct{}
	once  sync.Once

	mu    sync.Mutex
	sizes []int
}

func (c *countingInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(evs))
	c.mu.Unlock()
	c.once.Do(func() { <-c.gate })
	return c.inner.Ingest(ctx, evs)
}

func (c *countingInbox) seen() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sizes)
}

// fake is an inbox that records its batches. Its first call waits on
// gate, so that the next requests gather in one batch. A batch holding bad
// fails: with a plain error, or with a *payhook.EventError naming the
// event when named is set. A batch holding locked fails with an
// EventError wrapping payhook.ErrLocked until unlock is closed.
type fake struct {
	gate   chan struct{}
	once   sync.Once
	bad    string
	named  bool
	locked string
	unlock chan struct{}
	calls  atomic.Int32

	mu      sync.Mutex
	batches [][]string
}

func (f *fake) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	f.calls.Add(1)
	f.once.Do(func() { <-f.gate })
	var ids []string
	out := make([]bool, len(evs))
	for i, ev := range evs {
		ids = append(ids, ev.EventID)
		out[i] = true
	}
	f.mu.Lock()
	f.batches = append(f.batches, ids)
	f.mu.Unlock()
	for i, id := range ids {
		switch {
		case id == f.bad && f.named:
			return nil, &payhook.EventError{Index: i, Err: fmt.Errorf("%w: row rejected", payhook.ErrUnavailable)}
		case id == f.bad:
			return nil, fmt.Errorf("%w: row rejected", payhook.ErrUnavailable)
		case id == f.locked && f.unlock != nil:
			select {
			case <-f.unlock:
			default:
				return nil, &payhook.EventError{Index: i, Err: fmt.Errorf("%w: %w", payhook.ErrUnavailable, payhook.ErrLocked)}
			}
		}
	}
	return out, nil
}

func (f *fake) seen() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

// stall is how long a test waits without any progress before it fails.
const stall = time.Minute

// waitUntil polls until cond holds, failing when value (a measure of
// progress) has not moved for stall.
func waitUntil(t *testing.T, what string, value func() int, cond func() bool) {
	t.Helper()
	last, since := value(), time.Now()
	for !cond() {
		if v := value(); v != last {
			last, since = v, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("no progress for %v waiting for %s (at %d)", stall, what, v)
		}
		time.Sleep(time.Millisecond)
	}
}

// gathered starts a committer over f (with cfg), sends evt_first (whose commit waits
// on f.gate) and then one request per id, and opens the gate once all of
// them are queued, so that they are committed as one batch. It returns
// each id's result channel.
func gathered(t *testing.T, f *fake, cfg groupcommit.Config, ids ...string) (*groupcommit.Committer, map[string]chan error) {
	t.Helper()
	c := groupcommit.New(f, cfg)
	t.Cleanup(c.Close)
	ctx := context.Background()
	ingest := func(id string) chan error {
		ch := make(chan error, 1)
		go func() { _, err := c.Ingest(ctx, []*payhook.Event{{Source: "src", EventID: id}}); ch <- err }()
		return ch
	}
	first := ingest("evt_first")
	waitUntil(t, "the first commit to start", c.Queued, func() bool { return f.calls.Load() == 1 })
	out := map[string]chan error{}
	for _, id := range ids {
		out[id] = ingest(id)
	}
	waitUntil(t, "the requests to queue", c.Queued, func() bool { return c.Queued() == len(ids) })
	close(f.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	return c, out
}

// TestOneBadEventFailsAlone: requests that arrive during a commit go
// together into the next one; when it fails, the bad event fails and the
// others are stored: each on its own after a plain error, in one batch
// again after an error that names the event.
// TestNilEventRefused: a nil event is refused before it is queued, as
// jobs.Ingest refuses it, and the committer goes on.
func TestNilEventRefused(t *testing.T) {
	t.Parallel()
	f := &fake{gate: make(chan struct{})}
	close(f.gate)
	c := groupcommit.New(f, groupcommit.Config{})
	t.Cleanup(c.Close)
	ctx := context.Background()
	_, err := c.Ingest(ctx, []*payhook.Event{{Source: "src", EventID: "evt_1"}, nil})
	var evErr *payhook.EventError
	if !errors.Is(err, payhook.ErrInvalid) || !errors.As(err, &evErr) || evErr.Index != 1 || f.calls.Load() != 0 {
		t.Fatalf("Ingest with a nil event = %v (%d calls of the inbox); want an EventError at 1 wrapping ErrInvalid, nothing stored", err, f.calls.Load())
	}
	if ins, err := c.Ingest(ctx, []*payhook.Event{{Source: "src", EventID: "evt_1"}}); err != nil || !slices.Equal(ins, []bool{true}) {
		t.Fatalf("Ingest after = %v, %v; want stored", ins, err)
	}
}

func TestOneBadEventFailsAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		named   bool
		batches [][]string
	}{
		{"plain error", false, [][]string{{"evt_first"}, {"evt_a", "evt_b", "evt_bad"}, {"evt_a"}, {"evt_b"}, {"evt_bad"}}},
		{"event error", true, [][]string{{"evt_first"}, {"evt_a", "evt_b", "evt_bad"}, {"evt_a", "evt_b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{gate: make(chan struct{}), bad: "evt_bad", named: tc.named}
			var mu sync.Mutex
			var tries, committed int
			_, out := gathered(t, f, groupcommit.Config{
				OnCommit: func(evs []*payhook.Event, inserted []bool) {
					mu.Lock()
					defer mu.Unlock()
					if len(inserted) != len(evs) {
						t.Errorf("OnCommit: %d events, %d inserted flags", len(evs), len(inserted))
					}
					committed += len(evs)
				},
				OnCommitTime: func(took time.Duration) {
					mu.Lock()
					defer mu.Unlock()
					if took < 0 {
						t.Errorf("OnCommitTime(%v)", took)
					}
					tries++
				},
			}, "evt_a", "evt_bad", "evt_b")
			for id, ch := range out {
				if err := <-ch; (err != nil) != (id == "evt_bad") {
					t.Errorf("Ingest %s = %v; only evt_bad should fail", id, err)
				}
			}
			// Every try of the inbox is timed, the failed ones too; only
			// the successful ones are counted.
			mu.Lock()
			if tries != len(tc.batches) || committed != 3 {
				t.Errorf("OnCommitTime called %d times, OnCommit for %d events; want %d (one a try) and 3 (evt_first, evt_a, evt_b)",
					tries, committed, len(tc.batches))
			}
			mu.Unlock()
			// The retries one by one go in arrival order, which is the
			// goroutines'.
			got := f.seen()
			byFirst := func(a, b []string) int { return strings.Compare(a[0], b[0]) }
			if len(got) > 2 {
				slices.SortFunc(got[2:], byFirst)
			}
			if !slices.EqualFunc(got, tc.batches, slices.Equal) {
				t.Fatalf("batches %v, want %v", got, tc.batches)
			}
		})
	}
}

// TestLockedEventWaitsAlone: an event locked by another transaction does
// not hold up the others of its batch, which are stored at once without
// it; it is retried alone, and so is a new request for it, until the lock
// goes, and then it is stored.
func TestLockedEventWaitsAlone(t *testing.T) {
	t.Parallel()
	f := &fake{gate: make(chan struct{}), locked: "evt_locked", unlock: make(chan struct{})}
	c, out := gathered(t, f, groupcommit.Config{}, "evt_a", "evt_locked", "evt_b")
	for _, id := range []string{"evt_a", "evt_b"} {
		if err := <-out[id]; err != nil {
			t.Fatalf("Ingest %s = %v while evt_locked is locked", id, err)
		}
	}
	again := make(chan error, 1)
	go func() {
		_, err := c.Ingest(context.Background(), []*payhook.Event{{Source: "src", EventID: "evt_locked"}})
		again <- err
	}()
	// Both requests for the locked key retry alone, and nothing else waits.
	alone := func() int {
		n := 0
		for _, b := range f.seen()[2:] {
			if slices.Equal(b, []string{"evt_locked"}) {
				n++
			}
		}
		return n
	}
	waitUntil(t, "retries of evt_locked", func() int { return len(f.seen()) }, func() bool { return alone() >= 4 })
	select {
	case err := <-out["evt_locked"]:
		t.Fatalf("Ingest evt_locked returned %v while it is locked", err)
	default:
	}
	close(f.unlock)
	for _, ch := range []chan error{out["evt_locked"], again} {
		if err := <-ch; err != nil {
			t.Fatalf("Ingest evt_locked after the unlock = %v", err)
		}
	}
	// The batch without evt_locked and the tries of evt_locked alone run
	// side by side.
	got := f.seen()
	if want := [][]string{{"evt_first"}, {"evt_a", "evt_b", "evt_locked"}}; !slices.EqualFunc(got[:2], want, slices.Equal) {
		t.Fatalf("first batches %v, want %v", got[:2], want)
	}
	rest := 0
	for _, b := range got[2:] {
		switch {
		case slices.Equal(b, []string{"evt_a", "evt_b"}):
			rest++
		case !slices.Equal(b, []string{"evt_locked"}):
			t.Fatalf("batch %v after the lock was seen; only evt_locked alone should be tried (all: %v)", b, got)
		}
	}
	if rest != 1 {
		t.Fatalf("the rest of the batch was committed %d times, want 1 (batches %v)", rest, got)
	}
}

func TestEndedContextAndClose(t *testing.T) {
	t.Parallel()
	f := &fake{gate: make(chan struct{})}
	close(f.gate)
	c := groupcommit.New(f, groupcommit.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Ingest(ctx, []*payhook.Event{{EventID: "evt_1"}}); !errors.Is(err, payhook.ErrUnavailable) {
		t.Fatalf("Ingest with an ended context = %v, want ErrUnavailable", err)
	}
	c.Close()
	if _, err := c.Ingest(context.Background(), []*payhook.Event{{EventID: "evt_1"}}); !errors.Is(err, payhook.ErrUnavailable) {
		t.Fatalf("Ingest after Close = %v, want ErrUnavailable", err)
	}
	// A second Close (a deferred one after a shutdown's) does nothing.
	c.Close()
}

// openQueue opens and migrates the database at dbURL (payhook's schema
// and River's) and returns it with a queue on it (not started).
func openQueue(t *testing.T, dbURL string) (*store.DB, *jobs.Queue) {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	q, err := jobs.New(db, jobs.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return db, q
}
