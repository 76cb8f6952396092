package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// untoldFacts writes, in a committed transaction at t0, the facts of a
// capture of an order (payment.succeeded, order.paid) for box's
// Unrecorded sinks only, and returns them untold.
func untoldFacts(t *testing.T, db *store.DB, box *outbox.Outbox) []outbox.Untold {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, db, t0)
	if err != nil {
		t.Fatal(err)
	}
	tx.WithOutbox(box)
	if err := billing.Apply(ctx, tx, "shop", []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "pi_1",
		OrderID: "ord_1", Amount: 1000, Currency: "USD", CapturedAt: t0}}}); err != nil {
		t.Fatal(errors.Join(err, tx.Rollback()))
	}
	untold := tx.Untold()
	if len(untold) != 2 || len(tx.Deliveries()) != 0 {
		t.Fatalf("untold %d, deliveries %v; want 2 facts untold, no delivery", len(untold), tx.Deliveries())
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return untold
}

// sweepAt runs box's sweep in a transaction of its own at now, with a
// SweepAge of a minute, and delivers what it routed; it returns how many
// deliveries it routed.
func sweepAt(t *testing.T, db *store.DB, box *outbox.Outbox, now time.Time) int {
	t.Helper()
	ctx := context.Background()
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
	for _, id := range ids {
		if err := box.Deliver(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	return len(ids)
}

// TestTellAfterTheSweep: a Tell that comes more than SweepAge after its
// facts were written (its worker first sent a batch's deliveries to a
// slow webhook, one timeout after the other) finds them routed by the
// sweep already and told by their deliveries: it tells none of them
// again. Tell sent them and then deleted nothing: each fact reached the
// log twice, without any crash.
func TestTellAfterTheSweep(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		late := t0.Add(2 * time.Minute)
		box, err := outbox.New(outbox.Config{DB: db, Logger: quiet, Now: func() time.Time { return late }})
		if err != nil {
			t.Fatal(err)
		}
		var got counts
		if err := box.Add("log", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			got.add(f.Type)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		untold := untoldFacts(t, db, box)
		if n := sweepAt(t, db, box, t0.Add(61*time.Second)); n != 2 {
			t.Fatalf("the sweep routed %d deliveries; want the 2 untold facts'", n)
		}
		if err := box.Tell(ctx, untold); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"payment.succeeded", "order.paid"} {
			if n := got.get(id); n != 1 {
				t.Errorf("%s told %d times; want once", id, n)
			}
		}
		if got.len() != 2 {
			t.Errorf("told %d facts; want 2", got.len())
		}
		if u := count(t, db, `SELECT count(*) FROM payhook_untold_facts`); u != 0 {
			t.Errorf("%d untold rows left", u)
		}
	})
}

// TestSweepWhileTelling: a sweep that runs while Tell sends facts it
// started telling more than SweepAge after they were written (another
// instance's sweep, every 15 s) leaves them to Tell: each is told once,
// and none is left untold. The sweep routed them as Tell sent them, and
// Tell deleted nothing.
func TestSweepWhileTelling(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		late := t0.Add(2 * time.Minute)
		box, err := outbox.New(outbox.Config{DB: db, Logger: quiet, Now: func() time.Time { return late }})
		if err != nil {
			t.Fatal(err)
		}
		var got counts
		var first atomic.Bool
		entered, release := make(chan struct{}), make(chan struct{})
		if err := box.Add("log", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			if first.CompareAndSwap(false, true) {
				close(entered)
				<-release
			}
			got.add(f.Type)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		untold := untoldFacts(t, db, box)
		told := make(chan error, 1)
		go func() { told <- box.Tell(ctx, untold) }()
		<-entered
		swept := sweepAt(t, db, box, late.Add(time.Second))
		close(release)
		if err := <-told; err != nil {
			t.Fatal(err)
		}
		if swept != 0 {
			t.Errorf("the sweep routed %d deliveries of facts being told", swept)
		}
		if n := sweepAt(t, db, box, late.Add(time.Hour)); n != 0 {
			t.Errorf("%d deliveries routed of facts told", n)
		}
		for _, id := range []string{"payment.succeeded", "order.paid"} {
			if n := got.get(id); n != 1 {
				t.Errorf("%s told %d times; want once", id, n)
			}
		}
		if u := count(t, db, `SELECT count(*) FROM payhook_untold_facts`); u != 0 {
			t.Errorf("%d untold rows left", u)
		}
	})
}

// TestSlowWebhookDelaysTell: a batch's worker sends its deliveries to a
// webhook first (DeliverMany: order.paid) and tells the facts routed to
// the log only (payment.succeeded) after; a webhook that answers slowly holds the telling back past
// SweepAge, and the sweep (another instance's) meanwhile routes those
// facts, which the log gets through deliveries. The worker's Tell then
// tells none of them again: each fact reaches the log once.
func TestSlowWebhookDelaysTell(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		var offset atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		box, err := outbox.New(outbox.Config{DB: db, Logger: quiet, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		var logged, hooked counts
		entered, release := make(chan struct{}), make(chan struct{})
		if err := box.AddFunc("app", []string{"order.*"}, func(_ context.Context, f outbox.Fact) error {
			if hooked.add(f.ID) == 1 {
				close(entered)
				<-release // a webhook answering after its timeout, for each of the batch
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := box.Add("log", []string{"payment.*"}, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			logged.add(f.Type)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		tellDone := make(chan struct{})
		q := startQueue(t, db, box, nil, false, func(c *jobs.Config) {
			c.Now = clock
			c.SweepInterval = time.Hour // the test sweeps
			tell := c.AfterCommit
			c.AfterCommit = func(ctx context.Context, items []any) {
				tell(ctx, items)
				close(tellDone)
			}
		})
		if _, err := q.Ingest(ctx, checkouts(0, 1)); err != nil {
			t.Fatal(err)
		}
		<-entered
		// The webhook is slow: SweepAge goes by, and the sweep routes the
		// fact written for the log only (payment.succeeded); a worker
		// delivers it.
		offset.Store(int64(2 * time.Minute))
		if _, err := q.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		const paid = "payment.succeeded"
		waitProgress(t, "the swept fact delivered to the log", func() (bool, string) {
			d := count(t, db, `SELECT count(*) FROM payhook_deliveries WHERE sink = 'log'
				AND fact = (SELECT id FROM payhook_facts WHERE type = $1)`, paid)
			return logged.get(paid) == 1 && d == 0, fmt.Sprintf("logged %d, %d deliveries", logged.get(paid), d)
		})
		close(release)
		<-tellDone
		if n := logged.get(paid); n != 1 {
			t.Errorf("fact %s reached the log %d times; want once", paid, n)
		}
		if u := count(t, db, `SELECT count(*) FROM payhook_untold_facts`); u != 0 {
			t.Errorf("%d untold rows left", u)
		}
	})
}

// TestBatchSendsWithinHalfSweepAge: the deliveries a batch wrote get no
// job; its worker sends them just after the commit (DeliverMany), for
// half a SweepAge at most, and gives those it did not send a job. A
// webhook that does not answer holds the batch until then; a sweep that
// runs meanwhile, once SweepAge has gone by (its clock jumps), gives the
// batch's deliveries jobs, and the log's is sent by its job, never by the
// batch after that: each fact reaches the log once. The batch sent for as
// long as its job's JobTimeout, and then sent the log's delivery too,
// which its job had sent: twice, without any crash.
func TestBatchSendsWithinHalfSweepAge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		var logged, hooked counts
		entered := make(chan struct{})
		if err := box.AddFunc("app", []string{"order.*"}, func(ctx context.Context, f outbox.Fact) error {
			if hooked.add(f.Type) == 1 {
				close(entered)
				<-ctx.Done() // no answer: the batch's time ends the attempt
				return ctx.Err()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := box.Add("log", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			logged.add(f.Type)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		var offset atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		var told atomic.Bool
		q := startQueue(t, db, box, nil, false, func(c *jobs.Config) {
			c.Now = clock
			c.SweepInterval = time.Hour // the test sweeps
			c.SweepAge, c.JobTimeout = 400*time.Millisecond, 3*time.Second
			tell := c.AfterCommit
			c.AfterCommit = func(ctx context.Context, items []any) {
				tell(ctx, items)
				told.Store(true)
			}
		})
		if _, err := q.Ingest(ctx, checkouts(0, 1)); err != nil {
			t.Fatal(err)
		}
		<-entered
		offset.Store(int64(time.Second)) // the sweep's clock: past SweepAge
		if _, err := q.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "deliveries sent, facts told", func() (bool, string) {
			p := count(t, db, `SELECT count(*) FROM payhook_deliveries WHERE status = 'pending'`)
			live := count(t, db, `SELECT count(*) FROM river_job WHERE kind = 'payhook_deliver' AND state NOT IN ('completed', 'discarded', 'cancelled')`)
			return p == 0 && live == 0 && told.Load() && hooked.get("order.paid") == 2,
				fmt.Sprintf("%d pending, %d live jobs, told %v, %d webhook calls", p, live, told.Load(), hooked.get("order.paid"))
		})
		for _, typ := range []string{"order.paid", "payment.succeeded"} {
			if n := logged.get(typ); n != 1 {
				t.Errorf("%s reached the log %d times; want once", typ, n)
			}
		}
	})
}

// TestDeliverManyStopsAtItsEnd: DeliverMany sends nothing once its
// context is done (the job's JobTimeout), even to a sink that would not
// look at it (Log): those deliveries are left to a job of their own.
func TestDeliverManyStopsAtItsEnd(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		dctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var sent counts
		if err := box.Add("log", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			sent.add(f.Subject)
			cancel() // the job's time is up
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for i := range 3 {
			f, err := outbox.NewFact(outbox.OrderPaid, "shop", fmt.Sprint("ord_", i), fmt.Sprint("ord_", i), t0, map[string]any{"order_id": i})
			if err != nil {
				t.Fatal(err)
			}
			// Routed as the sweep routes it: a delivery.
			e, err := outbox.Emit(ctx, db, tx, nil, f, t0)
			if err != nil || !e.Written {
				t.Fatal(e, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		stx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ids, err = box.Sweep(ctx, stx, t0, t0, 10); err != nil || len(ids) != 3 {
			t.Fatal(ids, err)
		}
		if err := stx.Commit(); err != nil {
			t.Fatal(err)
		}
		errs, record := box.DeliverMany(dctx, ids)
		if sent.len() != 1 {
			t.Errorf("sent %d deliveries; want 1, none after the end", sent.len())
		}
		if errs[0] != nil || errs[1] == nil || errs[2] == nil {
			t.Errorf("errs = %v; want the first delivered, the others left", errs)
		}
		if record == nil {
			t.Fatal("no record")
		}
	})
}

// TestTellOneSinkFailing: of two Unrecorded sinks taking a fact, one
// fails while Tell tells it: the other is not told it again. The fact's
// untold row made the sweep route it to both, and the sink that had taken
// it got it twice, without any crash.
func TestTellOneSinkFailing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box, err := outbox.New(outbox.Config{DB: db, Logger: quiet, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		var a, b counts
		if err := box.Add("a", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			a.add(f.Type)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		var failed atomic.Bool
		if err := box.Add("b", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			if failed.CompareAndSwap(false, true) {
				return errors.New("b down")
			}
			b.add(f.Type)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		untold := untoldFacts(t, db, box)
		if err := box.Tell(ctx, untold); err != nil {
			t.Fatal(err)
		}
		if n := sweepAt(t, db, box, t0.Add(2*time.Minute)); n != 2 {
			t.Errorf("the sweep routed %d deliveries; want b's 2", n)
		}
		for _, typ := range []string{"payment.succeeded", "order.paid"} {
			if n := a.get(typ); n != 1 {
				t.Errorf("%s told to a %d times; want once", typ, n)
			}
			if n := b.get(typ); n != 1 {
				t.Errorf("%s told to b %d times; want once", typ, n)
			}
		}
		if u := count(t, db, `SELECT count(*) FROM payhook_untold_facts`); u != 0 {
			t.Errorf("%d untold rows left", u)
		}
	})
}
