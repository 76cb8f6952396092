//go:build !dst

package jobs

import (
	"context"

	"github.com/payhook/payhook"
)

// dstBug reports whether the deterministic simulation (internal/dst) has
// put bug back on purpose. Outside a -tags dst build it is false, a
// constant the compiler removes with the code it guards.
func dstBug(bug string) bool { return false }

// checkThenInsert is the bug of a -tags dst build (dstbug_on.go); never
// called in any other.
func (q *Queue) checkThenInsert(context.Context, []*payhook.Event) ([]bool, error) {
	panic("jobs: checkThenInsert outside a -tags dst build")
}
