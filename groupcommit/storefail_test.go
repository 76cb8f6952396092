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
