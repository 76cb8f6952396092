package outbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

// TestPausedOnlyWhileItsSinkIs: an attempt that found its sink paused
// records its delivery paused only if the sink still is: one resumed
// (ResendTx) between the check and the record stays pending, for the
// sweep to give it a job, instead of waiting for a resume that has come
// and gone.
func TestPausedOnlyWhileItsSinkIs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		o, db, emit := pausable(t, dbURL)
		d := &delivery{id: emit("ord_1"), sink: "app"}
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
		if _, err := db.SQL.Exec(`INSERT INTO payhook_sinks_paused (sink, paused_at) VALUES ('app', $1)`, db.TimeValue(pauseNow)); err != nil {
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

// TestPausedWhileResumed: on PostgreSQL (READ COMMITTED) an attempt that
// saw its sink paused records its delivery paused only if the sink still
// is once a concurrent resume (ResendTx) has committed: it waits for the
// resume's delete of the pause row. Read without a lock, the row a resume
// had deleted but not committed still showed; the resume's "paused ->
// pending" had run before and seen the delivery pending, so the delivery
// stayed paused for good (the sweep only picks pending ones).
//
// Interleaving: X = ResendTx(another delivery of the sink), not
// committed; R = record(d1, "paused") runs (it waits for X now; before,
// nothing blocked it and it committed); X commits.
func TestPausedWhileResumed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		o, db, emit := pausable(t, dbURL)
		if db.Engine != store.Postgres {
			return // SQLite's one writer runs the two transactions one after the other
		}
		d0, d1 := emit("ord_0"), emit("ord_1")
		// The sink was paused (a 410) with d0 paused; d1 is pending, its
		// job about to find the sink paused.
		if _, err := db.SQL.Exec(`INSERT INTO payhook_sinks_paused (sink, url, reason, paused_at) VALUES ('app', '', 'gone', $1)`, db.TimeValue(pauseNow)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL.Exec(`UPDATE payhook_deliveries SET status = 'paused' WHERE id = $1`, d0); err != nil {
			t.Fatal(err)
		}
		// d1's attempt: the sink is paused.
		o.mu.RLock()
		r := o.routes["app"]
		o.mu.RUnlock()
		if paused, err := o.paused(ctx, r); err != nil || !paused {
			t.Fatalf("paused: %v %v", paused, err)
		}
		// X: the operator resends d0, which resumes the sink; not committed yet.
		x, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Rollback()
		if err := ResendTx(ctx, db, x, d0, pauseNow.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		// R: d1's attempt records it paused, in its own transaction.
		done := make(chan error, 1)
		go func() {
			done <- o.record(ctx, &delivery{id: d1, sink: "app"}, "paused", Receipt{}, errors.New("sink paused"), 0)
		}()
		// Wait until R has committed, or waits on X's locks: no sleep
		// decides the outcome.
		finished := false
		for !finished {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				finished = true
				continue
			default:
			}
			var waiting int
			if err := db.SQL.QueryRow(`SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting > 0 {
				t.Log("record waits for the resend's transaction")
				break
			}
		}
		if err := x.Commit(); err != nil {
			t.Fatal(err)
		}
		if !finished {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := db.SQL.QueryRow(`SELECT count(*) FROM payhook_sinks_paused WHERE sink = 'app'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		var s string
		if err := db.SQL.QueryRow(`SELECT status FROM payhook_deliveries WHERE id = $1`, d1).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if n == 0 && s == StatusPaused {
			t.Fatalf("sink app resumed (no pause row) but delivery %d is %s: nothing will ever resume it", d1, s)
		}
	})
}

// pausable returns an outbox with a sink "app" on the migrated database
// of dbURL, and emit, which writes an order.paid fact of order with its
// delivery to "app" and returns the delivery's id.
func pausable(t *testing.T, dbURL string) (o *Outbox, db *store.DB, emit func(order string) int64) {
	t.Helper()
	ctx := context.Background()
	db = storetest.Migrated(t, dbURL)
	var err error
	if o, err = New(Config{DB: db}); err != nil {
		t.Fatal(err)
	}
	if err := o.AddFunc("app", nil, func(context.Context, Fact) error { return nil }); err != nil {
		t.Fatal(err)
	}
	emit = func(order string) int64 {
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		f, err := NewFact(OrderPaid, "shop", order, order, pauseNow, map[string]any{"order_id": order})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Emit(ctx, db, tx, o, f, pauseNow)
		if err != nil || len(e.Deliveries) != 1 {
			t.Fatalf("emit: %v, %+v", err, e)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return e.Deliveries[0]
	}
	return o, db, emit
}

// pauseNow is the pause tests' time.
var pauseNow = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
