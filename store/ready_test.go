package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestProbeWrite: the probe commits a write; while another connection
// holds the write lock (SQLite) or the probe row (PostgreSQL), it fails
// when its context ends instead of waiting for the lock.
func TestProbeWrite(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		for range 2 {
			if err := db.ProbeWrite(ctx, time.Now()); err != nil {
				t.Fatalf("ProbeWrite = %v", err)
			}
		}
		var probes int
		if err := db.SQL.QueryRow(`SELECT probes FROM payhook_ready WHERE id = 1`).Scan(&probes); err != nil || probes != 2 {
			t.Fatalf("probes = %d, %v; want 2", probes, err)
		}

		other, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.SQL.BeginTx(ctx, nil) // SQLite: BEGIN IMMEDIATE takes the write lock
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec(`UPDATE payhook_ready SET probes = probes WHERE id = 1`); err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = db.ProbeWrite(pctx, time.Now())
		if err == nil {
			t.Fatal("ProbeWrite succeeded while another transaction holds the lock")
		}
		t.Logf("ProbeWrite under a held lock = %v after %v", err, time.Since(start))
		tx.Rollback()
		if err := db.ProbeWrite(ctx, time.Now()); err != nil {
			t.Fatalf("ProbeWrite after the lock was released = %v", err)
		}
	})
}
