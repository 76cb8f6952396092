package store

import (
	"fmt"
	"strconv"
	"strings"
)

// Row returns the placeholders of one row of a multi-row VALUES whose
// width arguments are numbered from first: "($3, $4)" on PostgreSQL, and
// on SQLite "(?, ?)", anonymous, each argument passed in its place.
// SQLite takes "$n" for a named parameter, and its driver looks up each
// parameter's name in a list as long as the statement's parameters as it
// binds them: a cost quadratic in them (2.7% of a c=64 bench's CPU, the
// group commit's insert having 12 per event).
func (db *DB) Row(first, width int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range width {
		if i > 0 {
			b.WriteString(", ")
		}
		if db.Engine == SQLite {
			b.WriteByte('?')
		} else {
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(first + i))
		}
	}
	b.WriteByte(')')
	return b.String()
}

// InIDs returns the condition that column col holds one of ids, with its
// one argument numbered $n. Its text does not depend on how many ids
// there are, so that each engine prepares it once, where a list of
// placeholders made a statement of its own for every length (pgx prepares
// each new text on every connection; SQLite's statement cache kept one
// per length): `col = ANY($n::bigint[])` on PostgreSQL, `col IN (SELECT
// value FROM json_each($n))` on SQLite, whose argument is the ids as a
// JSON array.
func (db *DB) InIDs(col string, n int, ids []int64) (cond string, arg any) {
	if db.Engine == SQLite {
		return fmt.Sprintf("%s IN (SELECT value FROM json_each($%d))", col, n), JSONIDs(ids)
	}
	return fmt.Sprintf("%s = ANY($%d::bigint[])", col, n), ids
}

// JSONIDs returns ids as a JSON array: [1,2,3].
func JSONIDs(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}
