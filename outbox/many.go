package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// errLeftAlone is DeliverMany's error for a delivery it did not send.
var errLeftAlone = errors.New("left to a delivery of its own")

// DeliverMany runs the first attempt of each of the deliveries ids as
// Deliver does, sending them one after the other, and writes nothing
// itself: record writes every attempt in the caller's transaction (the job
// queue's, which also puts the jobs of the failed ones back; see
// jobs.Config.DeliverMany). errs[i] is nil for a delivery now delivered or
// no longer pending; the sink's error for one whose send failed (its
// attempt is in record, the delivery stays pending); and an error for one
// it did not send, which Deliver is left to handle: its sink is paused or
// not configured here, or failed earlier in this call, or ctx was done
// before its turn. A sink that answers gone is paused by record, with the
// attempt, as Deliver pauses it (errs[i] nil: the delivery waits, paused,
// for a resend). If the deliveries cannot be read, every errs[i] is that
// error and record is nil.
func (o *Outbox) DeliverMany(ctx context.Context, ids []int64) (errs []error, record func(context.Context, *sql.Tx) error) {
	errs = make([]error, len(ids))
	ds, paused, err := o.loadMany(ctx, ids)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs, nil
	}
	type sent struct {
		d       *delivery
		r       *route
		rec     Receipt
		err     error
		latency time.Duration
	}
	results := make([]sent, len(ids))
	// One after the other, as one worker sends (the other workers send
	// theirs meanwhile): a sink that fails is not called again in this
	// batch, so a dead one costs one timeout, and the order of the calls
	// is the order of ids.
	down := map[string]bool{}
	for i, id := range ids {
		d := ds[id]
		if d == nil || d.status != StatusPending {
			continue // nothing to do, as for Deliver
		}
		o.mu.RLock()
		r := o.routes[d.sink]
		o.mu.RUnlock()
		if r == nil || down[d.sink] || pausedAny(paused, d.sink, r) {
			errs[i] = fmt.Errorf("delivery %d: sink %s: %w", id, d.sink, errLeftAlone)
			continue
		}
		if err := ctx.Err(); err != nil {
			// Past the caller's time (its job's, or the part of SweepAge
			// the batch's worker has): left to a job, even for a sink that
			// would not look at ctx (Log), or the sweep may send it too.
			errs[i] = fmt.Errorf("delivery %d: sink %s: %w (%w)", id, d.sink, errLeftAlone, err)
			continue
		}
		s := &results[i]
		*s = sent{d: d, r: r}
		actx, cancel := context.WithTimeout(ctx, o.cfg.AttemptTimeout)
		start := time.Now()
		s.rec, s.err = send(actx, r.sink, d.fact)
		s.latency = time.Since(start)
		cancel()
		if s.err != nil {
			down[d.sink] = true
		}
	}
	var delivered, failed, gone []*sent
	for i := range results {
		s := &results[i]
		switch {
		case s.d == nil:
		case errors.Is(s.err, ErrGone):
			// record pauses the sink with this attempt, as Deliver does;
			// the delivery waits, paused, for a resend.
			gone = append(gone, s)
		case s.err != nil:
			errs[i] = s.err
			failed = append(failed, s)
		default:
			delivered = append(delivered, s)
		}
	}
	record = func(ctx context.Context, tx *sql.Tx) error {
		now := o.cfg.Now()
		// Those of Unrecorded sinks are deleted; the others marked.
		var first []int64
		for _, s := range delivered {
			if unrecorded(s.r.sink) {
				first = append(first, s.d.id)
			}
		}
		forgotten, err := o.forget(ctx, tx, first)
		if err != nil {
			return err
		}
		var marked []*sent
		for _, s := range delivered {
			if !forgotten[s.d.id] {
				marked = append(marked, s)
			}
		}
		if len(marked) > 0 {
			ids := make([]int64, len(marked))
			for i, s := range marked {
				ids[i] = s.d.id
			}
			attempts, err := o.markDelivered(ctx, tx, ids, now)
			if err != nil {
				return err
			}
			rows := make([]attemptRow, 0, len(marked))
			for _, s := range marked {
				if n, ok := attempts[s.d.id]; ok {
					rows = append(rows, attemptRow{s.d.id, n, s.rec, "", s.latency})
				}
			}
			if err := o.insertAttempts(ctx, tx, rows, now); err != nil {
				return err
			}
		}
		for _, s := range failed {
			o.cfg.Logger.Warn("fact delivery failed", "sink", s.d.sink, "fact", s.d.fact.ID, "type", s.d.fact.Type,
				"delivery", s.d.id, "final", false, "err", s.err)
			if err := o.recordTx(ctx, tx, s.d, StatusPending, s.rec, s.err, s.latency); err != nil {
				return err
			}
		}
		for _, s := range gone {
			reason, err := o.pauseTx(ctx, tx, s.d, s.r, s.rec, s.err, s.latency)
			if err != nil {
				return err
			}
			o.cfg.Logger.Error("sink paused", "sink", s.r.name, "reason", reason)
		}
		for _, s := range delivered {
			s.r.counts.delivered.Add(1)
		}
		for _, s := range failed {
			s.r.counts.errors.Add(1)
		}
		for _, s := range gone {
			s.r.counts.errors.Add(1)
		}
		return nil
	}
	return errs, record
}

// pausedAny reports whether r's sink is paused for its target.
func pausedAny(paused map[string]string, sink string, r *route) bool {
	url, ok := paused[sink]
	return ok && url == target(r.sink)
}

// loadMany reads the deliveries ids with their facts, and the paused
// sinks with the target each is paused for.
func (o *Outbox) loadMany(ctx context.Context, ids []int64) (map[int64]*delivery, map[string]string, error) {
	in, arg := o.cfg.DB.InIDs("d.id", 1, ids)
	rows, err := o.cfg.DB.SQL.QueryContext(ctx, `SELECT d.id, d.sink, d.status, f.body
		FROM payhook_deliveries d JOIN payhook_facts f ON f.id = d.fact WHERE `+in, arg)
	if err != nil {
		return nil, nil, fmt.Errorf("load %d deliveries: %w", len(ids), err)
	}
	defer rows.Close()
	ds := make(map[int64]*delivery, len(ids))
	for rows.Next() {
		d := &delivery{}
		var body string
		if err := rows.Scan(&d.id, &d.sink, &d.status, &body); err != nil {
			return nil, nil, fmt.Errorf("load %d deliveries: %w", len(ids), err)
		}
		if err := json.Unmarshal([]byte(body), &d.fact); err != nil {
			return nil, nil, fmt.Errorf("load delivery %d: its fact: %w", d.id, err)
		}
		ds[d.id] = d
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("load %d deliveries: %w", len(ids), err)
	}
	rows.Close()
	paused, err := o.pausedSinks(ctx)
	if err != nil {
		return nil, nil, err
	}
	return ds, paused, nil
}

// pausedSinks reads the paused sinks with the target each is paused for.
func (o *Outbox) pausedSinks(ctx context.Context) (map[string]string, error) {
	rows, err := o.cfg.DB.SQL.QueryContext(ctx, `SELECT sink, url FROM payhook_sinks_paused`)
	if err != nil {
		return nil, fmt.Errorf("paused sinks: %w", err)
	}
	defer rows.Close()
	paused := map[string]string{}
	for rows.Next() {
		var sink, url string
		if err := rows.Scan(&sink, &url); err != nil {
			return nil, fmt.Errorf("paused sinks: %w", err)
		}
		paused[sink] = url
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("paused sinks: %w", err)
	}
	return paused, nil
}

// forget deletes the rows of the deliveries ids, just sent to an
// Unrecorded sink, that were pending at their first attempt, and returns
// those it deleted; the others are recorded delivered as any delivery.
func (o *Outbox) forget(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	in, arg := o.cfg.DB.InIDs("id", 1, ids)
	rows, err := tx.QueryContext(ctx, `DELETE FROM payhook_deliveries
		WHERE `+in+` AND status = 'pending' AND attempts = 0
		RETURNING id`, arg)
	if err != nil {
		return nil, fmt.Errorf("forget %d sent deliveries: %w", len(ids), err)
	}
	defer rows.Close()
	gone := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("forget %d sent deliveries: %w", len(ids), err)
		}
		gone[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("forget %d sent deliveries: %w", len(ids), err)
	}
	return gone, nil
}

// markDelivered marks the deliveries ids still pending delivered, with
// one attempt more, and returns the attempt number of each it marked.
func (o *Outbox) markDelivered(ctx context.Context, tx *sql.Tx, ids []int64, now time.Time) (map[int64]int, error) {
	in, arg := o.cfg.DB.InIDs("id", 2, ids)
	rows, err := tx.QueryContext(ctx, `UPDATE payhook_deliveries
		SET status = 'delivered', attempts = attempts + 1, last_error = '', updated_at = $1, delivered_at = $1
		WHERE `+in+` AND status = 'pending'
		RETURNING id, attempts`, o.cfg.DB.TimeValue(now), arg)
	if err != nil {
		return nil, fmt.Errorf("record %d deliveries: %w", len(ids), err)
	}
	defer rows.Close()
	out := make(map[int64]int, len(ids))
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("record %d deliveries: %w", len(ids), err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record %d deliveries: %w", len(ids), err)
	}
	return out, nil
}

// attemptRow is one line of the delivery log.
type attemptRow struct {
	delivery int64
	attempt  int
	rec      Receipt
	err      string
	latency  time.Duration
}

// insertAttempts writes rows to the delivery log with one statement.
func (o *Outbox) insertAttempts(ctx context.Context, tx *sql.Tx, rows []attemptRow, now time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	at := o.cfg.DB.TimeValue(now)
	var args []any
	var values strings.Builder
	for i, r := range rows {
		if i > 0 {
			values.WriteString(", ")
		}
		values.WriteString(o.cfg.DB.Row(len(args)+1, 7))
		args = append(args, r.delivery, r.attempt, at, r.rec.Status, excerpt(r.rec.Response), r.err, r.latency.Microseconds())
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO payhook_delivery_attempts
		(delivery, attempt, at, status_code, response, error, latency_us) VALUES `+values.String(), args...); err != nil {
		return fmt.Errorf("record the attempts of %d deliveries: %w", len(rows), err)
	}
	return nil
}
