package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/groupcommit"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// TestConcurrentDeliveriesStoredOnce sends 400 deliveries of 100 events
// (each four times) from 50 goroutines through a committer over a real
// queue: every event is stored once and reported new exactly once, in
// fewer transactions than deliveries.
func TestConcurrentDeliveriesStoredOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := jobs.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		q, err := jobs.New(db, jobs.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		counting := &countingInbox{inner: q}
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
		wg.Wait()
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
		t.Logf("400 deliveries in %d commits", counting.calls.Load())
	})
}

type countingInbox struct {
	inner groupcommit.Inbox
	calls atomic.Int32
}

func (c *countingInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	c.calls.Add(1)
	return c.inner.Ingest(ctx, evs)
}

// poisoned fails any call that holds the event "evt_bad", and blocks the
// first call until released, so that the next requests gather in one
// batch.
type poisoned struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	batches [][]string
}

func (p *poisoned) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	p.once.Do(func() { <-p.release })
	var ids []string
	out := make([]bool, len(evs))
	for i, ev := range evs {
		ids = append(ids, ev.EventID)
		out[i] = true
	}
	p.mu.Lock()
	p.batches = append(p.batches, ids)
	p.mu.Unlock()
	for _, id := range ids {
		if id == "evt_bad" {
			return nil, errors.New("row rejected")
		}
	}
	return out, nil
}

// TestOneBadEventFailsAlone: a batch that fails is retried request by
// request, so the bad event fails and the others are stored.
func TestOneBadEventFailsAlone(t *testing.T) {
	t.Parallel()
	p := &poisoned{release: make(chan struct{})}
	c := groupcommit.New(p, groupcommit.Config{})
	defer c.Close()
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { _, err := c.Ingest(ctx, []*payhook.Event{{EventID: "evt_first"}}); first <- err }()
	time.Sleep(50 * time.Millisecond) // the first commit is under way and blocked
	errs := make(chan error, 3)
	for _, id := range []string{"evt_a", "evt_bad", "evt_b"} {
		go func() { _, err := c.Ingest(ctx, []*payhook.Event{{EventID: id}}); errs <- err }()
	}
	time.Sleep(50 * time.Millisecond) // the three wait for the next commit
	close(p.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range 3 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d of 3 requests failed, want only the bad one (batches %v)", failed, p.batches)
	}
}

func TestEndedContextAndClose(t *testing.T) {
	t.Parallel()
	p := &poisoned{release: make(chan struct{})}
	close(p.release)
	c := groupcommit.New(p, groupcommit.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Ingest(ctx, []*payhook.Event{{EventID: "evt_1"}}); !errors.Is(err, payhook.ErrUnavailable) {
		t.Fatalf("Ingest with an ended context = %v, want ErrUnavailable", err)
	}
	c.Close()
	if _, err := c.Ingest(context.Background(), []*payhook.Event{{EventID: "evt_1"}}); !errors.Is(err, payhook.ErrUnavailable) {
		t.Fatalf("Ingest after Close = %v, want ErrUnavailable", err)
	}
}
