package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/payhook/payhook/store/storetest"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

var quiet = slog.New(slog.DiscardHandler)

// open opens the database at dbURL with payhook's and the job queue's
// tables, closed when the test ends.
func open(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

func newOutbox(t *testing.T, db *store.DB) *outbox.Outbox {
	t.Helper()
	box, err := outbox.New(outbox.Config{DB: db, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// queue returns a started queue processing the Stripe source "shop" with
// box's sinks, quick retries, and a count of the handler's runs per event
// id; it is stopped when the test ends.
func queue(t *testing.T, db *store.DB, box *outbox.Outbox, runs *counts) *jobs.Queue {
	t.Helper()
	return startQueue(t, db, box, runs, false)
}

// queueFailingFirst is queue whose handler fails the first attempt of
// each event, after billing applied it: the attempt rolls back.
func queueFailingFirst(t *testing.T, db *store.DB, box *outbox.Outbox, runs *counts) *jobs.Queue {
	t.Helper()
	return startQueue(t, db, box, runs, true)
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// startQueue is queue and queueFailingFirst, with tune, if any, changing
// the queue's configuration before it starts.
func startQueue(t *testing.T, db *store.DB, box *outbox.Outbox, runs *counts, failFirst bool, tune ...func(*jobs.Config)) *jobs.Queue {
	t.Helper()
	cfg, err := process.New(process.Config{DB: db, Sources: []payhook.Source{{Name: "shop", Provider: "stripe"}},
		Logger: quiet, Outbox: box})
	if err != nil {
		t.Fatal(err)
	}
	if runs != nil {
		cfg.Handlers.HandleFunc("*", func(_ context.Context, _ *sql.Tx, ev *payhook.Event) error {
			if runs.add(ev.EventID) == 1 && failFirst {
				return errors.New("first attempt fails after billing")
			}
			return nil
		})
	}
	cfg.Backoff = func(int) time.Duration { return 10 * time.Millisecond }
	cfg.DeliveryBackoff = func(int) time.Duration { return 10 * time.Millisecond }
	cfg.PollInterval = 20 * time.Millisecond
	for _, f := range tune {
		f(&cfg)
	}
	q, err := jobs.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		q.Stop(sctx)
		cancel()
	})
	return q
}

// checkouts returns checkout events from to to-1: event evt_i pays
// order ord_i with payment pi_i, 1000 each.
func checkouts(from, to int) []*payhook.Event {
	var evs []*payhook.Event
	for i := from; i < to; i++ {
		evs = append(evs, checkout(fmt.Sprintf("evt_%d", i), fmt.Sprintf("pi_%d", i), fmt.Sprintf("ord_%d", i), 1000))
	}
	return evs
}

// checkout is a Stripe checkout.session.completed event of source "shop"
// paying order with payment pi.
func checkout(id, pi, order string, amount int64) *payhook.Event {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	return &payhook.Event{Source: "shop", EventID: id, Type: "checkout.session.completed", OccurredAt: at, ReceivedAt: at,
		Payload: fmt.Appendf(nil, `{"id":%q,"type":"checkout.session.completed","created":1796115600,"livemode":false,
		"data":{"object":{"id":"cs_%s","object":"checkout.session","mode":"payment","payment_status":"paid",
		"payment_intent":%q,"amount_total":%d,"currency":"usd","metadata":{"order_id":%q}}}}`, id, id, pi, amount, order)}
}

// counts counts by key, safe for concurrent use.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
	return c.m[k]
}

func (c *counts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *counts) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// stallLimit is how long a wait lasts while nothing it watches moves.
const stallLimit = 2 * time.Minute

// waitProgress polls probe until done; it fails only when the mark of
// progress has not changed for stallLimit.
func waitProgress(t testing.TB, what string, probe func() (done bool, mark string)) {
	t.Helper()
	last, moved := "", time.Now()
	for {
		done, mark := probe()
		if done {
			return
		}
		if mark != last {
			last, moved = mark, time.Now()
		} else if time.Since(moved) > stallLimit {
			t.Fatalf("%s: nothing moved for %v (%s)", what, stallLimit, mark)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
