package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// A fact whose sinks are all Unrecorded (payhook serve's default, Log)
// gets no delivery row: Emit writes it held by a row of
// payhook_untold_batches instead, in the fact's transaction, one row for
// all the facts one statement writes (EmitMany: a processing batch's), and
// the caller tells them once that transaction has committed (Tell), which
// claims the row before it sends (so that the sweep never routes a fact
// Tell is telling, however late Tell comes) and deletes it after. A crash
// between the commit and the telling, or sinks that failed, leaves the
// row, and the sweep routes its facts SweepAge after it was written (or
// claimed): a delivery per fact and sink, retried as any. At least once,
// for one row of a single index per statement instead of a delivery row
// per fact and sink (four indexes and a foreign-key check, then deleted).
//
// payhook_untold holds an untold fact a row each: the facts of a batch
// told in part (Tell replaces the batch's row with a row per fact no sink
// took), and those an older payhook writes during a rolling upgrade. The
// sweep routes those the same way.

// Untold is a fact Emit wrote for Unrecorded sinks only, to be told after
// its transaction commits (Outbox.Tell).
type Untold struct {
	batch int64  // the payhook_untold_batches row that holds it
	row   int64  // the fact's row id
	body  string // the fact as stored, told as a delivery the sweep makes of it would be
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
// routed, and the row that holds it, one statement on PostgreSQL.
func emitUntold(ctx context.Context, db *store.DB, tx *sql.Tx, f Fact, body string, now time.Time) (Emitted, error) {
	var id, batch int64
	if db.Engine == store.Postgres {
		err := tx.QueryRowContext(ctx, `WITH f AS (INSERT INTO payhook_facts (fact_id, type, source, subject, body, routed, created_at)
				VALUES ($1, $2, $3, $4, $5, TRUE, $6)
				ON CONFLICT (fact_id) DO NOTHING
				RETURNING id),
			b AS (INSERT INTO payhook_untold_batches (facts, created_at) SELECT '[' || id || ']', $6 FROM f
				RETURNING id)
			SELECT f.id, b.id FROM f, b`, f.ID, f.Type, f.Source, payhook.Storable(f.Subject), body, db.TimeValue(now)).Scan(&id, &batch)
		if errors.Is(err, sql.ErrNoRows) {
			return Emitted{}, nil
		}
		if err != nil {
			return Emitted{}, fmt.Errorf("emit fact %s (%s %s): %w", f.ID, f.Type, f.Subject, err)
		}
	} else {
		var err error
		if id, err = insertFact(ctx, tx, db, f, body, true, now); err != nil || id == 0 {
			return Emitted{}, err
		}
		if batch, err = holdUntold(ctx, db, tx, []int64{id}, now); err != nil {
			return Emitted{}, fmt.Errorf("emit fact %s (%s %s): %w", f.ID, f.Type, f.Subject, err)
		}
	}
	return untoldEmitted(batch, id, body), nil
}

// untoldEmitted is what Emit wrote for an untold fact stored with body as
// row id, held by batch.
func untoldEmitted(batch, id int64, body string) Emitted {
	return Emitted{Written: true, Untold: &Untold{batch: batch, row: id, body: body}}
}

// holdUntold writes the row of payhook_untold_batches that holds the
// facts with row ids facts, written in tx, and returns its id.
func holdUntold(ctx context.Context, db *store.DB, tx *sql.Tx, facts []int64, now time.Time) (int64, error) {
	var batch int64
	err := tx.QueryRowContext(ctx, `INSERT INTO payhook_untold_batches (facts, created_at) VALUES ($1, $2) RETURNING id`,
		store.JSONIDs(facts), db.TimeValue(now)).Scan(&batch)
	if err != nil {
		return 0, fmt.Errorf("hold %d untold facts: %w", len(facts), err)
	}
	return batch, nil
}

// emitUntoldMany is EmitMany of the facts routed to Unrecorded sinks only
// (those marked together): the facts, in their order, then the one row
// that holds them all; it sets what each wrote in out. Of two facts with
// one id, the first is written.
func emitUntoldMany(ctx context.Context, db *store.DB, tx *sql.Tx, facts []Fact, together []bool, out []Emitted, now time.Time) error {
	written, bodies, err := insertFacts(ctx, db, tx, facts, together, now)
	if err != nil {
		return err
	}
	var ids []int64
	for _, id := range written {
		if id != 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	batch, err := holdUntold(ctx, db, tx, ids, now)
	if err != nil {
		return fmt.Errorf("emit %d facts: %w", len(facts), err)
	}
	for i, id := range written {
		if id != 0 {
			out[i] = untoldEmitted(batch, id, bodies[i])
		}
	}
	return nil
}

// Tell sends facts, whose transaction has committed, to the sinks their
// types route to, one after the other (a fact given twice, once), and
// deletes the rows that hold them once every sink took them. A fact whose
// sink is paused, not configured here or no longer Unrecorded is not told
// here: the sweep routes it, a delivery per sink.
//
// The sweep and Tell may both look at a row once SweepAge has gone by
// (Tell comes late when its worker first sent a batch's deliveries to a
// slow webhook): before sending, Tell claims the rows that hold its facts
// with one conditional UPDATE that restarts their age, and sends only the
// facts of the rows it found still there. The row decides: one the sweep
// took first (it deletes it) is not told here, and one Tell claimed first
// is not the sweep's until SweepAge after the claim; Tell sends for
// AttemptTimeout at most after it (less than SweepAge: 30 seconds and a
// minute by default). A row none of whose facts was told (a sink failed,
// a warning is logged, or the time ran out) is left as it is, and the
// sweep routes its facts SweepAge after the claim. A row told in part is
// replaced by what is left of it: a payhook_untold row for each fact no
// sink took (one a sink failed, one not sent in time, one not told here,
// one not among facts), which the sweep routes SweepAge after the claim,
// and a pending delivery to each sink left of a fact some sinks took,
// which the sweep enqueues SweepAge after the claim: the sinks that took
// it do not get it again. It returns the error of reading the paused
// sinks, of claiming the rows or of ending them; the facts are then told
// by the sweep (again, to the sinks that took them before that failed).
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
	facts = onceEach(facts)
	type telling struct {
		fact   Fact
		routes []*route
	}
	todo := make(map[int64]telling, len(facts))
	var batches []int64 // the rows to claim, in the order of facts
	seen := map[int64]bool{}
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
			if !seen[u.batch] {
				seen[u.batch] = true
				batches = append(batches, u.batch)
			}
		}
	}
	if len(batches) == 0 {
		return nil
	}
	at := o.cfg.Now()
	claimed, err := o.claimBatches(ctx, batches, at)
	if err != nil {
		return fmt.Errorf("tell %d facts: %w", len(todo), err)
	}
	if len(claimed) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, o.cfg.AttemptTimeout)
	defer cancel()
	down := map[string]bool{}
	sent := make(map[int64][]string, len(todo)) // fact → the sinks it missed; absent: not told
	for _, u := range facts {
		t, ok := todo[u.row]
		if _, mine := claimed[u.batch]; !ok || !mine || sctx.Err() != nil {
			continue // not told here; past the claim's time, left to the sweep
		}
		missed := []string{}
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
		if len(t.routes) == 0 || len(missed) < len(t.routes) {
			sent[u.row] = missed // some sink took it, or none takes it
		}
	}
	var done []int64
	var parts []rest
	for _, b := range batches {
		ids, ok := claimed[b]
		if !ok {
			continue
		}
		r := rest{batch: b}
		for _, id := range ids {
			missed, told := sent[id]
			if !told {
				r.untold = append(r.untold, id)
			}
			for _, sink := range missed {
				r.left = append(r.left, []any{id, sink})
			}
		}
		switch {
		case len(r.untold) == len(ids):
			// Nothing told: the row stays, the sweep's SweepAge after the claim.
		case len(r.untold) == 0 && len(r.left) == 0:
			done = append(done, b)
		default:
			parts = append(parts, r)
		}
	}
	if len(done) == 0 && len(parts) == 0 {
		return nil
	}
	// Written whatever ctx became: the sends happened.
	if err := o.told(context.WithoutCancel(ctx), done, parts, at); err != nil {
		return fmt.Errorf("tell %d facts: %w", len(sent), err)
	}
	return nil
}

// onceEach returns facts with each fact once, the first time it comes:
// one given twice is told once.
func onceEach(facts []Untold) []Untold {
	seen := make(map[int64]bool, len(facts))
	out := make([]Untold, 0, len(facts))
	for _, u := range facts {
		if !seen[u.row] {
			seen[u.row] = true
			out = append(out, u)
		}
	}
	return out
}

// rest is what is left of a batch of untold facts told in part: the
// facts no sink took, and (fact, sink) of those some sinks took.
type rest struct {
	batch  int64
	untold []int64
	left   [][]any
}

// told deletes the rows of the batches done, whose every fact was told,
// and replaces those of parts, told in part, with what is left of them:
// a payhook_untold row per fact no sink took, claimed at (the sweep's
// SweepAge after), and a pending delivery per (fact, sink) left, for the
// sweep to enqueue SweepAge from now; in one transaction when there are
// parts. A batch the sweep took first is left as the sweep routed it.
func (o *Outbox) told(ctx context.Context, done []int64, parts []rest, at time.Time) error {
	db := o.cfg.DB
	if len(parts) == 0 {
		in, arg := db.InIDs("id", 1, done)
		_, err := db.SQL.ExecContext(ctx, `DELETE FROM payhook_untold_batches WHERE `+in, arg)
		return err
	}
	ids := append([]int64(nil), done...)
	for _, r := range parts {
		ids = append(ids, r.batch)
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	in, arg := db.InIDs("id", 1, ids)
	rows, err := tx.QueryContext(ctx, `DELETE FROM payhook_untold_batches WHERE `+in+` RETURNING id`, arg)
	if err != nil {
		return err
	}
	deleted, err := scanIDs(rows)
	if err != nil {
		return err
	}
	var untold, left [][]any
	for _, r := range parts {
		if slices.Contains(deleted, r.batch) {
			for _, id := range r.untold {
				untold = append(untold, []any{id})
			}
			left = append(left, r.left...)
		}
	}
	if len(untold) > 0 {
		err = store.QueryRows(ctx, tx, untold, `INSERT INTO payhook_untold (fact, created_at)
			SELECT CAST(j.value->>0 AS BIGINT), $2 FROM `+db.JSONRows()+`
			WHERE TRUE
			ON CONFLICT (fact) DO NOTHING`, []any{db.TimeValue(at)}, nil)
		if err != nil {
			return fmt.Errorf("%d facts not told: %w", len(untold), err)
		}
	}
	if len(left) > 0 {
		err = store.QueryRows(ctx, tx, left, `INSERT INTO payhook_deliveries (fact, sink, status, created_at, updated_at, enqueued_at)
			SELECT CAST(j.value->>0 AS BIGINT), j.value->>1, 'pending', $2, $2, $2
			FROM `+db.JSONRows()+`
			WHERE TRUE
			ON CONFLICT (fact, sink) DO NOTHING`, []any{db.TimeValue(o.cfg.Now())}, nil)
		if err != nil {
			return fmt.Errorf("deliveries of %d sinks not told: %w", len(left), err)
		}
	}
	return tx.Commit()
}

// scanIDs reads rows of one id each, closes them, and returns the ids in
// the order read.
func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// claimBatches restarts the age of the rows that hold the untold facts of
// batches, so that the sweep leaves them for SweepAge from at, and
// returns the facts each row found holds: those the sweep took are not
// there.
func (o *Outbox) claimBatches(ctx context.Context, batches []int64, at time.Time) (map[int64][]int64, error) {
	in, arg := o.cfg.DB.InIDs("id", 2, batches)
	rows, err := o.cfg.DB.SQL.QueryContext(ctx, `UPDATE payhook_untold_batches SET created_at = $1 WHERE `+in+`
		RETURNING id, facts`, o.cfg.DB.TimeValue(at), arg)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	claimed := make(map[int64][]int64, len(batches))
	for rows.Next() {
		var id int64
		var facts string
		if err := rows.Scan(&id, &facts); err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		var ids []int64
		if err := json.Unmarshal([]byte(facts), &ids); err != nil {
			return nil, fmt.Errorf("claim: untold batch %d: %w", id, err)
		}
		claimed[id] = ids
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return claimed, nil
}

// sweepUntold routes, in tx, about limit facts left untold since before,
// oldest first, and returns their deliveries' ids: those of payhook_untold
// (a row each), then, while fewer than limit were taken, those of
// payhook_untold_batches, a row at a time. Deleting the row decides who
// routes a fact; on PostgreSQL the sweep skips rows another transaction
// holds (a Tell deleting them, another instance's sweep), so that it
// never waits for them: no deadlock with Tell's delete, which locks its
// rows in whatever order its plan reads them.
func (o *Outbox) sweepUntold(ctx context.Context, tx *sql.Tx, now, before time.Time, limit int) ([]int64, error) {
	db := o.cfg.DB
	// Both picks are MATERIALIZED, run once: with statistics that say
	// the table is about empty, PostgreSQL runs an IN (SELECT ... LIMIT n
	// FOR UPDATE SKIP LOCKED) again for each row of a nested loop, each
	// run skipping the rows just deleted, and the DELETE takes every row
	// old enough (TestSweepUntoldWithAlmostEmptyStats).
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`WITH picked AS MATERIALIZED (SELECT fact FROM payhook_untold
			WHERE created_at < $1 ORDER BY fact LIMIT %d%s)
		DELETE FROM payhook_untold WHERE fact IN (SELECT fact FROM picked)
		RETURNING fact`, limit, db.SkipLocked()), db.TimeValue(before))
	if err != nil {
		return nil, fmt.Errorf("outbox sweep: untold facts: %w", err)
	}
	taken, err := scanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("outbox sweep: untold facts: %w", err)
	}
	for len(taken) < limit {
		// Every row deleted must be routed: all that the DELETE returns
		// is read.
		rows, err := tx.QueryContext(ctx, `WITH picked AS MATERIALIZED (SELECT id FROM payhook_untold_batches
				WHERE created_at < $1 ORDER BY id LIMIT 1`+db.SkipLocked()+`)
			DELETE FROM payhook_untold_batches WHERE id IN (SELECT id FROM picked)
			RETURNING facts`, db.TimeValue(before))
		if err != nil {
			return nil, fmt.Errorf("outbox sweep: untold batch: %w", err)
		}
		held, err := scanHeld(rows)
		if err != nil {
			return nil, fmt.Errorf("outbox sweep: untold batch: %w", err)
		}
		if len(held) == 0 {
			break
		}
		taken = append(taken, held...)
	}
	if len(taken) == 0 {
		return nil, nil
	}
	in, arg := db.InIDs("id", 1, taken)
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
	rows, err := o.cfg.DB.SQL.QueryContext(ctx, `SELECT f.type, count(*) FROM payhook_untold_facts u
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

// scanHeld reads rows of the facts column of payhook_untold_batches,
// closes them, and returns the fact ids every row holds.
func scanHeld(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var facts string
		if err := rows.Scan(&facts); err != nil {
			return nil, err
		}
		var held []int64
		if err := json.Unmarshal([]byte(facts), &held); err != nil {
			return nil, fmt.Errorf("facts %q: %w", facts, err)
		}
		ids = append(ids, held...)
	}
	return ids, rows.Err()
}
