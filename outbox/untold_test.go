package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// TestTellBatchInPart: the facts one EmitMany writes for Unrecorded sinks
// are held by one row, whatever their number. A Tell that reaches only
// some of them replaces that row with what is left: a row per fact no
// sink took, a pending delivery per sink a fact missed. The sweep sends
// what is left SweepAge after the claim, and no sink gets a fact twice.
func TestTellBatchInPart(t *testing.T) {
	const n = 5
	cases := []struct {
		name string
		// fails reports whether sink ("a" or "b") fails its call-th call
		// (from 1).
		fails func(sink string, call int64) bool
		// tell is how many of the batch's facts Tell is given.
		tell int
		// The rows left after Tell: facts held by the batch's row, facts
		// in rows of their own, pending deliveries.
		held, alone, pending int
	}{
		{name: "told", fails: func(string, int64) bool { return false }, tell: n},
		{name: "nothing told", fails: func(_ string, call int64) bool { return call == 1 }, tell: n, held: n},
		{name: "a sink down after the first fact", fails: func(sink string, call int64) bool { return call == 2 },
			tell: n, alone: n - 1},
		{name: "one of two sinks down", fails: func(sink string, call int64) bool { return sink == "b" && call == 1 },
			tell: n, pending: n},
		{name: "told some of its facts", fails: func(string, int64) bool { return false }, tell: 2, alone: n - 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := open(t, dbURL)
				box, got := twoSinks(t, db, c.fails)
				untold := emitUntold(t, db, box, 0, n)
				if rows := count(t, db, `SELECT count(*) FROM payhook_untold_batches`); rows != 1 {
					t.Fatalf("%d facts held by %d rows; want 1", n, rows)
				}
				if err := box.Tell(ctx, untold[:c.tell]); err != nil {
					t.Fatal(err)
				}
				held := count(t, db, `SELECT count(*) FROM payhook_untold_facts u
					WHERE NOT EXISTS (SELECT 1 FROM payhook_untold o WHERE o.fact = u.fact)`)
				alone := count(t, db, `SELECT count(*) FROM payhook_untold`)
				pending := count(t, db, `SELECT count(*) FROM payhook_deliveries WHERE status = 'pending'`)
				if held != c.held || alone != c.alone || pending != c.pending {
					t.Fatalf("after Tell: %d facts held by the batch, %d alone, %d deliveries pending; want %d, %d, %d",
						held, alone, pending, c.held, c.alone, c.pending)
				}
				// Left to the sweep: not before SweepAge after the claim.
				if routed := sweepAt(t, db, box, t0.Add(59*time.Second)); routed != 0 {
					t.Fatalf("the sweep routed %d deliveries before SweepAge", routed)
				}
				sweepAt(t, db, box, t0.Add(2*time.Minute))
				toldOnceEach(t, db, got, n)
			})
		})
	}
}

// twoSinks returns an outbox at t0 with Unrecorded sinks a and b, which
// count the facts each took, and fail a call when fails(sink, call) (from
// 1) says so.
func twoSinks(t *testing.T, db *store.DB, fails func(sink string, call int64) bool) (*outbox.Outbox, map[string]*counts) {
	t.Helper()
	box, err := outbox.New(outbox.Config{DB: db, Logger: quiet, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*counts{"a": {}, "b": {}}
	for _, sink := range []string{"a", "b"} {
		var calls atomic.Int64
		if err := box.Add(sink, nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			if fails(sink, calls.Add(1)) {
				return errors.New(sink + " down")
			}
			got[sink].add(f.ID)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
	}
	return box, got
}

// toldOnceEach checks that each of fact_0 to fact_n-1 was told once to
// each sink of got, and that no fact is left untold and no delivery.
func toldOnceEach(t *testing.T, db *store.DB, got map[string]*counts, n int) {
	t.Helper()
	for sink, c := range got {
		for i := range n {
			if k := c.get(fmt.Sprintf("fact_%d", i)); k != 1 {
				t.Errorf("fact_%d told to %s %d times; want once", i, sink, k)
			}
		}
	}
	if u, d := count(t, db, `SELECT count(*) FROM payhook_untold_facts`), count(t, db, `SELECT count(*) FROM payhook_deliveries`); u != 0 || d != 0 {
		t.Errorf("%d facts untold, %d deliveries left", u, d)
	}
}

// emitUntold writes n order.paid facts, fact_from to fact_from+n-1, with
// EmitMany for box's Unrecorded sinks in a committed transaction at t0
// (one row holds them), and returns them untold.
func emitUntold(t *testing.T, db *store.DB, box *outbox.Outbox, from, n int) []outbox.Untold {
	t.Helper()
	ctx := context.Background()
	var facts []outbox.Fact
	for i := from; i < from+n; i++ {
		o := fmt.Sprintf("ord_%d", i)
		f, err := outbox.NewFact(outbox.OrderPaid, "shop", o, o, t0, map[string]string{"order_id": o})
		if err != nil {
			t.Fatal(err)
		}
		f.ID = fmt.Sprintf("fact_%d", i)
		facts = append(facts, f)
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	es, err := outbox.EmitMany(ctx, db, tx, box, facts, t0)
	if err != nil {
		t.Fatal(err)
	}
	var untold []outbox.Untold
	for _, e := range es {
		if e.Untold == nil {
			t.Fatalf("emitted %+v; want an untold fact", e)
		}
		untold = append(untold, *e.Untold)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return untold
}

// TestTellUntoldGivenTwice: an Untold given to Tell twice (the same
// transaction's facts handed on twice, two lists joined) is told once: a
// sink that took it does not get it again, and what Tell did not tell the
// sweep sends once.
func TestTellUntoldGivenTwice(t *testing.T) {
	const n = 3
	cases := []struct {
		name string
		// tell is what Tell is given of the batch's facts.
		tell func(u []outbox.Untold) []outbox.Untold
	}{
		{name: "each once", tell: func(u []outbox.Untold) []outbox.Untold { return u }},
		{name: "each twice in a row", tell: func(u []outbox.Untold) []outbox.Untold {
			var out []outbox.Untold
			for _, x := range u {
				out = append(out, x, x)
			}
			return out
		}},
		{name: "the list twice", tell: func(u []outbox.Untold) []outbox.Untold { return append(append([]outbox.Untold(nil), u...), u...) }},
		{name: "one of them twice, the others not", tell: func(u []outbox.Untold) []outbox.Untold { return []outbox.Untold{u[0], u[0]} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := open(t, dbURL)
				box, got := twoSinks(t, db, func(string, int64) bool { return false })
				untold := emitUntold(t, db, box, 0, n)
				if err := box.Tell(ctx, c.tell(untold)); err != nil {
					t.Fatal(err)
				}
				sweepAt(t, db, box, t0.Add(2*time.Minute))
				toldOnceEach(t, db, got, n)
			})
		})
	}
}

// TestTellRacesTheSweep: writers emit batches of untold facts and tell
// them while a sweep with no age at all routes and delivers whatever it
// finds, claimed or not, and the sink fails a quarter of its calls until
// the writers are done. Every fact is told at least once, and nothing is
// left untold or pending once the sweep has drained the rest.
func TestTellRacesTheSweep(t *testing.T) {
	const writers, txs, per = 3, 15, 4
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box, err := outbox.New(outbox.Config{DB: db, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		var got counts
		var calls atomic.Int64
		var failing atomic.Bool
		failing.Store(true)
		if err := box.Add("log", nil, unrecordedSink(func(_ context.Context, f outbox.Fact) error {
			if failing.Load() && calls.Add(1)%4 == 0 {
				return errors.New("log down")
			}
			got.add(f.ID)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		// sweep routes what it finds and delivers it, SweepAge 0.
		sweep := func() {
			now := time.Now()
			stx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer stx.Rollback()
			ids, err := box.Sweep(ctx, stx, now, now, 100)
			if err != nil {
				t.Error(err)
				return
			}
			if err := stx.Commit(); err != nil {
				t.Error(err)
				return
			}
			for _, id := range ids {
				box.Deliver(ctx, id, false) // a failed one stays pending
			}
		}
		// Two sweeps, as two instances run.
		stop := make(chan struct{})
		var sweeps sync.WaitGroup
		for range 2 {
			sweeps.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						sweep()
					}
				}
			})
		}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range txs {
					var facts []outbox.Fact
					for k := range per {
						ord := fmt.Sprintf("ord_%d_%d_%d", w, i, k)
						f, err := outbox.NewFact(outbox.OrderPaid, "shop", ord, ord, t0, map[string]string{"order_id": ord})
						if err != nil {
							t.Error(err)
							return
						}
						facts = append(facts, f)
					}
					untold, err := emitCommitted(ctx, db, box, facts)
					if err != nil {
						t.Error(err)
						return
					}
					box.Tell(ctx, untold) // a failure leaves them to the sweep
				}
			})
		}
		wg.Wait()
		close(stop)
		sweeps.Wait()
		failing.Store(false)
		waitProgress(t, "the rest swept and told", func() (bool, string) {
			sweep()
			u := count(t, db, `SELECT count(*) FROM payhook_untold_facts`)
			d := count(t, db, `SELECT count(*) FROM payhook_deliveries WHERE status = 'pending'`)
			return u == 0 && d == 0, fmt.Sprintf("%d told, %d untold, %d pending", got.len(), u, d)
		})
		if n := got.len(); n != writers*txs*per {
			t.Errorf("%d facts told; want %d", n, writers*txs*per)
		}
	})
}

// emitCommitted writes facts with EmitMany for box's sinks in a
// transaction of their own, commits it, and returns them untold.
func emitCommitted(ctx context.Context, db *store.DB, box *outbox.Outbox, facts []outbox.Fact) ([]outbox.Untold, error) {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	es, err := outbox.EmitMany(ctx, db, tx, box, facts, time.Now())
	if err != nil {
		return nil, err
	}
	var untold []outbox.Untold
	for _, e := range es {
		if e.Untold != nil {
			untold = append(untold, *e.Untold)
		}
	}
	return untold, tx.Commit()
}
