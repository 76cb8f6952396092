package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
)

// TestResendOfAWaitingDeliveryTellsOnce: an operator resends a delivery
// whose job has not run yet (payhook deliveries resend: a second job, at
// once). Run one after the other, the second job finds the delivery
// delivered and sends nothing: the sink is told once. The first job's
// batch of first attempts (DeliverMany) took the second job with it and
// sent the one delivery twice in one call, the second send reading the
// delivery as it was before the first.
func TestResendOfAWaitingDeliveryTellsOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var sends counts
		if err := box.AddFunc("app", nil, func(_ context.Context, f outbox.Fact) error { sends.add(f.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		now := t0
		cfg, err := process.New(process.Config{DB: db, Sources: []payhook.Source{{Name: "shop", Provider: "stripe"}},
			Logger: quiet, Outbox: box, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		cfg.StampWithNow = true
		q, err := jobs.New(db, cfg) // never started: Step runs its jobs
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := outbox.NewFact(outbox.OrderPaid, "shop", "ord_1", "ord_1", now, map[string]any{"order_id": "ord_1"})
		if err != nil {
			t.Fatal(err)
		}
		e, err := outbox.Emit(ctx, db, tx, box, f, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, e.Deliveries, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// The resend, while the delivery's job still waits.
		now = now.Add(time.Second)
		tx, err = db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := outbox.ResendTx(ctx, db, tx, e.Deliveries[0], now); err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, e.Deliveries, true); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := q.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if c := sends.get(f.ID); c != 1 {
			t.Fatalf("the sink was told fact %s %d times; want once", f.ID, c)
		}
	})
}
