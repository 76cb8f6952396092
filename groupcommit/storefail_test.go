package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/groupcommit"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
)

// TestStoreFailureAnswersTheBatchAtOnce: when the store refuses every
// transaction as a whole (here River's job table is gone, so every enqueue
// fails; a full disk fails every commit the same way), a batch of
// deliveries costs one transaction and each delivery gets the store's
// error, instead of one failing transaction per delivery, run one after
// another while the others wait to their deadline (on a full disk, 503s
// came at the 5 s store timeout and many deliveries got no answer).
func TestStoreFailureAnswersTheBatchAtOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, q := openQueue(t, dbURL)
		if _, err := db.SQL.Exec(`ALTER TABLE river_job RENAME TO river_job_away`); err != nil {
			t.Fatal(err)
		}
		inbox := &gatedInbox{inner: q, gate: make(chan struct{})}
		c := groupcommit.New(inbox, groupcommit.Config{})
		defer c.Close()

		const n = 20
		errs := make(chan error, n+1)
		ingest := func(i int) {
			ev := &payhook.Event{Source: "src", EventID: fmt.Sprint("evt_", i), Type: "t",
				ReceivedAt: time.Now(), Payload: []byte(`{}`), Status: payhook.StatusReceived}
			_, err := c.Ingest(ctx, []*payhook.Event{ev})
			errs <- err
		}
		// The first commit waits at the gate while the others queue, so
		// that they are committed as one batch.
		go ingest(n)
		waitFor(t, "the first commit", func() bool { return inbox.calls.Load() == 1 })
		for i := range n {
			go ingest(i)
		}
		waitFor(t, "the deliveries to queue", func() bool { return c.Queued() == n })
		close(inbox.gate)
		for range n + 1 {
			err := <-errs
			if !errors.Is(err, payhook.ErrUnavailable) || !groupcommit.WholeBatch(err) {
				t.Fatalf("Ingest while the store fails = %v, want the store's error (ErrUnavailable, WholeBatch)", err)
			}
		}
		if got := inbox.calls.Load(); got != 2 {
			t.Fatalf("%d transactions for the first delivery and a batch of %d, want 2", got, n)
		}

		if _, err := db.SQL.Exec(`ALTER TABLE river_job_away RENAME TO river_job`); err != nil {
			t.Fatal(err)
		}
		ev := &payhook.Event{Source: "src", EventID: "evt_0", Type: "t", ReceivedAt: time.Now(), Payload: []byte(`{}`),
			Status: payhook.StatusReceived}
		if ins, err := c.Ingest(ctx, []*payhook.Event{ev}); err != nil || !ins[0] {
			t.Fatalf("Ingest once the store works again = %v, %v; want stored", ins, err)
		}
	})
}

// gatedInbox counts the transactions of the queue it wraps; the first
// waits for gate.
type gatedInbox struct {
	inner *jobs.Queue
	gate  chan struct{}
	once  sync.Once
	calls atomic.Int32
}

func (g *gatedInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	return g.IngestBounded(ctx, evs)
}

func (g *gatedInbox) IngestBounded(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	g.calls.Add(1)
	g.once.Do(func() { <-g.gate })
	return g.inner.IngestBounded(ctx, evs)
}

// waitFor polls cond; nothing it watches moves meanwhile but the
// goroutines it waits for, so it fails only after a long while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// TestFailingStoreAnswersAtOnce: once a commit failed because the store
// fails as a whole, deliveries that arrive while the next commit is under
// way get the store's error at once instead of waiting behind it; the
// store is tried again by the next delivery that finds no commit running,
// and once that succeeds deliveries are stored again.
func TestFailingStoreAnswersAtOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, q := openQueue(t, dbURL)
		inbox := &heldInbox{inner: q}
		c := groupcommit.New(inbox, groupcommit.Config{})
		defer c.Close()
		ev := func(id string) []*payhook.Event {
			return []*payhook.Event{{Source: "src", EventID: id, Type: "t", ReceivedAt: time.Now(),
				Payload: []byte(`{}`), Status: payhook.StatusReceived}}
		}
		storeFails := func(err error) bool {
			return errors.Is(err, payhook.ErrUnavailable) && groupcommit.WholeBatch(err)
		}

		if _, err := db.SQL.Exec(`ALTER TABLE river_job RENAME TO river_job_away`); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Ingest(ctx, ev("evt_1")); !storeFails(err) {
			t.Fatalf("Ingest while the store fails = %v, want the store's error", err)
		}
		// The next commit (the store tried again) waits at the gate while
		// more deliveries arrive.
		gate := inbox.holdNext()
		release := sync.OnceFunc(func() { close(gate) })
		defer release() // before Close, which waits for the held commit
		probe := make(chan error, 1)
		go func() { _, err := c.Ingest(ctx, ev("evt_2")); probe <- err }()
		waitFor(t, "the commit that tries the store again", func() bool { return inbox.calls.Load() == 2 })
		const n = 10
		errs := make(chan error, n)
		for i := range n {
			go func() { _, err := c.Ingest(ctx, ev(fmt.Sprint("evt_more_", i))); errs <- err }()
		}
		for range n {
			var err error
			waitFor(t, "the deliveries that arrive during that commit to be answered", func() bool {
				select {
				case err = <-errs:
					return true
				default:
					return false
				}
			})
			if !storeFails(err) {
				t.Fatalf("Ingest during a commit while the store fails = %v, want the store's error at once", err)
			}
		}
		if got := inbox.calls.Load(); got != 2 {
			t.Fatalf("%d transactions, want 2: the deliveries during the commit should not be tried", got)
		}
		release()
		if err := <-probe; !storeFails(err) {
			t.Fatalf("Ingest of the commit that tried the store again = %v, want the store's error", err)
		}

		if _, err := db.SQL.Exec(`ALTER TABLE river_job_away RENAME TO river_job`); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"evt_1", "evt_2"} {
			if ins, err := c.Ingest(ctx, ev(id)); err != nil || !ins[0] {
				t.Fatalf("Ingest %s once the store works again = %v, %v; want stored", id, ins, err)
			}
		}
	})
}

// heldInbox counts the transactions of the queue it wraps; the one after
// holdNext waits until the returned channel is closed.
type heldInbox struct {
	inner *jobs.Queue
	calls atomic.Int32
	mu    sync.Mutex
	hold  chan struct{}
}

func (h *heldInbox) holdNext() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = make(chan struct{})
	return h.hold
}

func (h *heldInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	return h.IngestBounded(ctx, evs)
}

func (h *heldInbox) IngestBounded(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	h.calls.Add(1)
	h.mu.Lock()
	hold := h.hold
	h.hold = nil
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return h.inner.IngestBounded(ctx, evs)
}
