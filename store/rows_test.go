package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestJSONRows: rows given to QueryRows as one JSON parameter come back as they were,
// in their order, on both engines: text (quotes, backslashes, non-ASCII),
// the largest amounts, times to the microsecond, NULL.
func TestJSONRows(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 123456000, time.UTC)
	want := []struct {
		text   string
		amount int64
		at     time.Time
	}{
		{`pi_"quoted"\back`, payhook.MaxAmount, at},
		{"ørder ✓ 𝄞", -payhook.MaxAmount, time.Time{}},
		{"", 0, at.Add(time.Microsecond)},
		{"<a &b>\n\t\u2028\x01", 1, at}, // json.Marshal writes \u003c, \u0026, \u2028 and \u0001
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		var rows [][]any
		for _, w := range want {
			rows = append(rows, []any{w.text, w.amount, db.TimeValue(w.at)})
		}
		i := 0
		err := store.QueryRows(context.Background(), db.SQL, rows, `SELECT j.value->>0, CAST(j.value->>1 AS BIGINT), `+
			db.TimeColumn("j.value->>2")+` FROM `+db.JSONRows()+` ORDER BY j.n`, nil, func(r *sql.Rows) error {
			var text string
			var amount int64
			var got time.Time
			if err := r.Scan(&text, &amount, store.ScanTime(&got)); err != nil {
				return err
			}
			if w := want[i]; text != w.text || amount != w.amount || !got.Equal(w.at) {
				t.Errorf("row %d = %q %d %v; want %q %d %v", i, text, amount, got, w.text, w.amount, w.at)
			}
			i++
			return nil
		})
		if err != nil || i != len(want) {
			t.Fatalf("%d rows, %v; want %d", i, err, len(want))
		}
	})
}
