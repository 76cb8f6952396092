package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestReaderLeavesTheWriterFree: a read through Reader that has not
// finished (its rows still open, as a long console query's are) does not
// hold what events are stored with; on SQLite the Reader cannot write.
func TestReaderLeavesTheWriterFree(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		insert(t, db, newEvent("evt_1"), newEvent("evt_2"))
		rows, err := db.Reader().SQL.QueryContext(ctx, `SELECT id FROM payhook_events ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		if !rows.Next() {
			t.Fatalf("no event read: %v", rows.Err())
		}
		// Without a reader of its own, SQLite's one connection is the
		// open rows', and this insert would wait for it for ever: the
		// bound only turns that into a failure.
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		tx, err := db.SQL.BeginTx(wctx, nil)
		if err != nil {
			t.Fatalf("begin while a read is under way = %v", err)
		}
		defer tx.Rollback()
		if _, err := db.InsertEventsTx(wctx, tx, []*payhook.Event{newEvent("evt_3")}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit while a read is under way = %v", err)
		}
		rows.Close()
		var n int
		if err := db.Reader().SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_events`).Scan(&n); err != nil || n != 3 {
			t.Fatalf("events read after the insert = %d, %v; want 3", n, err)
		}
		if db.Engine == store.SQLite {
			if _, err := db.Reader().SQL.ExecContext(ctx, `DELETE FROM payhook_events`); err == nil {
				t.Fatal("a delete through the Reader succeeded")
			}
		}
	})
}

// TestReaderOfAMemoryDatabase: an in-memory SQLite database (":memory:")
// is one connection's own: a Reader opening connections of its own read
// another, empty database (no such table), so it reads through the
// writer's connection there.
func TestReaderOfAMemoryDatabase(t *testing.T) {
	for _, u := range []string{":memory:", "sqlite://:memory:"} {
		t.Run(u, func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t, u)
			insert(t, db, newEvent("evt_1"))
			var n int
			if err := db.Reader().SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_events`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("events read through the Reader = %d, %v; want 1", n, err)
			}
		})
	}
}
