package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// ClaimPeriod claims the period starting at period of the periodic job
// name, at time at, and reports whether this call claimed it: true once
// per (name, period), whichever instance asks first. The primary key
// decides, also between concurrent calls.
func (db *DB) ClaimPeriod(ctx context.Context, name string, period, at time.Time) (bool, error) {
	var got string
	err := db.SQL.QueryRowContext(ctx, `INSERT INTO payhook_periodic_claims (name, period, claimed_at)
		VALUES ($1, $2, $3) ON CONFLICT (name, period) DO NOTHING RETURNING name`,
		name, period.UTC().Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano)).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("claim period %s of %s: %w", period.UTC().Format(time.RFC3339), name, err)
	}
	return true, nil
}

// TryHold takes the lock named name if no one holds it, for as long as
// the work it guards runs, and reports whether it did; release gives it
// back. On PostgreSQL it is a session advisory lock on a connection of
// its own, held by whichever instance took it (a dead instance's session
// ends and lets it go: the server asks that connection's peer every
// holdKeepalive, so that a host gone without closing it, powered off or
// cut off, lets go within minutes, not after the operating system's two
// hours of TCP silence); on SQLite, whose file one process writes, a lock
// of this DB's. A session lock needs the session: behind a pooler in
// transaction mode (PgBouncer's pool_mode=transaction) it is not held.
func (db *DB) TryHold(ctx context.Context, name string) (release func(), ok bool, err error) {
	if db.Engine != Postgres {
		db.heldMu.Lock()
		defer db.heldMu.Unlock()
		if db.held[name] {
			return nil, false, nil
		}
		if db.held == nil {
			db.held = map[string]bool{}
		}
		db.held[name] = true
		return func() {
			db.heldMu.Lock()
			defer db.heldMu.Unlock()
			delete(db.held, name)
		}, true, nil
	}
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("hold %s: %w", name, err)
	}
	key := "payhook:" + name
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0)),
		set_config('tcp_keepalives_idle', $2, false), set_config('tcp_keepalives_interval', $2, false),
		set_config('tcp_keepalives_count', '4', false)`,
		key, fmt.Sprint(int(holdKeepalive.Seconds()))).Scan(&ok, new(string), new(string), new(string)); err != nil || !ok {
		conn.Close()
		if err != nil {
			return nil, false, fmt.Errorf("hold %s: %w", name, err)
		}
		return nil, false, nil
	}
	return func() {
		// Unlocked, the connection goes back to the pool; if the unlock
		// failed, the connection is dropped, and its session with the lock.
		// Bounded: a server unreachable does not keep the run's job (and
		// a graceful stop waiting for it) until TCP gives up.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holdReleaseWait)
		defer cancel()
		var unlocked bool
		err := conn.QueryRowContext(uctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key).Scan(&unlocked)
		if err != nil || !unlocked {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}, true, nil
}

// holdKeepalive is how often the server asks the peer of a TryHold
// session whether it is still there, once it has been silent that long,
// and between unanswered asks (four): a holder gone unannounced lets go
// after about 5 of them.
const holdKeepalive = 30 * time.Second

// holdReleaseWait bounds TryHold's release: past it the connection is
// dropped, its session and lock with it.
const holdReleaseWait = 10 * time.Second
