package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNotDurable is the error of CheckDurable: a commit could return before
// it is on disk, so a 2xx could be given for an event that a crash then
// loses.
var ErrNotDurable = errors.New("acknowledgements would not be durable")

// CheckDurable reports, as an error wrapping ErrNotDurable that names each
// one, the settings under which a commit that returned can still be lost
// in a crash of the database's machine: on PostgreSQL fsync=off, or
// synchronous_commit=off on the connections payhook commits with (a pooler
// may drop the synchronous_commit=on payhook asks for); on SQLite
// synchronous below FULL. Other errors are the database's.
func (db *DB) CheckDurable(ctx context.Context) error {
	var unsafe []string
	add := func(why string) {
		if !slices.Contains(unsafe, why) { // both pools may say it
			unsafe = append(unsafe, why)
		}
	}
	switch db.Engine {
	case Postgres:
		pools := []*sql.DB{db.SQL}
		if db.Ingest != nil {
			pools = append(pools, db.Ingest)
		}
		for _, pool := range pools {
			var fsync, syncCommit string
			if err := pool.QueryRowContext(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).
				Scan(&fsync, &syncCommit); err != nil {
				return fmt.Errorf("check durability of %s: %w", db.URL, err)
			}
			if fsync == "off" {
				add("PostgreSQL runs with fsync=off: a crash of its machine can lose or corrupt committed events")
			}
			if syncCommit == "off" {
				add("synchronous_commit=off on payhook's connections: a commit returns before its WAL is flushed")
			}
		}
	default:
		var level int
		if err := db.SQL.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&level); err != nil {
			return fmt.Errorf("check durability of %s: %w", db.URL, err)
		}
		if level < 2 { // 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
			add(fmt.Sprintf("SQLite synchronous=%d, below FULL (2): a commit returns before it is synced", level))
		}
	}
	if len(unsafe) == 0 {
		return nil
	}
	return fmt.Errorf("%w on %s: %s", ErrNotDurable, db.URL, strings.Join(unsafe, "; "))
}
