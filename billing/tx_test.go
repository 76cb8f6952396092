package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

// A write without a transaction is an error, never a panic.
func TestNoTransaction(t *testing.T) {
	ctx := context.Background()
	f := billing.Captured{Payment: pay("pay_1", "", 100, "USD")}
	for name, tx := range map[string]*billing.Tx{
		"nil":           nil,
		"no sql.Tx":     billing.Wrap(nil, nil, t0),
		"zero value Tx": {},
	} {
		if err := billing.Apply(ctx, tx, src, []billing.Fact{f}); err == nil {
			t.Errorf("Apply(%s) = nil; want an error", name)
		}
		if err := billing.RaiseAlert(ctx, tx, billing.AlertEventFailed, "evt_1", "boom"); err == nil {
			t.Errorf("RaiseAlert(%s) = nil; want an error", name)
		}
	}
}

// Every row a transaction writes is stamped with its time, not the clock.
func TestTxTime(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		at := t0.Add(42 * time.Hour)
		tx, err := billing.Begin(ctx, db, at)
		if err != nil {
			t.Fatal(err)
		}
		if !tx.Now().Equal(at) {
			t.Fatalf("Now() = %v; want %v", tx.Now(), at)
		}
		if err := billing.Apply(ctx, tx, src, []billing.Fact{billing.Captured{Payment: pay("pay_1", "", 100, "USD")}}); err != nil {
			t.Fatal(err)
		}
		if err := billing.RaiseAlert(ctx, tx, billing.AlertEventFailed, "evt_1", "boom"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if p := payment(t, db, "pay_1"); !p.CreatedAt.Equal(at) || !p.UpdatedAt.Equal(at) {
			t.Errorf("payment created %v, updated %v; want %v", p.CreatedAt, p.UpdatedAt, at)
		}
		if ps := postings(t, db, src, "pay_1"); len(ps) != 1 || !ps[0].PostedAt.Equal(at) {
			t.Errorf("postings = %+v; want one posted at %v", ps, at)
		}
		if as := alerts(t, db); len(as) != 1 || !as[0].FirstSeen.Equal(at) {
			t.Errorf("alerts = %+v; want one first seen at %v", as, at)
		}
	})
}
