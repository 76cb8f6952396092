package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestClaimPeriod: each (name, period) is claimed once, also by
// concurrent callers; another period or name is another claim.
func TestClaimPeriod(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := db.ClaimPeriod(ctx, "reconcile:shop", t0, t0)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("%d concurrent claims of one period won; want 1", n)
		}
		for _, tc := range []struct {
			name   string
			period time.Time
			want   bool
		}{
			{"reconcile:shop", t0, false},
			{"reconcile:shop", t0.Add(time.Hour), true},
			{"reconcile:other", t0, true},
		} {
			if ok, err := db.ClaimPeriod(ctx, tc.name, tc.period, t0); ok != tc.want || err != nil {
				t.Errorf("ClaimPeriod(%s, %s) = %v, %v; want %v", tc.name, tc.period, ok, err, tc.want)
			}
		}
	})
}

// TestTryHold: a name held is not taken again (on PostgreSQL, not by
// another instance either) until it is released.
func TestTryHold(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		other := db
		if db.Engine == store.Postgres {
			other = openDB(t, dbURL)
		}
		release, ok, err := db.TryHold(ctx, "periodic:x")
		if err != nil || !ok {
			t.Fatalf("first hold: %v, %v", ok, err)
		}
		if _, ok, err := other.TryHold(ctx, "periodic:x"); err != nil || ok {
			t.Fatalf("held twice: %v, %v", ok, err)
		}
		if r, ok, err := other.TryHold(ctx, "periodic:y"); err != nil || !ok {
			t.Fatalf("another name: %v, %v", ok, err)
		} else {
			r()
		}
		release()
		again, ok, err := other.TryHold(ctx, "periodic:x")
		if err != nil || !ok {
			t.Fatalf("after the release: %v, %v", ok, err)
		}
		again()
	})
}

// TestTryHoldAsksItsPeer: on PostgreSQL the session holding the lock has
// the server ask its peer (TCP keepalives) after half a minute of
// silence, so that a holder whose host went away unannounced lets go
// within minutes, not after the system's two hours (every later period
// of the work skipped meanwhile).
func TestTryHoldAsksItsPeer(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		if db.Engine != store.Postgres {
			return
		}
		// One connection: the one the hold had, given back.
		db.SQL.SetMaxOpenConns(1)
		release, ok, err := db.TryHold(ctx, "periodic:x")
		if err != nil || !ok {
			t.Fatalf("hold: %v, %v", ok, err)
		}
		release()
		var idle string
		if err := db.SQL.QueryRowContext(ctx, `SHOW tcp_keepalives_idle`).Scan(&idle); err != nil {
			t.Fatal(err)
		}
		if idle != "30" {
			t.Fatalf("the hold's session had tcp_keepalives_idle %s; want 30 (seconds)", idle)
		}
	})
}
