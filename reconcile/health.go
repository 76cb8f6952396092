package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/store"
)

// AlertSilence: nothing was received from a source for longer than its
// configured silence; subject is the source. Raised once per silent
// spell (per last event received), cleared (acknowledged) when an event
// comes in again.
const AlertSilence = billing.AlertSourceSilent

// CheckSilence raises AlertSilence for source when its last event was
// received more than silence before now, and clears it when one came in
// since. A source that never received anything is not judged. It reports
// whether the source is silent.
func CheckSilence(ctx context.Context, db *store.DB, source string, silence time.Duration, now time.Time) (bool, error) {
	var last time.Time
	err := db.SQL.QueryRowContext(ctx, `SELECT MAX(received_at) FROM payhook_events WHERE source = $1`, source).Scan(store.ScanTime(&last))
	if err != nil {
		return false, fmt.Errorf("silence of %s: %w", source, err)
	}
	if last.IsZero() {
		return false, nil
	}
	tx, err := billing.Begin(ctx, db, now)
	if err != nil {
		return false, fmt.Errorf("silence of %s: %w", source, err)
	}
	defer tx.Rollback()
	silent := now.Sub(last) > silence
	if silent {
		_, err = billing.RaiseAlertOnce(ctx, tx, AlertSilence, source, source+"/"+last.UTC().Format(time.RFC3339Nano),
			fmt.Sprintf("source %s received nothing since %s (more than %s)", source, last.UTC().Format(time.RFC3339), silence))
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE payhook_alerts SET acknowledged = TRUE
			WHERE kind = $1 AND subject = $2 AND acknowledged = FALSE`, AlertSilence, source)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return false, fmt.Errorf("silence of %s: %w", source, err)
	}
	return silent, nil
}

// AlertSignatureFailures: a burst of webhook deliveries to a source whose
// signature was refused, with no valid one after them: a secret rotated
// at the provider but not here, or configured wrong. Subject is the
// source. Raised once per burst (per last valid signature before it, so
// that more failures and later checks raise nothing more, and neither
// does acknowledging it by hand while it lasts), cleared (acknowledged)
// when a valid signature comes after the failures.
const AlertSignatureFailures = billing.AlertSignatureFailures

// The defaults of a source's signature-failure alert: 20 refused
// signatures within 5 minutes, none valid after them.
const (
	DefaultSignatureFailures = 20
	DefaultSignatureWindow   = 5 * time.Minute
)

// signatureKeep is how long the counts are kept: a day, for the console,
// or the window when that is longer.
const signatureKeep = 24 * time.Hour

// CheckSignatures raises AlertSignatureFailures for source when at least
// limit of its deliveries' signatures were refused in the window ending at
// now with none valid after them, and clears it when a valid one came
// after the latest failure. It reads the counts the instances flushed
// (SignatureCounter), so it sees them a flush interval late, and prunes
// the source's counts older than a day. It reports whether the source is
// in a burst; a limit or window that is not positive is an error wrapping
// payhook.ErrInvalid.
func CheckSignatures(ctx context.Context, db *store.DB, source string, limit int, window time.Duration, now time.Time) (bool, error) {
	if limit <= 0 || window <= 0 {
		return false, fmt.Errorf("signature failures of %s: %d in %s is not a positive count in a positive window: %w",
			source, limit, window, payhook.ErrInvalid)
	}
	stats, err := db.SignatureStats(ctx, source, now.Add(-window))
	if err != nil {
		return false, fmt.Errorf("signature failures of %s: %w", source, err)
	}
	if _, err := db.PruneSignatureCounts(ctx, source, now.Add(-signatureKeep-window)); err != nil {
		return false, fmt.Errorf("signature failures of %s: %w", source, err)
	}
	if len(stats) == 0 {
		return false, nil
	}
	st := stats[0]
	burst := st.FailuresSinceVerified >= int64(limit)
	healthy := !st.LastVerified.IsZero() && st.LastVerified.After(st.LastFailure)
	if !burst && !healthy {
		return false, nil
	}
	tx, err := billing.Begin(ctx, db, now)
	if err != nil {
		return false, fmt.Errorf("signature failures of %s: %w", source, err)
	}
	defer tx.Rollback()
	if burst {
		since, last := "never", "no valid signature yet"
		if !st.LastVerified.IsZero() {
			since = st.LastVerified.UTC().Format(time.RFC3339Nano)
			last = "none valid since " + st.LastVerified.UTC().Format(time.RFC3339)
		}
		_, err = billing.RaiseAlertOnce(ctx, tx, AlertSignatureFailures, source, source+"/"+since,
			fmt.Sprintf("source %s: %d webhook signatures refused in the last %s (%s; the alert fires at %d): "+
				"a secret rotated at the provider but not here, or a wrong one?", source, st.FailuresSinceVerified, window, last, limit))
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE payhook_alerts SET acknowledged = TRUE
			WHERE kind = $1 AND subject = $2 AND acknowledged = FALSE`, AlertSignatureFailures, source)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return false, fmt.Errorf("signature failures of %s: %w", source, err)
	}
	return burst, nil
}

// SignatureCounter counts the signature checks of webhook deliveries in
// memory, per source and bucket, for Flush to add to the database.
//
// Why in memory: a refused delivery must cost no durable commit of its
// own, or a sender with a wrong secret (or anyone posting garbage) would
// buy one commit per request, at the price of the receiver's ack path
// (DESIGN.md: one commit per request caps a 2-core machine near 2,000
// requests/s). Flushed every few seconds in one transaction, the counts
// of any number of refusals cost one small commit per flush; several
// instances sharing one PostgreSQL add to the same (source, bucket) rows
// by a conditional upsert, so the check, which runs on one of them, sees
// every instance's counts. The price: a crash loses the counts of its
// last flush interval, which an alert on a burst can afford; it is not
// an audit log (the receiver's log has a line per refusal).
//
// It is safe for concurrent use.
type SignatureCounter struct {
	db     *store.DB
	bucket time.Duration

	mu     sync.Mutex
	counts map[signatureKey]*store.SignatureCount
	// matchesFlushed is when Run last wrote counts of matches alone;
	// failed, when each source last had a failure.
	matchesFlushed time.Time
	failed         map[string]time.Time
}

// matchesEvery is how often Run writes the counts of buckets that hold
// matches only, of a source with no failure in the last
// recentFailure: healthy traffic then costs one small commit a minute
// per instance, not one a second. Failures, and the matches of a source
// that just failed (they clear its alert), are written at every flush.
const (
	matchesEvery  = time.Minute
	recentFailure = 5 * time.Minute
)

type signatureKey struct {
	source string
	bucket time.Time
}

// NewSignatureCounter returns a counter that adds to db in buckets of
// bucket (10s if zero or less): the precision of the windows counted.
func NewSignatureCounter(db *store.DB, bucket time.Duration) *SignatureCounter {
	if bucket <= 0 {
		bucket = 10 * time.Second
	}
	return &SignatureCounter{db: db, bucket: bucket, counts: map[signatureKey]*store.SignatureCount{}, failed: map[string]time.Time{}}
}

// Observe counts one delivery to source whose signature was refused (ok
// false) or matched, at at: the receiver's OnSignature hook. It only
// touches memory.
func (c *SignatureCounter) Observe(source string, ok bool, at time.Time) {
	at = at.UTC()
	k := signatureKey{source, at.Truncate(c.bucket)}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.counts[k]
	if n == nil {
		n = &store.SignatureCount{Source: source, Bucket: k.bucket}
		c.counts[k] = n
	}
	if ok {
		n.Verified++
		if at.After(n.LastVerified) {
			n.LastVerified = at
		}
	} else {
		n.Failures++
		if at.After(n.LastFailure) {
			n.LastFailure = at
		}
		if at.After(c.failed[source]) {
			c.failed[source] = at
		}
	}
}

// Flush adds the counts observed since the last flush to the database in
// one transaction. On error they are kept for the next flush (those of
// buckets older than a day are dropped, so that a database down for long
// does not grow memory without bound).
func (c *SignatureCounter) Flush(ctx context.Context) error { return c.flush(ctx, time.Time{}) }

// flush is Flush; with a time now, the buckets that hold matches alone
// of a source without a recent failure are kept for a later flush,
// unless matchesEvery passed since such were last written.
func (c *SignatureCounter) flush(ctx context.Context, now time.Time) error {
	c.mu.Lock()
	taken := c.counts
	c.counts = map[signatureKey]*store.SignatureCount{}
	if !now.IsZero() {
		if now.Sub(c.matchesFlushed) < matchesEvery {
			for k, n := range taken {
				if n.Failures == 0 && now.Sub(c.failed[k.source]) > recentFailure {
					c.counts[k] = n
					delete(taken, k)
				}
			}
		} else {
			c.matchesFlushed = now
		}
	}
	c.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	counts := make([]store.SignatureCount, 0, len(taken))
	for _, n := range taken {
		counts = append(counts, *n)
	}
	// One order for every instance: concurrent flushes lock rows alike.
	slices.SortFunc(counts, func(a, b store.SignatureCount) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), a.Bucket.Compare(b.Bucket))
	})
	err := c.db.AddSignatureCounts(ctx, counts)
	if err == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.matchesFlushed = time.Time{} // not written: at the next flush
	var newest time.Time
	for k := range c.counts {
		if k.bucket.After(newest) {
			newest = k.bucket
		}
	}
	for k, n := range taken {
		if k.bucket.After(newest) {
			newest = k.bucket
		}
		m := c.counts[k]
		if m == nil {
			c.counts[k] = n
			continue
		}
		m.Failures += n.Failures
		m.Verified += n.Verified
		if n.LastFailure.After(m.LastFailure) {
			m.LastFailure = n.LastFailure
		}
		if n.LastVerified.After(m.LastVerified) {
			m.LastVerified = n.LastVerified
		}
	}
	for k := range c.counts {
		if k.bucket.Before(newest.Add(-signatureKeep)) {
			delete(c.counts, k)
		}
	}
	return fmt.Errorf("flush signature counts: %w", err)
}

// Run flushes every interval (the bucket if zero or less) until ctx is
// done, then once more, without ctx's cancellation, so that a shutdown
// keeps what was counted. Failures are written at every flush; buckets
// of matches alone once a minute (matchesEvery). Errors of a flush go to
// logf (and the counts to the next flush); Run returns the last flush's
// error.
func (c *SignatureCounter) Run(ctx context.Context, every time.Duration, logf func(msg string, args ...any)) error {
	if every <= 0 {
		every = c.bucket
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case tick := <-t.C:
			if err := c.flush(ctx, tick); err != nil && logf != nil {
				logf("signature counts not flushed; kept for the next flush", "err", err)
			}
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return c.Flush(fctx)
		}
	}
}
