package outbox_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
)

// TestSlowBatchDeliveriesToldOnce: the deliveries a batch of events
// writes get no job, and its worker sends them just after the commit
// (DeliverMany), for half a SweepAge at most, so that the sweep, which
// enqueues them SweepAge after they were written, never sends one that
// is being sent. That half was counted from the commit, not from the
// writing: a batch whose transaction took 40 s (a lock waited for) left
// its deliveries 40 s old at the commit, and a send that took 25 s of
// its 30 was still under way when the sweep (another instance's, any
// moment) found them 65 s old, pending and without a job: it enqueued
// each, and its job sent the fact a second time, with no crash.
func TestSlowBatchDeliveriesToldOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var mu sync.Mutex
		now := t0
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
		var q *jobs.Queue
		var sends counts
		if err := box.AddFunc("app", nil, func(ctx context.Context, f outbox.Fact) error {
			if sends.add(f.ID) == 1 {
				// The send takes 25 s; meanwhile a sweep runs, and the
				// jobs it enqueued run.
				advance(25 * time.Second)
				if _, err := q.Sweep(ctx); err != nil {
					t.Error(err)
				}
				if _, err := q.Step(ctx); err != nil {
					t.Error(err)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		mux := &payhook.Mux{}
		mux.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			f, err := outbox.NewFact(outbox.OrderPaid, "shop", "ord_"+ev.EventID, "ord_"+ev.EventID, clock(), map[string]any{"order_id": ev.EventID})
			if err != nil {
				return err
			}
			e, err := outbox.Emit(ctx, db, tx, box, f, clock())
			if err != nil {
				return err
			}
			if err := jobs.EnqueueDeliveries(ctx, tx, e.Deliveries); err != nil {
				return err
			}
			advance(40 * time.Second) // the transaction waits 40 s for a lock
			return nil
		})
		var err error
		q, err = jobs.New(db, jobs.Config{Handlers: mux, Now: clock, StampWithNow: true, Logger: quiet,
			Deliver: box.Deliver, DeliverMany: box.DeliverMany, DeliverySweep: box.Sweep, DeliveryPostpone: box.PostponeSweepTx})
		if err != nil {
			t.Fatal(err)
		}
		ev := checkout("evt_slow", "pi_slow", "ord_slow", 1000)
		ev.ReceivedAt = t0
		if _, err := q.Ingest(ctx, []*payhook.Event{ev}); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if _, err := q.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		id := outbox.ID(outbox.OrderPaid, "shop", "ord_evt_slow")
		if n := sends.get(id); n != 1 || sends.len() != 1 {
			t.Fatalf("fact %s told %d times (%d facts told); want once", id, n, sends.len())
		}
	})
}
