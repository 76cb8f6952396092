package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
)

// TestInsertBatch: one call with new events, stored ones and a key
// repeated inside the batch reports each place as a statement per event
// would: new at the first place of a new key, not inserted elsewhere; each
// inserted event gets the id of its row.
func TestInsertBatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		insert(t, db, newEvent("evt_old"))
		for _, tc := range []struct {
			name string
			ids  []string
			want []bool
		}{
			{"all new", []string{"evt_a", "evt_b", "evt_c"}, []bool{true, true, true}},
			{"mixed", []string{"evt_d", "evt_old", "evt_e", "evt_a"}, []bool{true, false, true, false}},
			{"repeated inside", []string{"evt_f", "evt_g", "evt_f", "evt_f"}, []bool{true, true, false, false}},
			{"all stored", []string{"evt_old", "evt_b"}, []bool{false, false}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				evs := make([]*payhook.Event, len(tc.ids))
				for i, id := range tc.ids {
					evs[i] = newEvent(id)
				}
				got := insert(t, db, evs...)
				for i, ev := range evs {
					if got[i] != tc.want[i] {
						t.Errorf("place %d (%s): inserted = %v; want %v", i, ev.EventID, got[i], tc.want[i])
					}
					if !got[i] {
						continue
					}
					stored, err := db.Event(ctx, ev.ID)
					if err != nil || stored.EventID != ev.EventID {
						t.Errorf("place %d (%s): id %d holds %+v, %v; want its row", i, ev.EventID, ev.ID, stored, err)
					}
				}
			})
		}
		// More rows than one statement takes, a key repeated across the
		// statements.
		var big []*payhook.Event
		for i := range 2500 {
			big = append(big, newEvent(fmt.Sprint("evt_big_", i)))
		}
		big = append(big, newEvent("evt_big_3"))
		got := insert(t, db, big...)
		for i, ins := range got {
			if ins != (i < 2500) {
				t.Fatalf("big batch, place %d: inserted = %v; want %v", i, ins, i < 2500)
			}
		}
		var n int
		if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events`).Scan(&n); err != nil || n != 2508 {
			t.Errorf("%d rows, %v; want 2508", n, err)
		}
	})
}
