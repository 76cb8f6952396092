package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

func count(t *testing.T, db *store.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestSinkFailingFirstAttempts: a sink that fails its first attempts gets
// every fact after it recovers; the events stay processed and their
// handlers ran once; the delivery log has every attempt.
func TestSinkFailingFirstAttempts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		const failures = 5
		var calls, got counts
		if err := box.AddFunc("app", []string{"order.paid", "payment.*"}, func(_ context.Context, f outbox.Fact) error {
			if calls.add("all") <= failures {
				return errors.New("app down")
			}
			got.add(f.Type + " " + f.Subject)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var runs counts
		q := queue(t, db, box, &runs)
		const n = 4
		evs := checkouts(0, n)
		if _, err := q.Ingest(ctx, evs); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "facts delivered", func() (bool, string) {
			return got.len() == 2*n, fmt.Sprintf("%d calls, %d facts", calls.get("all"), got.len())
		})
		for i, ev := range evs {
			stored, err := db.Event(ctx, ev.ID)
			if err != nil || stored.Status != payhook.StatusProcessed || runs.get(ev.EventID) != 1 {
				t.Errorf("event %d: %v, %v, handler ran %d times; want processed, once", i, stored, err, runs.get(ev.EventID))
			}
		}
		waitProgress(t, "deliveries recorded", func() (bool, string) {
			d := count(t, db, `SELECT count(*) FROM payhook_deliveries WHERE status = 'delivered'`)
			return d == 2*n, fmt.Sprint(d)
		})
		if a := count(t, db, `SELECT count(*) FROM payhook_delivery_attempts`); a != 2*n+failures {
			t.Errorf("delivery log has %d attempts; want %d", a, 2*n+failures)
		}
		if a := count(t, db, `SELECT count(*) FROM payhook_delivery_attempts WHERE error = 'app down'`); a != failures {
			t.Errorf("delivery log has %d failed attempts; want %d", a, failures)
		}
		stats, err := box.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || stats[0].Delivered != 2*n || stats[0].Errors != failures || stats[0].Backlog != 0 || stats[0].Failed != 0 {
			t.Errorf("stats = %+v", stats)
		}
		ds, err := outbox.ListDeliveries(ctx, db, outbox.DeliveryFilter{Sink: "app"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 2*n || ds[0].Status != "delivered" || ds[0].FactID == "" || len(ds[0].Log) != ds[0].Attempts {
			t.Errorf("deliveries = %+v", ds)
		}
	})
}

// TestRollbackSendsNothing: a processing attempt that rolls back after
// billing wrote its facts leaves no fact, no delivery and no job; the
// retry that commits sends each fact once.
func TestRollbackSendsNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var got counts
		if err := box.AddFunc("app", nil, func(_ context.Context, f outbox.Fact) error {
			got.add(f.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var runs counts
		q := queueFailingFirst(t, db, box, &runs)
		ev := checkout("evt_rb", "pi_rb", "ord_rb", 700)
		if _, err := q.Ingest(ctx, []*payhook.Event{ev}); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "facts delivered", func() (bool, string) {
			return got.len() == 2, fmt.Sprint(got.len(), " facts, ", runs.get(ev.EventID), " runs")
		})
		if runs.get(ev.EventID) != 2 {
			t.Fatalf("handler ran %d times; want 2 (one rolled back)", runs.get(ev.EventID))
		}
		for _, table := range []string{"payhook_facts", "payhook_deliveries"} {
			if n := count(t, db, `SELECT count(*) FROM `+table); n != 2 {
				t.Errorf("%s has %d rows; want 2", table, n)
			}
		}
		if n := count(t, db, `SELECT count(*) FROM river_job WHERE kind = 'payhook_deliver'`); n != 2 {
			t.Errorf("%d delivery jobs; want 2", n)
		}
		for id, n := range got.m {
			if n != 1 {
				t.Errorf("fact %s sent %d times", id, n)
			}
		}
	})
}

// TestSweepRoutesUnrouted: facts written by a transaction without an
// outbox (an application applying billing facts itself) are routed and
// delivered by the queue's sweep.
func TestSweepRoutesUnrouted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var got counts
		if err := box.AddFunc("app", []string{"order.*"}, func(_ context.Context, f outbox.Fact) error {
			got.add(f.Type + " " + f.Subject)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := billing.ApplyOutcome(ctx, tx, "shop", []billing.Fact{billing.OrderPaid{OrderID: "ord_s", PaymentRef: "pi_s", At: t0}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		q := queue(t, db, box, nil)
		if _, err := q.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "swept fact delivered", func() (bool, string) { return got.get("order.paid ord_s") == 1, "" })
		if n := count(t, db, `SELECT count(*) FROM payhook_facts WHERE NOT routed`); n != 0 {
			t.Errorf("%d facts still unrouted", n)
		}
		// A fact no sink takes is routed (to nothing) by a sweep that
		// enqueues nothing: its transaction commits all the same.
		tx, err = billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := billing.ApplyOutcome(ctx, tx, "shop", []billing.Fact{billing.Captured{Payment: billing.Payment{
			Ref: "pi_nosink", Amount: 100, Currency: "USD", CapturedAt: t0}}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, `SELECT count(*) FROM payhook_facts WHERE NOT routed`); n != 0 {
			t.Errorf("%d facts still unrouted after a sweep that enqueued nothing", n)
		}
	})
}

// TestSweepNeverEnqueuedFirst: a delivery without an enqueue time (one
// resumed with its paused sink) comes before those enqueued long ago, on
// both engines (PostgreSQL sorts NULL last unless told).
func TestSweepNeverEnqueuedFirst(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		if err := box.AddFunc("app", nil, func(context.Context, outbox.Fact) error { return nil }); err != nil {
			t.Fatal(err)
		}
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []string{"ord_a", "ord_b"} {
			if _, err := billing.ApplyOutcome(ctx, tx.WithOutbox(box), "shop", []billing.Fact{billing.OrderPaid{OrderID: o, PaymentRef: "pi_" + o, At: t0}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		resumed := tx.Deliveries()[1]
		if _, err := db.SQL.ExecContext(ctx, `UPDATE payhook_deliveries SET enqueued_at = NULL WHERE id = $1`, resumed); err != nil {
			t.Fatal(err)
		}
		sweep, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sweep.Rollback()
		later := t0.Add(time.Hour)
		ids, err := box.Sweep(ctx, sweep, later, later, 1)
		if err != nil || len(ids) != 1 || ids[0] != resumed {
			t.Fatalf("Sweep(limit 1) = %v, %v; want [%d], the never enqueued one", ids, err, resumed)
		}
		// Postponed until its retry: left alone until then.
		other := tx.Deliveries()[0]
		if err := box.PostponeSweepTx(ctx, sweep, other, later.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if ids, err := box.Sweep(ctx, sweep, later.Add(time.Minute), later, 10); err != nil || len(ids) != 0 {
			t.Fatalf("Sweep after the postponement = %v, %v; want nothing", ids, err)
		}
	})
}

// TestDeliverUnknownSink: a delivery whose sink this instance does not
// have is retried, failed only at the last attempt.
func TestDeliverUnknownSink(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		writer := newOutbox(t, db)
		if err := writer.AddFunc("crm", nil, func(context.Context, outbox.Fact) error { return nil }); err != nil {
			t.Fatal(err)
		}
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := billing.ApplyOutcome(ctx, tx.WithOutbox(writer), "shop", []billing.Fact{billing.OrderPaid{OrderID: "ord_u", PaymentRef: "pi_u", At: t0}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		id := tx.Deliveries()[0]
		other := newOutbox(t, db) // an instance without the sink
		for _, final := range []bool{false, true} {
			if err := other.Deliver(ctx, id, final); err == nil || !strings.Contains(err.Error(), "not configured") {
				t.Fatalf("Deliver (final %v) = %v; want not configured", final, err)
			}
			ds, err := outbox.ListDeliveries(ctx, db, outbox.DeliveryFilter{})
			want := map[bool]string{false: "pending", true: "failed"}[final]
			if err != nil || ds[0].Status != want {
				t.Fatalf("after Deliver (final %v): %+v, %v; want %s", final, ds, err, want)
			}
		}
	})
}

// unrecordedSink is an Unrecorded sink calling fn.
type unrecordedSink func(context.Context, outbox.Fact) error

func (s unrecordedSink) Send(ctx context.Context, f outbox.Fact) (outbox.Receipt, error) {
	return outbox.Receipt{}, s(ctx, f)
}

func (unrecordedSink) Unrecorded() {}

var _ outbox.Unrecorded = outbox.Log{}

// TestUnrecordedSink: a fact routed only to Unrecorded sinks gets no
// delivery row. It is told after its commit, in a batch or alone, and its
// untold row deleted; one whose telling failed keeps its row, and the
// sweep routes it as a delivery of its own, which leaves no row either
// once sent. Every fact is told.
func TestUnrecordedSink(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var calls, got counts
		if err := box.Add("quiet", []string{"*"}, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			if calls.add("all") == 1 {
				return errors.New("first call fails")
			}
			got.add(f.ID)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		// The periodic sweep waits; the test sweeps when it wants to.
		q := startQueue(t, db, box, nil, false, func(c *jobs.Config) {
			c.SweepInterval, c.SweepAge = time.Hour, time.Nanosecond
		})
		const n = 4
		untold := func() int { return count(t, db, `SELECT count(*) FROM payhook_untold_facts`) }
		// The first call fails: the facts of that telling keep their rows.
		if _, err := q.Ingest(ctx, checkouts(0, n)); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "events processed, facts told or left untold", func() (bool, string) {
			done := count(t, db, `SELECT count(*) FROM payhook_events WHERE status = 'processed'`)
			return done == n && got.len()+untold() == 2*n, fmt.Sprintf("%d processed, %d told, %d untold", done, got.len(), untold())
		})
		if untold() == 0 {
			t.Fatal("no fact left untold after a failed telling")
		}
		// The sink's backlog counts them. A telling may still be under way:
		// wait until both agree (they do not if the backlog leaves them out).
		waitProgress(t, "the backlog counting the untold facts", func() (bool, string) {
			stats, err := box.Stats(ctx)
			if err != nil || len(stats) != 1 {
				t.Fatalf("stats = %+v, %v", stats, err)
			}
			left := untold()
			return stats[0].Backlog == int64(left), fmt.Sprintf("backlog %d, %d untold", stats[0].Backlog, left)
		})
		if d := count(t, db, `SELECT count(*) FROM payhook_deliveries`); d != 0 {
			t.Fatalf("%d deliveries written for an Unrecorded sink", d)
		}
		// The sweep routes them; their deliveries are sent and forgotten.
		waitProgress(t, "untold facts swept and sent", func() (bool, string) {
			if _, err := q.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			d := count(t, db, `SELECT count(*) FROM payhook_deliveries`)
			return got.len() == 2*n && untold() == 0 && d == 0, fmt.Sprintf("%d told, %d untold, %d deliveries", got.len(), untold(), d)
		})
		// From now on every telling succeeds: no delivery is written.
		before := lastDeliveryID(t, db)
		if _, err := q.Ingest(ctx, checkouts(n, 3*n)); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "facts told", func() (bool, string) {
			return got.len() == 6*n && untold() == 0, fmt.Sprintf("%d told, %d untold", got.len(), untold())
		})
		if after := lastDeliveryID(t, db); after != before {
			t.Errorf("deliveries written while every telling succeeded: last id %d, then %d", before, after)
		}
		if f := count(t, db, `SELECT count(*) FROM payhook_facts`); f != 6*n {
			t.Errorf("%d facts stored; want %d", f, 6*n)
		}
		if a := count(t, db, `SELECT count(*) FROM payhook_delivery_attempts`); a != 0 {
			t.Errorf("delivery log has %d attempts; want none", a)
		}
		stats, err := box.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || stats[0].Delivered < 6*n || stats[0].Errors != 1 || stats[0].Backlog != 0 {
			t.Errorf("stats = %+v", stats)
		}
	})
}

// TestUntoldAfterCrash: facts written for an Unrecorded sink by a
// transaction whose process died before telling them are sent by the
// sweep, SweepAge after they were written and not before.
func TestUntoldAfterCrash(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var got counts
		if err := box.Add("log", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			got.add(f.ID)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		tx.WithOutbox(box)
		if err := billing.Apply(ctx, tx, "shop", []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "pi_1",
			OrderID: "ord_1", Amount: 1000, Currency: "USD", CapturedAt: t0}}}); err != nil {
			t.Fatal(errors.Join(err, tx.Rollback()))
		}
		if len(tx.Untold()) != 2 || len(tx.Deliveries()) != 0 {
			t.Fatalf("untold %d, deliveries %v; want 2 facts untold, no delivery", len(tx.Untold()), tx.Deliveries())
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// The process dies here: nobody tells them.
		sweep := func(now time.Time) []int64 {
			t.Helper()
			stx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer stx.Rollback()
			ids, err := box.Sweep(ctx, stx, now, now.Add(-time.Minute), 100)
			if err != nil {
				t.Fatal(err)
			}
			if err := stx.Commit(); err != nil {
				t.Fatal(err)
			}
			return ids
		}
		if ids := sweep(t0.Add(59 * time.Second)); len(ids) != 0 {
			t.Fatalf("swept %v before SweepAge", ids)
		}
		ids := sweep(t0.Add(61 * time.Second))
		if len(ids) != 2 {
			t.Fatalf("swept %v; want the 2 untold facts' deliveries", ids)
		}
		if again := sweep(t0.Add(62 * time.Second)); len(again) != 0 {
			t.Fatalf("swept %v again", again)
		}
		for _, id := range ids {
			if err := box.Deliver(ctx, id, false); err != nil {
				t.Fatal(err)
			}
		}
		if got.len() != 2 || count(t, db, `SELECT count(*) FROM payhook_deliveries`) != 0 ||
			count(t, db, `SELECT count(*) FROM payhook_untold_facts`) != 0 {
			t.Errorf("told %d facts, %d deliveries and %d untold rows left; want 2, 0, 0", got.len(),
				count(t, db, `SELECT count(*) FROM payhook_deliveries`), count(t, db, `SELECT count(*) FROM payhook_untold_facts`))
		}
	})
}

// lastDeliveryID is the id the last delivery ever written took (0 if
// none), deleted or not.
func lastDeliveryID(t *testing.T, db *store.DB) int {
	t.Helper()
	if db.Engine == store.Postgres {
		return count(t, db, `SELECT coalesce((SELECT last_value FROM pg_sequences
			WHERE sequencename = pg_get_serial_sequence('payhook_deliveries', 'id')::regclass::text::name), 0)`)
	}
	return count(t, db, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'payhook_deliveries'), 0)`)
}

// TestSweepWhileABatchSends: deliveries whose jobs waited past the
// sweep's age are taken into another delivery's batch; a sweep that runs
// while the batch sends (another instance's, every 15 s) finds them
// pending and old, but their jobs still live (running), so it gives them
// no second job, and each fact reaches its sink once. Their jobs were
// marked completed at the take: the sweep enqueued each one again and
// the sink got it twice, without any crash.
func TestSweepWhileABatchSends(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		const n = 5
		var sends counts
		var sweeper atomic.Pointer[jobs.Queue]
		var first atomic.Bool
		if err := box.AddFunc("app", nil, func(ctx context.Context, f outbox.Fact) error {
			sends.add(f.ID)
			if first.CompareAndSwap(false, true) {
				if _, err := sweeper.Load().Sweep(ctx); err != nil {
					t.Error(err)
				}
				if again := count(t, db, `SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_deliver' AND state = 'available'`); again != 0 {
					t.Errorf("the sweep gave %d deliveries being sent a second job", again)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		later := t0.Add(2 * time.Minute) // the jobs have waited past the sweep's age
		cfg, err := process.New(process.Config{DB: db, Sources: []payhook.Source{{Name: "shop", Provider: "stripe"}},
			Logger: quiet, Outbox: box, Now: func() time.Time { return later }})
		if err != nil {
			t.Fatal(err)
		}
		other, err := jobs.New(db, cfg) // another instance, never started: its sweep only
		if err != nil {
			t.Fatal(err)
		}
		sweeper.Store(other)
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for i := range n {
			f, err := outbox.NewFact(outbox.OrderPaid, "shop", fmt.Sprint("ord_", i), fmt.Sprint("ord_", i), t0, map[string]any{"order_id": i})
			if err != nil {
				t.Fatal(err)
			}
			e, err := outbox.Emit(ctx, db, tx, box, f, t0)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.Deliveries...)
		}
		if err := other.EnqueueDeliveriesTx(ctx, tx, ids, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// One worker: the first job's batch takes the others.
		startQueue(t, db, box, nil, false, func(c *jobs.Config) {
			c.Now = func() time.Time { return later }
			c.Workers = 1
		})
		waitProgress(t, "deliveries delivered, their jobs ended", func() (bool, string) {
			d := count(t, db, `SELECT COUNT(*) FROM payhook_deliveries WHERE status = 'delivered'`)
			live := count(t, db, `SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_deliver' AND state <> 'completed'`)
			return d == n && live == 0, fmt.Sprint(d, live)
		})
		for _, id := range ids {
			var fact string
			if err := db.SQL.QueryRow(`SELECT f.fact_id FROM payhook_deliveries d JOIN payhook_facts f ON f.id = d.fact WHERE d.id = $1`, id).Scan(&fact); err != nil {
				t.Fatal(err)
			}
			if c := sends.get(fact); c != 1 {
				t.Errorf("delivery %d (fact %s) sent %d times; want once", id, fact, c)
			}
		}
	})
}

// TestSweepStandsInForAStuckDelivery: a delivery whose job a killed
// process left running gets a stand-in from the sweep once the job has
// run longer than any live attempt can (RescueAfter), as an event's does,
// not after River's rescuer (every 30 s, then the job's backoff: 106 s
// after the fact in a helper's chaos run); looked at before, it is left to
// its job, and looked at again the moment it will be stuck.
func TestSweepStandsInForAStuckDelivery(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var sends counts
		if err := box.AddFunc("app", nil, func(_ context.Context, f outbox.Fact) error { sends.add(f.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		var offset atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		cfg, err := process.New(process.Config{DB: db, Sources: []payhook.Source{{Name: "shop", Provider: "stripe"}},
			Logger: quiet, Outbox: box, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		cfg.JobTimeout, cfg.RescueAfter, cfg.SweepAge = time.Second, 10*time.Second, 5*time.Second
		q, err := jobs.New(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := outbox.NewFact(outbox.OrderPaid, "shop", "ord_stuck", "ord_stuck", clock(), map[string]any{"order_id": "ord_stuck"})
		if err != nil {
			t.Fatal(err)
		}
		e, err := outbox.Emit(ctx, db, tx, box, f, clock())
		if err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, e.Deliveries, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// The process that ran the job was killed.
		kill := `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE kind = 'payhook_deliver'`
		if db.Engine == store.SQLite {
			kill = `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = datetime('now', 'subsec') WHERE kind = 'payhook_deliver'`
		}
		if _, err := db.SQL.Exec(kill); err != nil {
			t.Fatal(err)
		}
		deliveryJobs := func() int { return count(t, db, `SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_deliver'`) }
		for _, step := range []struct {
			at   time.Duration
			want int
		}{
			{6 * time.Second, 1},                       // running for 6 s: alive as far as anyone knows
			{8 * time.Second, 1},                       // not looked at again before 10 s
			{10*time.Second + 500*time.Millisecond, 2}, // stuck: its stand-in
			{16 * time.Second, 2},                      // the same stand-in, not a second one
		} {
			offset.Store(int64(step.at))
			if _, err := q.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if n := deliveryJobs(); n != step.want {
				t.Fatalf("sweep %s after the crash: %d delivery jobs; want %d", step.at, n, step.want)
			}
		}
		startQueue(t, db, box, nil, false, func(c *jobs.Config) { c.Now = clock })
		waitProgress(t, "the delivery delivered", func() (bool, string) {
			d := count(t, db, `SELECT COUNT(*) FROM payhook_deliveries WHERE status = 'delivered'`)
			return d == 1, fmt.Sprint(d)
		})
		if n := sends.get(f.ID); n != 1 {
			t.Errorf("the fact was sent %d times; want once", n)
		}
	})
}
