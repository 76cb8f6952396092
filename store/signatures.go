package store

import (
	"context"
	"fmt"
	"time"
)

// SignatureCount is what one instance saw of the signature checks of one
// source's webhook deliveries in one bucket (a short span of time that
// starts at Bucket): how many failed and matched, and when the latest of
// each happened (zero if none).
type SignatureCount struct {
	Source                    string
	Bucket                    time.Time
	Failures, Verified        int64
	LastFailure, LastVerified time.Time
}

// AddSignatureCounts adds counts to payhook_signature_counts in one
// transaction: each to the row of its (source, bucket), which several
// instances share, by a conditional upsert that sums the counts and keeps
// the latest times. Nothing is written for no counts.
func (db *DB) AddSignatureCounts(ctx context.Context, counts []SignatureCount) error {
	if len(counts) == 0 {
		return nil
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add signature counts: %w", err)
	}
	defer tx.Rollback()
	for _, c := range counts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO payhook_signature_counts AS c
			(source, bucket, failures, verified, last_failure_at, last_verified_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (source, bucket) DO UPDATE SET
				failures = c.failures + excluded.failures,
				verified = c.verified + excluded.verified,
				last_failure_at = CASE WHEN c.last_failure_at IS NULL OR excluded.last_failure_at > c.last_failure_at
					THEN excluded.last_failure_at ELSE c.last_failure_at END,
				last_verified_at = CASE WHEN c.last_verified_at IS NULL OR excluded.last_verified_at > c.last_verified_at
					THEN excluded.last_verified_at ELSE c.last_verified_at END`,
			c.Source, db.TimeValue(c.Bucket), c.Failures, c.Verified, db.TimeValue(c.LastFailure), db.TimeValue(c.LastVerified)); err != nil {
			return fmt.Errorf("add signature counts of %s: %w", c.Source, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add signature counts: %w", err)
	}
	return nil
}

// SignatureStats is what the flushed signature counts tell of one
// source's webhook deliveries.
type SignatureStats struct {
	Source string
	// Failures and Verified count the deliveries whose signature was
	// refused (missing, malformed, wrong or expired) and matched, in the
	// buckets that start at or after the since asked.
	Failures, Verified int64
	// FailuresSinceVerified counts, of Failures, those of the buckets
	// whose latest failure is later than LastVerified: the failures with
	// no valid signature after them (a bucket holding both counts whole).
	FailuresSinceVerified int64
	// LastFailure and LastVerified are the latest failure and match kept
	// (a day's counts, and the latest match whenever it was); zero if none.
	LastFailure, LastVerified time.Time
}

// SignatureStats returns the signature health of source ("" for every
// source that has counts), one element per source in name order, counted
// from the buckets that start at or after since. The counts are those
// flushed by the instances (reconcile.SignatureCounter), so they lag by up
// to a flush interval. The console's sources page shows them; the
// signature_failures alert is raised from them (reconcile.CheckSignatures).
// The last time each secret matched is the events' business: an event
// keeps the fingerprint of its secret in secret_id.
func (db *DB) SignatureStats(ctx context.Context, source string, since time.Time) ([]SignatureStats, error) {
	rows, err := db.SQL.QueryContext(ctx, `SELECT c.source,
		CAST(SUM(CASE WHEN c.bucket >= $1 THEN c.failures ELSE 0 END) AS BIGINT),
		CAST(SUM(CASE WHEN c.bucket >= $1 THEN c.verified ELSE 0 END) AS BIGINT),
		CAST(SUM(CASE WHEN c.bucket >= $1 AND (v.last IS NULL OR c.last_failure_at > v.last) THEN c.failures ELSE 0 END) AS BIGINT),
		MAX(c.last_failure_at), MAX(c.last_verified_at)
		FROM payhook_signature_counts c
		LEFT JOIN (SELECT source, MAX(last_verified_at) AS last FROM payhook_signature_counts GROUP BY source) v
			ON v.source = c.source
		WHERE $2 = '' OR c.source = $2
		GROUP BY c.source ORDER BY c.source`, db.TimeValue(since), source)
	if err != nil {
		return nil, fmt.Errorf("signature stats: %w", err)
	}
	defer rows.Close()
	var out []SignatureStats
	for rows.Next() {
		var s SignatureStats
		if err := rows.Scan(&s.Source, &s.Failures, &s.Verified, &s.FailuresSinceVerified,
			ScanTime(&s.LastFailure), ScanTime(&s.LastVerified)); err != nil {
			return nil, fmt.Errorf("signature stats: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("signature stats: %w", err)
	}
	return out, nil
}

// PruneSignatureCounts deletes source's signature counts of the buckets
// that start before before, except the rows that hold its latest match
// and its latest failure (so that a long spell of failures, or of
// silence after them, still knows which came last and when a signature
// last matched). It returns how many rows it deleted.
func (db *DB) PruneSignatureCounts(ctx context.Context, source string, before time.Time) (int64, error) {
	res, err := db.SQL.ExecContext(ctx, `DELETE FROM payhook_signature_counts
		WHERE source = $1 AND bucket < $2
		AND (last_verified_at IS NULL OR last_verified_at <
			(SELECT MAX(last_verified_at) FROM payhook_signature_counts WHERE source = $1))
		AND (last_failure_at IS NULL OR last_failure_at <
			(SELECT MAX(last_failure_at) FROM payhook_signature_counts WHERE source = $1))`,
		source, db.TimeValue(before))
	if err != nil {
		return 0, fmt.Errorf("prune signature counts of %s: %w", source, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune signature counts of %s: %w", source, err)
	}
	return n, nil
}
