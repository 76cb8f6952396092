//go:build dst

package outbox

import (
	"context"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// DSTBugs are the bugs the deterministic simulation (internal/dst) puts
// back on purpose, one at a time, to show that it finds them. Only a
// -tags dst build has it; internal/dst's tests set it.
var DSTBugs = map[string]bool{}

func dstBug(bug string) bool { return DSTBugs[bug] }

// DSTOutside runs one statement outside the caller's transaction, on a
// connection of its own, committed whatever becomes of that transaction:
// internal/dst sets it.
var DSTOutside func(ctx context.Context, query string, args ...any) error

// emitOutside is Emit with the bug "outbox-outside-tx": the fact is
// written on its own, outside the transaction of the billing change that
// made it, and so without its deliveries (the sweep routes it later).
func emitOutside(ctx context.Context, db *store.DB, f Fact, body string, now time.Time) (Emitted, error) {
	err := DSTOutside(ctx, `INSERT INTO payhook_facts (fact_id, type, source, subject, body, routed, created_at)
		VALUES ($1, $2, $3, $4, $5, FALSE, $6) ON CONFLICT (fact_id) DO NOTHING`,
		f.ID, f.Type, f.Source, payhook.Storable(f.Subject), body, db.TimeValue(now))
	return Emitted{Written: err == nil}, err
}
