//go:build dst

package store

import "strings"

// DSTBugs are the bugs the deterministic simulation (internal/dst) puts
// back on purpose, one at a time, to show that it finds them. Only a
// -tags dst build has it; internal/dst's tests set it.
var DSTBugs = map[string]bool{}

func dstBug(bug string) bool { return DSTBugs[bug] }

// withoutCondition is query without its "only if still received".
func withoutCondition(query string) string {
	return strings.Replace(query, " AND status = 'received'", "", 1)
}
