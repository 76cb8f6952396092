package main

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestReadyz: /readyz is 200 while the database takes writes, and 503
// (answered at the probe's deadline, while the lock is still held) when
// another transaction holds SQLite's write lock or PostgreSQL's probe row;
// ready again once the lock is released. Before, it pinged: 200 under the
// PostgreSQL lock, and no answer at all while SQLite's connection was busy.
func TestReadyz(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		s := startServer(t, map[string]string{"PAYHOOK_DB": dbURL})
		ready := func() (int, string) {
			t.Helper()
			resp, err := http.Get(s.url + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, body := ready(); code != 200 {
			t.Fatalf("readyz = %d %q, want 200", code, body)
		}

		other, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.SQL.BeginTx(ctx, nil) // SQLite: BEGIN IMMEDIATE, the write lock
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		lock := `SELECT probes FROM payhook_ready WHERE id = 1 FOR UPDATE`
		if other.Engine == store.SQLite {
			lock = `UPDATE payhook_ready SET probes = probes WHERE id = 1`
		}
		if _, err := tx.Exec(lock); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, body := ready()
		t.Logf("readyz under the lock = %d %q after %v", code, body, time.Since(start))
		if code != http.StatusServiceUnavailable {
			t.Fatalf("readyz while the write is blocked = %d %q, want 503", code, body)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { code, _ := ready(); return code == 200 })
	})
}
