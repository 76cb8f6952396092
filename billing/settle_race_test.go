package billing_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// raceTx is a billing transaction applying facts in a goroutine.
type raceTx struct {
	tx   *billing.Tx
	xid  int64
	done chan error
	out  billing.Outcome
}

func beginRace(t *testing.T, db *store.DB) *raceTx {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, db, t0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	r := &raceTx{tx: tx, done: make(chan error, 1)}
	if err := tx.QueryRowContext(ctx, `SELECT txid_current()`).Scan(&r.xid); err != nil {
		t.Fatal(err)
	}
	return r
}

// start applies facts in r in a goroutine; r.done says when it returned.
func (r *raceTx) start(facts ...billing.Fact) {
	go func() {
		out, err := billing.ApplyOutcome(context.Background(), r.tx, src, facts)
		r.out = out
		r.done <- err
	}()
}

// waitBlockedOn returns once r is waiting for the transaction of xid
// (pg_locks), or has returned; it reports whether r returned (then the
// error is checked).
func (r *raceTx) waitBlockedOn(t *testing.T, db *sql.DB, xid int64) bool {
	t.Helper()
	for {
		select {
		case err := <-r.done:
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			return true
		default:
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'
			AND transactionid::text::bigint = $1`, xid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return false
		}
	}
}

func (r *raceTx) finish(t *testing.T, returned bool) {
	t.Helper()
	if !returned {
		if err := <-r.done; err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	if err := r.tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func applyIn(t *testing.T, r *raceTx, facts ...billing.Fact) {
	t.Helper()
	out, err := billing.ApplyOutcome(context.Background(), r.tx, src, facts)
	if err != nil {
		t.Fatal(err)
	}
	r.out = out
}

// postgresOnly opens the database of dbURL, or returns nil on SQLite,
// whose one writer runs the transactions one after the other: the
// interleavings below cannot happen there.
func postgresOnly(t *testing.T, dbURL string) *store.DB {
	db := openDB(t, dbURL)
	if db.Engine != store.Postgres {
		return nil
	}
	return db
}

// TestSettlementRaceAlertNotLost: a settlement of invoice inv_1 with a
// chain reference that credits another invoice (tx1) and a settlement of
// inv_1 with a fresh reference (tx2) run at once. Applied one after the
// other in either order, tx1 raises an alert (crypto_reference_reused, or
// crypto_second_reference); at once too: when its insert of the rejected
// row finds tx2's, it decides again on that row. It read "no row for
// inv_1" (tx2 not committed) and returned nil, no alert at all.
//
// Interleaving: tx0 settles inv_0 with chain_A (not committed); tx1 starts
// Settled(inv_1, chain_A) and waits on tx0 (the credited chain_ref
// index); tx2 applies Settled(inv_1, chain_B) (not committed); tx0
// commits; tx1's insert gives way, its SELECT of inv_1 finds nothing, its
// "rejected" insert waits on tx2; tx2 commits; tx1 returns and commits.
func TestSettlementRaceAlertNotLost(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := postgresOnly(t, dbURL)
		if db == nil {
			return
		}
		s := func(inv, chain string) billing.Settled {
			return billing.Settled{InvoiceRef: inv, Amount: 5000, Currency: "BTC", ChainRef: chain, At: t0}
		}
		tx0, tx1, tx2 := beginRace(t, db), beginRace(t, db), beginRace(t, db)
		applyIn(t, tx0, s("inv_0", "chain_A"))
		tx1.start(s("inv_1", "chain_A"))
		if tx1.waitBlockedOn(t, db.SQL, tx0.xid) {
			t.Fatal("tx1 did not wait for tx0's chain reference")
		}
		applyIn(t, tx2, s("inv_1", "chain_B"))
		if err := tx0.tx.Commit(); err != nil {
			t.Fatal(err)
		}
		returned := tx1.waitBlockedOn(t, db.SQL, tx2.xid)
		if err := tx2.tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx1.finish(t, returned)

		p, err := billing.GetPayment(context.Background(), db, src, "inv_1")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("inv_1: %s with %s; tx1's outcome: %+v", p.Status, p.ChainRef, tx1.out)
		alerts, err := billing.ListAlerts(context.Background(), db, billing.AlertFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(tx1.out.Alerts) == 0 {
			t.Fatalf("settlement of inv_1 with chain_A (which credits inv_0) raised no alert; alerts: %+v", alerts)
		}
	})
}

// pauseTracer stops a session before a statement starting with prefix:
// it says so on at, and goes on when release is closed.
type pauseTracer struct {
	prefix  string
	at      chan struct{}
	release chan struct{}
	once    sync.Once
}

func (p *pauseTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(strings.TrimSpace(data.SQL), p.prefix) {
		p.once.Do(func() {
			close(p.at)
			<-p.release
		})
	}
	return ctx
}

func (p *pauseTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestSettlementRaceNoFalseReuse: inv_1 is stored rejected (its chain
// reference credits inv_0). Two events settle it with the same fresh
// reference chain_B at once. Applied one after the other, the second is
// "the same settlement again": no alert; at once too: when tx1's
// conditional UPDATE (status = 'rejected') waited on tx2's and changed no
// row, it decides again on the row as it is. It raised
// crypto_reference_reused ("chain reference chain_B credits invoice
// inv_1; invoice inv_1 settled with it again and was not credited").
//
// Interleaving: tx1 runs Settled(inv_1, chain_B) up to its UPDATE (held
// there by a pgx tracer on its own connection, the code untouched); tx2
// applies the same settlement, commits; tx1 goes on and commits.
func TestSettlementRaceNoFalseReuse(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := postgresOnly(t, dbURL)
		if db == nil {
			return
		}
		ctx := context.Background()
		s := func(inv, chain string) billing.Settled {
			return billing.Settled{InvoiceRef: inv, Amount: 5000, Currency: "BTC", ChainRef: chain, At: t0}
		}
		apply(t, db, s("inv_0", "chain_A"))
		apply(t, db, s("inv_1", "chain_A")) // rejected, alert raised
		before, err := billing.ListAlerts(ctx, db, billing.AlertFilter{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgx.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["timezone"] = "UTC"
		pause := &pauseTracer{prefix: "UPDATE payhook_payments\n\t\tSET status = 'settled'", at: make(chan struct{}), release: make(chan struct{})}
		cfg.Tracer = pause
		traced := stdlib.OpenDB(*cfg)
		t.Cleanup(func() { traced.Close() })
		sqltx1, err := traced.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sqltx1.Rollback() })
		tx1 := billing.Wrap(db, sqltx1, t0)
		done := make(chan error, 1)
		var out1 billing.Outcome
		go func() {
			var err error
			out1, err = billing.ApplyOutcome(ctx, tx1, src, []billing.Fact{s("inv_1", "chain_B")})
			done <- err
		}()
		select {
		case <-pause.at: // tx1 read inv_1 rejected and is about to settle it
		case err := <-done:
			t.Fatalf("tx1 returned before its UPDATE: %v", err)
		}
		out2 := apply(t, db, s("inv_1", "chain_B")) // tx2, committed
		close(pause.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := sqltx1.Commit(); err != nil {
			t.Fatal(err)
		}
		after, err := billing.ListAlerts(ctx, db, billing.AlertFilter{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("tx2: %+v; tx1: %+v", out2, out1)
		if len(out1.Alerts) != 0 || len(after) != len(before) {
			t.Fatalf("the same settlement applied twice at once raised %v; alerts before %+v, after %+v",
				out1.Alerts, before, after)
		}
	})
}
