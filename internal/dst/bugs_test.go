//go:build dst

package dst

import (
	"context"
	"flag"
	"fmt"
	"testing"

	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

var survey = flag.Int("bug-survey", 0, "TestDSTFindsPutBackBugs runs this many seeds for each bug and reports which find it")

func init() {
	outbox.DSTOutside = func(ctx context.Context, query string, args ...any) error {
		return running.Load().writeOutside(ctx, query, args...)
	}
}

// putBack are bugs put back on purpose, one at a time, with the number of
// seeds within which the simulation must find each (go test -tags dst).
var putBack = []struct {
	bug    string
	set    func(on bool)
	within int
}{
	{"ack-before-commit", func(on bool) { jobs.DSTBugs["ack-before-commit"] = on }, 60},
	{"outbox-outside-tx", func(on bool) { outbox.DSTBugs["outbox-outside-tx"] = on }, 20},
	// An Unrecorded sink's fact deleted from the untold ones though its
	// sink failed: never told.
	{"told-despite-failure", func(on bool) { outbox.DSTBugs["told-despite-failure"] = on }, 20},
	// Without the unique index on (source, event_id), which it stands in
	// for, and which the run drops.
	{"check-then-insert", func(on bool) {
		jobs.DSTBugs["check-then-insert"] = on
		bugSchema = map[bool]string{true: `DROP INDEX payhook_events_event_id_source`}[on]
	}, 20},
	// Both statements that say "only if still received": the claim and
	// the finishing UPDATE.
	{"claim-without-condition", func(on bool) { store.DSTBugs["claim-without-condition"] = on }, 30},
}

// TestDSTFindsPutBackBugs puts each bug back and runs seeds from 1 until
// one breaks an invariant, failing when none does within its bound. The
// seeds are not parallel: the bug is the whole process's.
func TestDSTFindsPutBackBugs(t *testing.T) {
	for _, b := range putBack {
		t.Run(b.bug, func(t *testing.T) {
			b.set(true)
			defer b.set(false)
			if *survey > 0 {
				var found []int64
				for seed := int64(1); seed <= int64(*survey); seed++ {
					t.Run(fmt.Sprint(seed), func(t *testing.T) {
						if trySQLite(t, seed) != nil {
							found = append(found, seed)
						}
					})
				}
				t.Logf("%s: found by %d of seeds 1-%d: %v", b.bug, len(found), *survey, found)
				return
			}
			for seed := int64(1); seed <= int64(b.within); seed++ {
				var err error
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					err = trySQLite(t, seed)
				})
				if err != nil {
					t.Logf("%s found by seed %d; replay: go test -tags dst ./internal/dst -run 'TestDSTFindsPutBackBugs/%s/^%d$' -v\n%s",
						b.bug, seed, b.bug, seed, firstLines(err.Error(), 3))
					return
				}
			}
			t.Fatalf("%s not found within %d seeds", b.bug, b.within)
		})
	}
}
