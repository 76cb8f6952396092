package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// eventWhere returns the WHERE clause ("" or " WHERE ...") and arguments
// of f's conditions; Limit is not one.
func (db *DB) eventWhere(f Filter) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Source != "" {
		add("source = $%d", f.Source)
	}
	switch {
	case f.Status.Valid():
		// A literal, not a parameter: the index of the events not
		// processed is partial, and a plan made for any value of a
		// parameter (PostgreSQL's generic plan of a prepared statement)
		// cannot use it.
		where = append(where, "status = '"+string(f.Status)+"'")
	case f.Status != "":
		add("status = $%d", string(f.Status))
	}
	if f.EventID != "" {
		add("event_id = $%d", f.EventID)
	}
	if f.Type != "" {
		add("type = $%d", f.Type)
	}
	if f.Via != "" {
		add("received_via = $%d", string(f.Via))
	}
	if !f.Since.IsZero() {
		add("received_at >= $%d", db.TimeValue(f.Since))
	}
	if !f.Until.IsZero() {
		add("received_at < $%d", db.TimeValue(f.Until))
	}
	if f.Before > 0 {
		add("id < $%d", f.Before)
	}
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// EventIDs returns the row ids of all the events f matches, oldest first;
// f.Limit is ignored. It reads ids only, for a bulk operation to go
// through them in batches.
func (db *DB) EventIDs(ctx context.Context, f Filter) ([]int64, error) {
	where, args := db.eventWhere(f)
	rows, err := db.SQL.QueryContext(ctx, `SELECT id FROM payhook_events`+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list event ids: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list event ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list event ids: %w", err)
	}
	return ids, nil
}

// ResetEventsIfTx is ResetEventTx for many events at once, each only if
// its status is still status (never ignored): it puts them back to
// received, enqueued at time at, and returns the ids it changed. The
// UPDATE's condition decides, so an event whose status moved since the
// caller read it (another replay, a retry that succeeded) is left alone
// and not returned.
func (db *DB) ResetEventsIfTx(ctx context.Context, tx *sql.Tx, ids []int64, status payhook.Status, at time.Time) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if status == payhook.StatusIgnored || !status.Valid() {
		return nil, fmt.Errorf("reset events: status %q cannot be replayed: %w", status, payhook.ErrInvalid)
	}
	in, arg := db.InIDs("id", 3, ids)
	rows, err := tx.QueryContext(ctx, `UPDATE payhook_events
		SET status = 'received', processed_at = NULL, last_error = '', enqueued_at = $2
		WHERE status = $1 AND `+in+`
		RETURNING id`, string(status), db.TimeValue(at), arg)
	if err != nil {
		return nil, fmt.Errorf("reset %d events: %w", len(ids), err)
	}
	defer rows.Close()
	var done []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reset %d events: %w", len(ids), err)
		}
		done = append(done, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reset %d events: %w", len(ids), err)
	}
	return done, nil
}
