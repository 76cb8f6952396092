package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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
		// A probe that succeeded answers for a second (readyFresh); then
		// the checks probe again and find the write blocked.
		waitFor(t, func() bool { code, _ := ready(); return code == http.StatusServiceUnavailable })
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { code, _ := ready(); return code == 200 })
	})
}

// TestReadyzProbesOncePerFresh: checks within readyFresh of a probe that
// succeeded answer from it, so that whoever polls /readyz (it takes no
// credentials) costs the database one durable write per readyFresh, not
// one per request.
func TestReadyzProbesOncePerFresh(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		rd := &readiness{db: db, now: time.Now, log: discardLogger(), timeout: time.Minute, fresh: time.Hour, start: time.Now()}
		for range 20 {
			w := httptest.NewRecorder()
			rd.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
			if w.Code != 200 {
				t.Fatalf("readyz = %d %q; want 200", w.Code, w.Body)
			}
		}
		var probes int
		if err := db.SQL.QueryRow(`SELECT probes FROM payhook_ready WHERE id = 1`).Scan(&probes); err != nil || probes != 1 {
			t.Fatalf("%d probes written (%v) for 20 checks within readyFresh; want 1", probes, err)
		}
	})
}

// TestReadyzSaysReadyAgain: after checks answered 503 (each logged "not
// ready"), the first that finds the database taking writes again logs
// "ready again", once; before, the log of an outage had no end.
func TestReadyzSaysReadyAgain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		rd := &readiness{db: db, now: time.Now, log: slog.New(slog.NewTextHandler(&logs, nil)),
			timeout: 200 * time.Millisecond, start: time.Now()}
		check := func() int {
			w := httptest.NewRecorder()
			rd.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
			return w.Code
		}
		if code := check(); code != 200 {
			t.Fatalf("readyz = %d; want 200", code)
		}
		other, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.SQL.BeginTx(ctx, nil)
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
		waitFor(t, func() bool { return check() == http.StatusServiceUnavailable })
		if strings.Contains(logs.String(), "ready again") {
			t.Fatalf("ready again logged while not ready:\n%s", logs.String())
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return check() == 200 })
		check()
		if n := strings.Count(logs.String(), "ready again"); n != 1 {
			t.Fatalf(`"ready again" logged %d times; want 1:\n%s`, n, logs.String())
		}
	})
}
