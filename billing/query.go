package billing

import (
	"context"
	"fmt"
	"strings"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// scanner is a row to scan: a *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// list runs a read query on db's pool and scans every row with scan; what
// prefixes its errors. It never returns a nil slice without an error.
func list[T any](ctx context.Context, db *store.DB, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
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

// AmbiguousError: a provider reference (or an application's order id)
// exists in several sources and no source was given. It wraps
// payhook.ErrConflict (the API answers 409); read the sources with
// errors.As.
type AmbiguousError struct {
	// What is "payment", "subscription" or "order".
	What    string
	Ref     string
	Sources []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s %s exists in several sources: %s", e.What, e.Ref, strings.Join(e.Sources, ", "))
}

// Unwrap returns payhook.ErrConflict.
func (e *AmbiguousError) Unwrap() error { return payhook.ErrConflict }

// onlySource returns the one source whose table holds ref in column: none
// is an error wrapping payhook.ErrNotFound, several an *AmbiguousError.
// table and column are payhook's own names, never user input.
func onlySource(ctx context.Context, db *store.DB, what, table, column, ref string) (string, error) {
	sources, err := list(ctx, db, "find "+what+" "+ref, func(row scanner) (s string, err error) {
		return s, row.Scan(&s)
	}, `SELECT DISTINCT source FROM `+table+` WHERE `+column+` = $1 ORDER BY source`, ref)
	if err != nil {
		return "", err
	}
	switch len(sources) {
	case 0:
		return "", fmt.Errorf("%s %s: %w", what, ref, payhook.ErrNotFound)
	case 1:
		return sources[0], nil
	}
	return "", &AmbiguousError{What: what, Ref: ref, Sources: sources}
}
