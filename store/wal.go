package store

import (
	"context"
	"fmt"
	"time"
)

// WALWatch warns when the WAL of a SQLite database keeps growing past
// WALLimit: checkpoints cannot empty it while a read transaction that
// began before its frames (a backup, a sqlite3 shell left in BEGIN, a
// stuck process) is open, and it then grows by every page written, on
// the disk the database needs, with no bound but the disk.
type WALWatch struct {
	// Limit is the size it warns above; 0 is WALLimit.
	Limit int64
	// last is the size seen by the last Check that warned or found the
	// WAL under WALLimit.
	last int64
}

// Check returns a warning when db's WAL is above the limit and has grown
// by more than the limit since the last warning (or since it was last
// under it), "" otherwise; always "" on PostgreSQL.
func (w *WALWatch) Check(db *DB) string {
	size, ok := db.WALBytes()
	if !ok {
		return ""
	}
	limit := w.Limit
	if limit <= 0 {
		limit = WALLimit
	}
	if size <= limit {
		w.last = 0
		return ""
	}
	if w.last > 0 && size-w.last <= limit {
		return ""
	}
	w.last = size
	return fmt.Sprintf("SQLite's WAL (%s) is %d MiB, over %d MiB: checkpoints cannot empty it while a read "+
		"transaction that began earlier stays open (a backup taking long, a sqlite3 shell left in BEGIN, "+
		"another process's reader); it grows by every page written until that transaction ends, "+
		"then shrinks back", db.wal, size>>20, limit>>20)
}

// WatchWAL checks db's WAL every interval until ctx ends, calling warn
// with each warning of WALWatch.Check. It returns at once on PostgreSQL.
func WatchWAL(ctx context.Context, db *DB, every time.Duration, warn func(msg string, args ...any)) {
	if _, ok := db.WALBytes(); !ok {
		return
	}
	var w WALWatch
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if msg := w.Check(db); msg != "" {
				size, _ := db.WALBytes()
				warn(msg, "wal_bytes", size)
			}
		}
	}
}
