package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// LockTimeoutTx bounds, for the rest of tx, how long one statement waits
// for a lock another transaction holds (PostgreSQL's lock_timeout, e.g.
// an INSERT of an event key another transaction inserted and has not
// committed yet); past it the statement fails with an error that
// IsLockTimeout reports, and tx is aborted. SQLite has no row locks (its
// one writer waits at BEGIN): nothing to do there.
func (db *DB) LockTimeoutTx(ctx context.Context, tx *sql.Tx, d time.Duration) error {
	if db.Engine != Postgres {
		return nil
	}
	ms := max(d.Milliseconds(), 1)
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", ms)); err != nil {
		return fmt.Errorf("set lock timeout: %w", err)
	}
	return nil
}

// IsLockTimeout reports whether err is PostgreSQL's lock_not_available:
// a statement gave up waiting for a lock (see LockTimeoutTx).
func IsLockTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "55P03"
}
