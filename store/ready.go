package store

import (
	"context"
	"fmt"
	"time"
)

// ProbeWrite commits a one-row write (the payhook_ready row, counted and
// stamped with at) and returns nil once the commit has returned. It is the
// readiness check: a database that is down, partitioned, locked by another
// writer or out of disk fails it, or makes it wait until ctx ends, and
// then ProbeWrite returns an error wrapping ctx's or the engine's.
func (db *DB) ProbeWrite(ctx context.Context, at time.Time) error {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("readiness probe: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO payhook_ready (id, probes, probed_at) VALUES (1, 1, $1)
		ON CONFLICT (id) DO UPDATE SET probes = payhook_ready.probes + 1, probed_at = excluded.probed_at`,
		db.TimeValue(at)); err != nil {
		return fmt.Errorf("readiness probe: write: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("readiness probe: commit: %w", err)
	}
	return nil
}
