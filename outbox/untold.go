package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// A fact whose sinks are all Unrecorded (payhook serve's default, Log)
// gets no delivery row: Emit writes it with a row of payhook_untold
// instead, in the fact's transaction, and the caller tells it once that
// transaction has committed (Tell), which claims the row before it sends
// (so that the sweep never routes a fact Tell is telling, however late
// Tell comes) and deletes it after. A crash between the commit and the
// telling, or a sink that failed, leaves the row, and the sweep routes the
// fact SweepAge after it was written (or claimed): a delivery per sink,
// retried as any. At least once, for one row of a single index per
// fact instead of a delivery row per fact and sink (four indexes and a
// foreign-key check, then deleted).

// Untold is a fact Emit wrote for Unrecorded sinks only, to be told after
// its transaction commits (Outbox.Tell).
type Untold struct {
	row  int64  // the fact's row id
	body string // the fact as stored, told as a delivery the sweep makes of it would be
}

// allUnrecorded reports whether every one of the sinks named is
// Unrecorded.
func (o *Outbox) allUnrecorded(names []string) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, name := range names {
		if r := o.routes[name]; r == nil || !unrecorded(r.sink) {
			return false
		}
	}
	return true
}

// emitUntold is Emit of a fact routed to Unrecorded sinks only: the fact,
// routed, and its payhook_untold row, one statement on PostgreSQL.
func emitUntold(ctx context.Context, db *store.DB, tx *sql.Tx, f Fact, body string, now time.Time) (Emitted, error) {
	var id int64
	var err error
	if db.Engine == store.Postgres {
		err = tx.QueryRowContext(ctx, `WITH f AS (INSERT INTO payhook_facts (fact_id, type, source, subject, body, routed, created_at)
				VALUES ($1, $2, $3, $4, $5, TRUE, $6)
				ON CONFLICT (fact_id) DO NOTHING
				RETURNING id)
			INSERT INTO payhook_untold (fact, created_at) SELECT id, $6 FROM f
			RETURNING fact`, f.ID, f.Type, f.Source, payhook.Storable(f.Subject), body, db.TimeValue(now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return Emitted{}, nil
		}
		if err != nil {
			return Emitted{}, fmt.Errorf("emit fact %s (%s %s): %w", f.ID, f.Type, f.Subject, err)
		}
	} else {
		if id, err = insertFact(ctx, tx, db, f, body, true, now); err != nil || id == 0 {
			return Emitted{}, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO payhook_untold (fact, created_at) VALUES ($1, $2)`,
			id, db.TimeValue(now)); err != nil {
			return Emitted{}, fmt.Errorf("emit fact %s (%s %s): untold: %w", f.ID, f.Type, f.Subject, err)
		}
	}
	return untoldEmitted(id, body), nil
}

// untoldEmitted is what Emit wrote for an untold fact stored with body as
// row id.
func untoldEmitted(id int64, body string) Emitted {
	return Emitted{Written: true, Untold: &Untold{row: id, body: body}}
}

// emitUntoldMany is EmitMany of the facts routed to Unrecorded sinks only
// (those marked together): the facts, in their order, then their
// payhook_untold rows, a statement each for them all; it sets what each
// wrote in out. Of two facts with one id, the first is written.
func emitUntoldMany(ctx context.Context, db *store.DB, tx *sql.Tx, facts []Fact, together []bool, out []Emitted, now time.Time) error {
	written, bodies, err := insertFacts(ctx, db, tx, facts, together, now)
	if err != nil {
		return err
	}
	var untold [][]any
	for _, id := range written {
		if id != 0 {
			untold = append(untold, []any{id})
		}
	}
	err = store.QueryRows(ctx, tx, untold, `INSERT INTO payhook_untold (fact, created_at)
		SELECT CAST(j.value->>0 AS BIGINT), $2 FROM `+db.JSONRows(), []any{db.TimeValue(now)}, nil)
	if err != nil {
		return fmt.Errorf("emit %d facts: untold: %w", len(untold), err)
	}
	for i, id := range written {
		if id != 0 {
			out[i] = untoldEmitted(id, bodies[i])
		}
	}
	return nil
}

// Tell sends facts, whose transaction has committed, to the sinks their
// types route to, one after the other, and deletes the payhook_untold rows
// of those every sink took. A fact whose sink is paused, not configured
// here or no longer Unrecorded is left untold as it is, to the sweep,
// which routes it SweepAge after it was written: a delivery per sink.
//
// The sweep and Tell may both look at a fact once SweepAge has gone by
// (Tell comes late when its worker first sent a batch's deliveries to a
// slow webhook): before sending, Tell claims its facts with one
// conditional UPDATE that restarts their age, and sends only those it
// found still untold. The row decides: one the sweep took first (it
// deletes it) is not told here, and one Tell claimed first is not the
// sweep's until SweepAge after the claim; Tell sends for AttemptTimeout
// at most after it (less than SweepAge: 30 seconds and a minute by
// default). A fact a sink failed (a warning is logged), or not sent
// within that time, keeps its row, and the sweep routes it SweepAge after
// the claim; one told to some of its sinks but not all gets a pending
// delivery to each of the others instead, which the sweep enqueues
// SweepAge after the claim: the sinks that took it do not get it again.
// It returns the error of reading the paused sinks, of claiming the facts
// or of deleting the rows; the facts are then told by the sweep (again,
// to the sinks that took them before the delete failed).
//
// Whoever writes facts through billing with an Outbox tells its
// transaction's billing.Tx.Untold once it has committed; the job queue
// does it for payhook's processing (billing/process).
func (o *Outbox) Tell(ctx context.Context, facts []Untold) error {
	if len(facts) == 0 {
		return nil
	}
	paused, err := o.pausedSinks(ctx)
	if err != nil {
		return fmt.Errorf("tell %d facts: %w", len(facts), err)
	}
	type telling struct {
		fact   Fact
		routes []*route
	}
	todo := make(map[int64]telling, len(facts))
	rows := make([]int64, 0, len(facts))
	for _, u := range facts {
		// Told as stored (the JSON of a subject that is not valid UTF-8 is
		// not the subject), parsed here rather than in the transaction
		// that wrote it: on SQLite that one holds the only connection.
		var t telling
		if err := json.Unmarshal([]byte(u.body), &t.fact); err != nil {
			o.cfg.Logger.Warn("fact not told: its stored body does not parse; the sweep sends it", "row", u.row, "err", err)
			continue
		}
		ok := true
		for _, name := range o.sinksFor(t.fact.Type) {
			o.mu.RLock()
			r := o.routes[name]
			o.mu.RUnlock()
			if r == nil || !unrecorded(r.sink) || pausedAny(paused, name, r) {
				ok = false // the sweep's, a delivery per sink
				break
			}
			t.routes = append(t.routes, r)
		}
		if ok {
			todo[u.row] = t
			rows = append(rows, u.row)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	claimed, err := o.claimUntold(ctx, rows)
	if err != nil {
		return fmt.Errorf("tell %d facts: %w", len(rows), err)
	}
	sctx, cancel := context.WithTimeout(ctx, o.cfg.AttemptTimeout)
	defer cancel()
	down := map[string]bool{}
	told := make([]int64, 0, len(claimed))
	var left [][]any // (fact, sink) not told, of facts told to their other sinks
	for _, row := range claimed {
		if sctx.Err() != nil {
			break // past the claim's time: left to the sweep
		}
		t := todo[row]
		var missed []string
		for _, r := range t.routes {
			if down[r.name] || sctx.Err() != nil {
				// A sink failed earlier, or the claim's time is up: a
				// delivery of its own (or the sweep, if no sink took it).
				missed = append(missed, r.name)
				continue
			}
			_, err := send(sctx, r.sink, t.fact)
			if err != nil {
				// The bug "told-despite-failure" drops the fact as told.
				down[r.name] = true
				if !dstBug("told-despite-failure") {
					missed = append(missed, r.name)
				}
				r.counts.errors.Add(1)
				o.cfg.Logger.Warn("fact delivery failed; the sweep sends it again", "sink", r.name, "fact", t.fact.ID,
					"type", t.fact.Type, "err", err)
				continue
			}
			r.counts.delivered.Add(1)
		}
		switch {
		case len(missed) == 0:
			told = append(told, row)
		case len(missed) < len(t.routes):
			// Told to some of its sinks: a delivery to each of the others
			// replaces its row, or the sweep would route it to every one.
			told = append(told, row)
			for _, name := range missed {
				left = append(left, []any{row, name})
			}
		}
	}
	if len(told) == 0 {
		return nil
	}
	// Written whatever ctx became: the sends happened.
	if err := o.told(context.WithoutCancel(ctx), told, left); err != nil {
		return fmt.Errorf("tell %d facts: %w", len(told), err)
	}
	return nil
}

// told deletes the untold rows of facts, told, and writes the pending
// deliveries left, each a (fact, sink) that a fact told to its other
// sinks still needs, for the sweep to enqueue SweepAge from now, in one
// transaction when there are any.
func (o *Outbox) told(ctx context.Context, facts []int64, left [][]any) error {
	in, arg := o.cfg.DB.InIDs("fact", 1, facts)
	if len(left) == 0 {
		_, err := o.cfg.DB.SQL.ExecContext(ctx, `DELETE FROM payhook_untold WHERE `+in, arg)
		return err
	}
	tx, err := o.cfg.DB.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	err = store.QueryRows(ctx, tx, left, `INSERT INTO payhook_deliveries (fact, sink, status, created_at, updated_at, enqueued_at)
		SELECT CAST(j.value->>0 AS BIGINT), j.value->>1, 'pending', $2, $2, $2
		FROM `+o.cfg.DB.JSONRows()+`
		WHERE TRUE
		ON CONFLICT (fact, sink) DO NOTHING`, []any{o.cfg.DB.TimeValue(o.cfg.Now())}, nil)
	if err != nil {
		return fmt.Errorf("deliveries of %d sinks not told: %w", len(left), err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM payhook_untold WHERE `+in, arg); err != nil {
		return err
	}
	return tx.Commit()
}

// claimUntold restarts the age of the untold rows of facts, so that the
// sweep leaves them for SweepAge from now, and returns those it found, in
// the order of facts: the others were taken by the sweep.
func (o *Outbox) claimUntold(ctx context.Context, facts []int64) ([]int64, error) {
	in, arg := o.cfg.DB.InIDs("fact", 2, facts)
	rows, err := o.cfg.DB.SQL.QueryContext(ctx, `UPDATE payhook_untold SET created_at = $1 WHERE `+in+`
		RETURNING fact`, o.cfg.DB.TimeValue(o.cfg.Now()), arg)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	found := make(map[int64]bool, len(facts))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		found[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	claimed := make([]int64, 0, len(found))
	for _, id := range facts {
		if found[id] {
			claimed = append(claimed, id)
			delete(found, id)
		}
	}
	return claimed, nil
}

// sweepUntold routes, in tx, up to limit facts left untold since before,
// oldest first, and returns their deliveries' ids. Deleting the row
// decides who routes a fact; on PostgreSQL the sweep skips rows another
// transaction holds (a Tell deleting them, another instance's sweep), so
// that it never waits for them: no deadlock with Tell's delete, which
// locks its rows in whatever order its plan reads them.
func (o *Outbox) sweepUntold(ctx context.Context, tx *sql.Tx, now, before time.Time, limit int) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`DELETE FROM payhook_untold WHERE fact IN (SELECT fact FROM payhook_untold
			WHERE created_at < $1 ORDER BY fact LIMIT %d%s)
		RETURNING fact`, limit, o.cfg.DB.SkipLocked()), o.cfg.DB.TimeValue(before))
	if err != nil {
		return nil, fmt.Errorf("outbox sweep: untold facts: %w", err)
	}
	var taken []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox sweep: untold facts: %w", err)
		}
		taken = append(taken, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(taken) == 0 {
		return nil, err
	}
	in, arg := o.cfg.DB.InIDs("id", 1, taken)
	if rows, err = tx.QueryContext(ctx, `SELECT id, type FROM payhook_facts WHERE `+in+` ORDER BY id`, arg); err != nil {
		return nil, fmt.Errorf("outbox sweep: untold facts: %w", err)
	}
	facts, err := scanFactTypes(rows)
	if err != nil {
		return nil, fmt.Errorf("outbox sweep: untold facts: %w", err)
	}
	var ids []int64
	for _, f := range facts {
		routed, err := o.route(ctx, tx, f.id, f.typ, now)
		if err != nil {
			return nil, err
		}
		ids = append(ids, routed...)
	}
	return ids, nil
}

// untoldByType counts the facts not told yet, by type.
func (o *Outbox) untoldByType(ctx context.Context) (map[string]int64, error) {
	rows, err := o.cfg.DB.SQL.QueryContext(ctx, `SELECT f.type, count(*) FROM payhook_untold u
		JOIN payhook_facts f ON f.id = u.fact GROUP BY f.type`)
	if err != nil {
		return nil, fmt.Errorf("untold facts: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var typ string
		var n int64
		if err := rows.Scan(&typ, &n); err != nil {
			return nil, fmt.Errorf("untold facts: %w", err)
		}
		out[typ] = n
	}
	return out, rows.Err()
}

// factType is a fact's row id and type, as the sweep reads them.
type factType struct {
	id  int64
	typ string
}

// scanFactTypes reads rows of (id, type) and closes them.
func scanFactTypes(rows *sql.Rows) ([]factType, error) {
	defer rows.Close()
	var facts []factType
	for rows.Next() {
		var f factType
		if err := rows.Scan(&f.id, &f.typ); err != nil {
			return nil, err
		}
		facts = append(facts, f)
	}
	return facts, rows.Err()
}
