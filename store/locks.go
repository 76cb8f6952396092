package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// IngestLockWait is how long the ack path waits for a key another
// transaction holds before it gives up on the batch (jobs.LockWait): the
// lock_timeout of the Ingest pool's sessions.
const IngestLockWait = 200 * time.Millisecond

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

// ClearLockTimeoutTx lifts LockTimeoutTx's bound for the rest of tx.
// Its commit needs that: a transaction that enqueued jobs sends a NOTIFY
// (River's), and PostgreSQL serialises the commits of such transactions
// on one lock, held by each through its WAL flush; under a bound of
// 200 ms a commit queued behind a few slow flushes failed with 55P03,
// and its whole batch was answered 503 (473 in one make bench run with
// three instances). Waiting there is queueing, not a row held by another
// transaction: the caller's context bounds it.
func (db *DB) ClearLockTimeoutTx(ctx context.Context, tx *sql.Tx) error {
	if db.Engine != Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = 0"); err != nil {
		return fmt.Errorf("clear lock timeout: %w", err)
	}
	return nil
}

// IsLockTimeout reports whether err is PostgreSQL's lock_not_available:
// a statement gave up waiting for a lock (see LockTimeoutTx).
func IsLockTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "55P03"
}

// IsRowError reports whether err, a PostgreSQL statement's failure, is
// one that the rows it was given can cause: bad data (class 22), a
// constraint (23), a lock held elsewhere (55P03), a deadlock or a
// serialisation failure (40). Anything else (a missing table, a full
// disk, a connection lost, a server shutting down) is the database's as a
// whole: the same statement with other rows would fail alike.
func IsRowError(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	switch {
	case strings.HasPrefix(pg.Code, "22"), strings.HasPrefix(pg.Code, "23"), strings.HasPrefix(pg.Code, "40"):
		return true
	}
	return pg.Code == "55P03"
}
