package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store/storetest"
)

// TestProbes checks drain's probe and count on both engines where
// another source's events wait too, before and among the bench's own:
// they count for nothing, and the probe finds the bench's own waiting
// after them and says none wait once those are processed.
func TestProbes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := storetest.Migrated(t, dbURL)
		at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
		var evs []*payhook.Event
		for i, source := range []string{"other", "other", "stripe", "other", "stripe", "stripe"} {
			evs = append(evs, &payhook.Event{Source: source, EventID: fmt.Sprint("evt_", i), Type: "payment_intent.succeeded",
				OccurredAt: at, ReceivedAt: at, Payload: []byte(`{}`), Status: payhook.StatusReceived})
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.InsertEventsTx(ctx, tx, evs); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		waiting, count := probes(db.SQL, "stripe")
		check := func(wantWaiting bool, wantCount int64) {
			t.Helper()
			w, err := waiting(ctx)
			if err != nil || w != wantWaiting {
				t.Fatalf("waiting = %v, %v; want %v", w, err, wantWaiting)
			}
			n, err := count(ctx)
			if err != nil || n != wantCount {
				t.Fatalf("count = %d, %v; want %d", n, err, wantCount)
			}
		}
		check(true, 3)
		process := func(id string) {
			t.Helper()
			if _, err := db.SQL.ExecContext(ctx, `UPDATE payhook_events SET status = 'processed' WHERE event_id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}
		process("evt_2")
		process("evt_5")
		check(true, 1) // evt_4, behind another source's evt_3
		process("evt_4")
		check(false, 0)
	})
}
