package billing

import (
	"fmt"
	"strings"
)

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
