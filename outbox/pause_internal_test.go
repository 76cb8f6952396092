package outbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestPausedOnlyWhileItsSinkIs: an attempt that found its sink paused
// records its delivery paused only if the sink still is: one resumed
// (ResendTx) between the check and the record stays pending, for the
// sweep to give it a job, instead of waiting for a resume that has come
// and gone.
func TestPausedOnlyWhileItsSinkIs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		o, err := New(Config{DB: db})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.AddFunc("app", nil, func(context.Context, Fact) error { return nil }); err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		f, err := NewFact(OrderPaid, "shop", "ord_1", "ord_1", now, map[string]any{"order_id": "ord_1"})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Emit(ctx, db, tx, o, f, now)
		if err != nil || len(e.Deliveries) != 1 {
			t.Fatalf("emit: %v, %+v", err, e)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		d := &delivery{id: e.Deliveries[0], sink: "app"}
		status := func() string {
			var s string
			if err := db.SQL.QueryRow(`SELECT status FROM payhook_deliveries WHERE id = $1`, d.id).Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		// The attempt saw the sink paused; it was resumed before the record.
		if err := o.record(ctx, d, "paused", Receipt{}, errors.New("sink paused"), 0); err != nil {
			t.Fatal(err)
		}
		if s := status(); s != "pending" {
			t.Fatalf("recorded paused after its sink resumed: %s; want pending", s)
		}
		if _, err := db.SQL.Exec(`INSERT INTO payhook_sinks_paused (sink, paused_at) VALUES ('app', $1)`, db.TimeValue(now)); err != nil {
			t.Fatal(err)
		}
		if err := o.record(ctx, d, "paused", Receipt{}, errors.New("sink paused"), 0); err != nil {
			t.Fatal(err)
		}
		if s := status(); s != "paused" {
			t.Fatalf("recorded while its sink is paused: %s; want paused", s)
		}
	})
}
