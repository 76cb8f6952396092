package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestWALBounded: on SQLite the WAL file is truncated back to WALLimit
// once a checkpoint empties it (before, it kept for good the size a read
// held open through a burst let it reach: 1.37 GB in a drill), and
// WALWatch warns while a read transaction held open makes it grow past
// its limit. On PostgreSQL there is no WAL file to watch.
func TestWALBounded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		size0, _ := db.WALBytes() // the migrations' pages
		w := store.WALWatch{Limit: size0 + 256<<10}
		if db.Engine == store.Postgres {
			if _, ok := db.WALBytes(); ok {
				t.Fatal("WALBytes ok on PostgreSQL")
			}
			if msg := w.Check(db); msg != "" {
				t.Fatalf("Check on PostgreSQL = %q", msg)
			}
			return
		}
		var limit int64
		if err := db.SQL.QueryRowContext(ctx, `PRAGMA journal_size_limit`).Scan(&limit); err != nil || limit != store.WALLimit {
			t.Fatalf("journal_size_limit = %d, %v; want %d", limit, err, store.WALLimit)
		}
		if msg := w.Check(db); msg != "" {
			t.Fatalf("Check with no read held = %q", msg)
		}
		// A read transaction held open, as a sqlite3 shell's BEGIN; SELECT.
		rtx, err := db.Reader().SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rtx.Rollback()
		var n int
		if err := rtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		payload := []byte(`{"pad":"` + strings.Repeat("x", 64<<10) + `"}`)
		grow := func(until int64) {
			t.Helper()
			for i := 0; ; i++ {
				if size, _ := db.WALBytes(); size > until {
					return
				}
				ev := newEvent(fmt.Sprintf("evt_%d_%d", until, i))
				ev.Payload = payload
				insert(t, db, []*payhook.Event{ev}...)
			}
		}
		grow(w.Limit)
		if msg := w.Check(db); !strings.Contains(msg, "read transaction") {
			t.Fatalf("Check past the limit with a read held = %q; want a warning", msg)
		}
		if msg := w.Check(db); msg != "" {
			t.Fatalf("Check again without growth = %q; want none", msg)
		}
		size, _ := db.WALBytes()
		grow(size + w.Limit)
		if msg := w.Check(db); msg == "" {
			t.Fatal("Check after growing by the limit again: no warning")
		}
	})
}
