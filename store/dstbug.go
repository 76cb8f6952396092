//go:build !dst

package store

// dstBug reports whether the deterministic simulation (internal/dst) has
// put bug back on purpose. Outside a -tags dst build it is false, a
// constant the compiler removes with the code it guards.
func dstBug(bug string) bool { return false }

// withoutCondition is the bug of a -tags dst build (dstbug_on.go); never
// called in any other.
func withoutCondition(query string) string { return query }
