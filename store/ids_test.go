package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
)

// TestInIDs: the condition picks exactly the rows of the ids given (none,
// one, several, repeated, unknown, more than SQLite takes placeholders),
// with one statement text whatever their number.
func TestInIDs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		var evs []*payhook.Event
		for i := range 3 {
			evs = append(evs, newEvent(fmt.Sprint("evt_in_", i)))
		}
		insert(t, db, evs...)
		a, b, c := evs[0].ID, evs[1].ID, evs[2].ID
		many := make([]int64, 40000)
		for i := range many {
			many[i] = c + 1 + int64(i)
		}
		many = append(many, a)
		var texts []string
		for _, tc := range []struct {
			name string
			ids  []int64
			want []int64
		}{
			{"none", nil, nil},
			{"one", []int64{b}, []int64{b}},
			{"several", []int64{c, a}, []int64{a, c}},
			{"repeated", []int64{a, a, b}, []int64{a, b}},
			{"unknown", []int64{c + 1000}, nil},
			{"more than SQLite's placeholders", many, []int64{a}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in, arg := db.InIDs("id", 1, tc.ids)
				texts = append(texts, in)
				rows, err := db.SQL.QueryContext(ctx, `SELECT id FROM payhook_events WHERE `+in+` ORDER BY id`, arg)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var got []int64
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						t.Fatal(err)
					}
					got = append(got, id)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("rows %v; want %v", got, tc.want)
				}
			})
		}
		if distinct := slices.Compact(slices.Clone(texts)); len(distinct) != 1 {
			t.Errorf("statement texts %q for as many numbers of ids; want one", distinct)
		}
	})
}
