package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// Execer is what RaiseAlert writes through: a *sql.Tx or a *sql.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// RaiseAlert raises the alert (kind, subject) at now through exec, inside
// a transaction or on db.SQL (on SQLite, never on db.SQL while a
// transaction is open). The first time it inserts it; again, it counts one
// more, moves last_seen, keeps the newest message and makes it
// unacknowledged. The unique (kind, subject) index decides, so concurrent
// raises count each.
func RaiseAlert(ctx context.Context, db *store.DB, exec Execer, kind, subject, message string, now time.Time) error {
	if kind == "" {
		return errors.New("raise alert: empty kind")
	}
	_, err := exec.ExecContext(ctx, `INSERT INTO payhook_alerts
		(kind, subject, message, first_seen, last_seen, count, acknowledged)
		VALUES ($1, $2, $3, $4, $4, 1, FALSE)
		ON CONFLICT (kind, subject) DO UPDATE SET
			count = payhook_alerts.count + 1,
			last_seen = excluded.last_seen,
			message = excluded.message,
			acknowledged = FALSE`, kind, subject, message, db.TimeValue(now))
	if err != nil {
		return fmt.Errorf("raise alert %s %s: %w", kind, subject, err)
	}
	return nil
}

// AlertView is one alert.
type AlertView struct {
	ID           int64     `json:"id"`
	Kind         string    `json:"kind"`
	Subject      string    `json:"subject"`
	Message      string    `json:"message"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
	Count        int       `json:"count"`
	Acknowledged bool      `json:"acknowledged"`
}

// AlertFilter selects alerts for ListAlerts. Zero fields match everything.
type AlertFilter struct {
	Kind string
	// Unacknowledged, if set, returns only alerts not acknowledged.
	Unacknowledged bool
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListAlerts returns matching alerts, most recently seen first.
func ListAlerts(ctx context.Context, db *store.DB, f AlertFilter) ([]AlertView, error) {
	var q query
	if f.Kind != "" {
		q.where("kind = $%d", f.Kind)
	}
	if f.Unacknowledged {
		q.where("acknowledged = $%d", false)
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT id, kind, subject, message, first_seen, last_seen, count, acknowledged
		FROM payhook_alerts`+q.sql("last_seen DESC, id DESC", f.Limit), q.args...)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	defer rows.Close()
	out := []AlertView{}
	for rows.Next() {
		var v AlertView
		if err := rows.Scan(&v.ID, &v.Kind, &v.Subject, &v.Message, store.ScanTime(&v.FirstSeen),
			store.ScanTime(&v.LastSeen), &v.Count, &v.Acknowledged); err != nil {
			return nil, fmt.Errorf("list alerts: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return out, nil
}

// AckAlert acknowledges the alert with the id. It returns an error
// wrapping payhook.ErrNotFound if there is none.
func AckAlert(ctx context.Context, db *store.DB, id int64) error {
	res, err := db.SQL.ExecContext(ctx, `UPDATE payhook_alerts SET acknowledged = TRUE WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("acknowledge alert %d: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("alert %d: %w", id, payhook.ErrNotFound)
	}
	return nil
}

// query builds the WHERE, ORDER BY and LIMIT of a list query.
type query struct {
	conds []string
	args  []any
}

func (q *query) where(cond string, v any) {
	q.args = append(q.args, v)
	q.conds = append(q.conds, fmt.Sprintf(cond, len(q.args)))
}

func (q *query) sql(order string, limit int) string {
	if limit <= 0 {
		limit = 100
	}
	s := ""
	if len(q.conds) > 0 {
		s = " WHERE " + strings.Join(q.conds, " AND ")
	}
	return s + fmt.Sprintf(" ORDER BY %s LIMIT %d", order, limit)
}
