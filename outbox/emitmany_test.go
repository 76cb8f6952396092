package outbox_test

import (
	"context"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
)

// EmitMany of facts for a recorded sink that are all stored already
// writes nothing and says so, as Emit of each would: no statement of the
// batch may take an empty list of rows for something else.
func TestEmitManyRoutedStoredBefore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		if err := box.AddFunc("hook", nil, func(context.Context, outbox.Fact) error { return nil }); err != nil {
			t.Fatal(err)
		}
		var facts []outbox.Fact
		for _, o := range []string{"ord_1", "ord_2"} {
			f, err := outbox.NewFact(outbox.OrderPaid, "shop", o, o, t0, map[string]string{"order_id": o})
			if err != nil {
				t.Fatal(err)
			}
			facts = append(facts, f)
		}
		for round, want := range []bool{true, false} {
			tx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			es, err := outbox.EmitMany(ctx, db, tx, box, facts, t0)
			if err != nil {
				tx.Rollback()
				t.Fatalf("round %d: %v", round, err)
			}
			for i, e := range es {
				if e.Written != want || (len(e.Deliveries) == 1) != want {
					t.Errorf("round %d, fact %d: %+v, want written %v with one delivery", round, i, e, want)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
