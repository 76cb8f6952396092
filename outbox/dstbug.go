//go:build !dst

package outbox

import (
	"context"
	"time"

	"github.com/payhook/payhook/store"
)

// dstBug reports whether the deterministic simulation (internal/dst) has
// put bug back on purpose. Outside a -tags dst build it is false, a
// constant the compiler removes with the code it guards.
func dstBug(bug string) bool { return false }

// emitOutside is the bug of a -tags dst build (dstbug_on.go); never
// called in any other.
func emitOutside(context.Context, *store.DB, Fact, string, time.Time) (Emitted, error) {
	panic("outbox: emitOutside outside a -tags dst build")
}
