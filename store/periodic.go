package store

import (
	"context"
	"database/sql"
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
