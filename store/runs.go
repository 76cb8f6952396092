package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/payhook/payhook"
)

// RunKind is what a reconcile run does.
type RunKind string

// The kinds of run.
const (
	// RunBackfill lists the provider's events and stores those missing.
	RunBackfill RunKind = "backfill"
	// RunReconcile compares the provider's objects with the billing state.
	RunReconcile RunKind = "reconcile"
)

// Run is one backfill or reconcile run of a source, as recorded in
// payhook_reconcile_runs.
type Run struct {
	// ID is the run's row id.
	ID int64 `json:"id"`
	// Kind is backfill or reconcile.
	Kind RunKind `json:"kind"`
	// Source is the configured source the run lists.
	Source string `json:"source"`
	// Params are the run's filters besides its window, as its kind
	// encodes them (a backfill: its event types and options); only a run
	// with the same Params resumes it.
	Params string `json:"params,omitempty"`
	// From and Until bound the window listed; zero means unbounded.
	From  time.Time `json:"from,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// StartedAt, UpdatedAt and FinishedAt: when it began, last recorded
	// progress, and ended (zero while running, or after a crash).
	StartedAt  time.Time `json:"started_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Listed counts the items the provider listed; New those stored by
	// this run; Known those payhook had already; Refused those that failed
	// the envelope checks (reported, never stored).
	Listed  int64 `json:"listed"`
	New     int64 `json:"new"`
	Known   int64 `json:"known"`
	Refused int64 `json:"refused"`
	// Differences counts a reconcile's differences.
	Differences int64 `json:"differences"`
	// Unchecked counts the objects a reconcile left unchecked, past its
	// cap on retrieves: neither compared nor counted in Differences.
	Unchecked int64 `json:"unchecked"`
	// Error is why the run failed; "" when it succeeded or still runs.
	Error string `json:"error,omitempty"`
	// Cursor is the provider's cursor after the last page fully stored:
	// where a resumed run lists on.
	Cursor string `json:"cursor,omitempty"`
	// Resumes is the run this one resumes (0 for none); ResumedBy the run
	// that resumed this one, or its own id when it was given up
	// (GiveUpRun).
	Resumes   int64 `json:"resumes,omitempty"`
	ResumedBy int64 `json:"resumed_by,omitempty"`
}

// Finished reports whether the run ended (succeeded or failed).
func (r *Run) Finished() bool { return !r.FinishedAt.IsZero() }

// Failed reports whether the run ended with an error.
func (r *Run) Failed() bool { return r.Finished() && r.Error != "" }

const runColumns = `id, kind, source, params, window_from, window_until, started_at, updated_at, finished_at,
	listed, new, known, refused, differences, unchecked, error, cursor, COALESCE(resumes, 0), COALESCE(resumed_by, 0)`

func scanRun(row interface{ Scan(...any) error }) (*Run, error) {
	var r Run
	var kind string
	err := row.Scan(&r.ID, &kind, &r.Source, &r.Params, nullTime{&r.From}, nullTime{&r.Until},
		nullTime{&r.StartedAt}, nullTime{&r.UpdatedAt}, nullTime{&r.FinishedAt},
		&r.Listed, &r.New, &r.Known, &r.Refused, &r.Differences, &r.Unchecked, &r.Error, &r.Cursor, &r.Resumes, &r.ResumedBy)
	if err != nil {
		return nil, err
	}
	r.Kind = RunKind(kind)
	return &r, nil
}

// StartRun records the start of run r at time at (r's Kind, Source,
// Params, From, Until, Cursor and Resumes; its counts start at zero) and
// sets r.ID, r.StartedAt and r.UpdatedAt. It returns an error wrapping
// payhook.ErrInvalid for an unknown kind or an empty source.
func (db *DB) StartRun(ctx context.Context, r *Run, at time.Time) error {
	if r.Kind != RunBackfill && r.Kind != RunReconcile {
		return fmt.Errorf("start run: kind %q is neither backfill nor reconcile: %w", r.Kind, payhook.ErrInvalid)
	}
	if r.Source == "" {
		return fmt.Errorf("start %s run: no source: %w", r.Kind, payhook.ErrInvalid)
	}
	var resumes any
	if r.Resumes != 0 {
		resumes = r.Resumes
	}
	err := db.SQL.QueryRowContext(ctx, `INSERT INTO payhook_reconcile_runs
		(kind, source, params, window_from, window_until, started_at, updated_at, cursor, resumes)
		VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8) RETURNING id`,
		string(r.Kind), r.Source, r.Params, db.TimeValue(r.From), db.TimeValue(r.Until),
		db.TimeValue(at), r.Cursor, resumes).Scan(&r.ID)
	if err != nil {
		return fmt.Errorf("start %s run of %s: %w", r.Kind, r.Source, err)
	}
	r.StartedAt, r.UpdatedAt = at.UTC().Truncate(time.Microsecond), at.UTC().Truncate(time.Microsecond)
	return nil
}

// RecordRun writes r's progress at time at: its counts and cursor, so
// that a run cut short is resumed from the cursor. It returns an error
// wrapping payhook.ErrNotFound when there is no such unfinished run.
func (db *DB) RecordRun(ctx context.Context, r *Run, at time.Time) error {
	return db.updateRun(ctx, r, at, false)
}

// FinishRun records the end of r at time at: its counts, cursor and
// Error ("" for a success; made storable). It returns an error wrapping
// payhook.ErrNotFound when there is no such unfinished run.
func (db *DB) FinishRun(ctx context.Context, r *Run, at time.Time) error {
	return db.updateRun(ctx, r, at, true)
}

func (db *DB) updateRun(ctx context.Context, r *Run, at time.Time, finish bool) error {
	var finishedAt any
	if finish {
		finishedAt = db.TimeValue(at)
	}
	r.Error = payhook.Storable(r.Error)
	res, err := db.SQL.ExecContext(ctx, `UPDATE payhook_reconcile_runs
		SET updated_at = $2, finished_at = $3, listed = $4, new = $5, known = $6, refused = $7,
			differences = $8, unchecked = $9, error = $10, cursor = $11
		WHERE id = $1 AND finished_at IS NULL`,
		r.ID, db.TimeValue(at), finishedAt, r.Listed, r.New, r.Known, r.Refused, r.Differences, r.Unchecked, r.Error, r.Cursor)
	if err != nil {
		return fmt.Errorf("record %s run %d: %w", r.Kind, r.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("record %s run %d: no such unfinished run: %w", r.Kind, r.ID, payhook.ErrNotFound)
	}
	r.UpdatedAt = at.UTC().Truncate(time.Microsecond)
	if finish {
		r.FinishedAt = r.UpdatedAt
	}
	return nil
}

// Run returns the run with row id id, or an error wrapping
// payhook.ErrNotFound.
func (db *DB) Run(ctx context.Context, id int64) (*Run, error) {
	r, err := scanRun(db.SQL.QueryRowContext(ctx, `SELECT `+runColumns+` FROM payhook_reconcile_runs WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, payhook.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %d: %w", id, err)
	}
	return r, nil
}

// RunFilter selects runs for Runs. Zero fields match everything.
type RunFilter struct {
	Source string
	Kind   RunKind
	// Limit caps the result; 0 means 100.
	Limit int
}

// Runs returns the matching runs, newest first.
func (db *DB) Runs(ctx context.Context, f RunFilter) ([]*Run, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT `+runColumns+` FROM payhook_reconcile_runs
		WHERE ($1 = '' OR source = $1) AND ($2 = '' OR kind = $2)
		ORDER BY id DESC LIMIT $3`, f.Source, string(f.Kind), f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []*Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// GiveUpRun marks the run of id, cut short, as one no run resumes: its
// ResumedBy becomes its own id. A run resumed already is left as it is.
func (db *DB) GiveUpRun(ctx context.Context, id int64) error {
	if _, err := db.SQL.ExecContext(ctx, `UPDATE payhook_reconcile_runs SET resumed_by = id WHERE id = $1 AND resumed_by IS NULL`, id); err != nil {
		return fmt.Errorf("give up run %d: %w", id, err)
	}
	return nil
}

// ResumeRun starts, at time at, the run that resumes the latest run of
// kind and source with these params that was cut short and not resumed
// yet: a new run over the same window, from its cursor, whose Resumes
// names it. A run was cut short when it failed, or when it is unfinished
// and recorded no progress since stale (a crash); an unfinished run that
// did is taken to be still going on. It returns nil and no error when
// there is none to resume. Only one run resumes a run: a conditional
// UPDATE decides.
func (db *DB) ResumeRun(ctx context.Context, kind RunKind, source, params string, stale, at time.Time) (*Run, error) {
	for {
		r, claimed, err := db.resumeRun(ctx, kind, source, params, stale, at)
		if err != nil || claimed {
			return r, err
		}
		// Another run resumed it first: look again.
	}
}

func (db *DB) resumeRun(ctx context.Context, kind RunKind, source, params string, stale, at time.Time) (*Run, bool, error) {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("resume a %s run of %s: %w", kind, source, err)
	}
	defer tx.Rollback()
	old, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM payhook_reconcile_runs
		WHERE kind = $1 AND source = $2 AND params = $3 AND resumed_by IS NULL
			AND ((finished_at IS NULL AND updated_at < $4) OR (finished_at IS NOT NULL AND error <> ''))
		ORDER BY id DESC LIMIT 1`, string(kind), source, params, db.TimeValue(stale)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("find a %s run of %s to resume: %w", kind, source, err)
	}
	r := &Run{Kind: kind, Source: source, Params: params, From: old.From, Until: old.Until, Cursor: old.Cursor, Resumes: old.ID}
	err = tx.QueryRowContext(ctx, `INSERT INTO payhook_reconcile_runs
		(kind, source, params, window_from, window_until, started_at, updated_at, cursor, resumes)
		VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8) RETURNING id`,
		string(kind), source, params, db.TimeValue(r.From), db.TimeValue(r.Until), db.TimeValue(at), r.Cursor, old.ID).Scan(&r.ID)
	if err != nil {
		return nil, false, fmt.Errorf("start the run resuming %s run %d: %w", kind, old.ID, err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE payhook_reconcile_runs SET resumed_by = $2
		WHERE id = $1 AND resumed_by IS NULL`, old.ID, r.ID)
	if err != nil {
		return nil, false, fmt.Errorf("claim %s run %d: %w", kind, old.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, false, nil
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("resume %s run %d: %w", kind, old.ID, err)
	}
	r.StartedAt, r.UpdatedAt = at.UTC().Truncate(time.Microsecond), at.UTC().Truncate(time.Microsecond)
	return r, true, nil
}
