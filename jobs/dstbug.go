//go:build !dst

package jobs

// dstBug reports whether the deterministic simulation (internal/dst) has
// put bug back on purpose. Outside a -tags dst build it is false, a
// constant the compiler removes with the code it guards.
func dstBug(bug string) bool { return false }
