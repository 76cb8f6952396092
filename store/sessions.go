package store

import (
	"context"
	"fmt"
	"time"
)

// EndSession records that the console session of nonce ended (a logout)
// before it expires at expires, so that its cookie, even a copy, is no
// session any more (SessionEnded); it prunes the sessions past their
// expiry at now, whose cookies are refused anyway. Ending a session twice
// is ending it once.
func (db *DB) EndSession(ctx context.Context, nonce string, expires, now time.Time) error {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("end console session: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM payhook_console_logouts WHERE expires_at < $1`, db.TimeValue(now)); err != nil {
		return fmt.Errorf("end console session: prune: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO payhook_console_logouts (nonce, expires_at) VALUES ($1, $2)
		ON CONFLICT (nonce) DO NOTHING`, nonce, db.TimeValue(expires)); err != nil {
		return fmt.Errorf("end console session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("end console session: commit: %w", err)
	}
	return nil
}

// SessionEnded reports whether the console session of nonce was ended
// by EndSession. It reads through the Reader.
func (db *DB) SessionEnded(ctx context.Context, nonce string) (bool, error) {
	var ended bool
	if err := db.Reader().SQL.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM payhook_console_logouts WHERE nonce = $1)`,
		nonce).Scan(&ended); err != nil {
		return false, fmt.Errorf("console session: %w", err)
	}
	return ended, nil
}
