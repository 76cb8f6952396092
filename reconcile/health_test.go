package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/reconcile"
)

// TestCheckSilence: a source silent for longer than its silence raises
// one alert per silent spell, however often it is checked; an event
// coming in clears it; a new spell raises it again.
func TestCheckSilence(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		receive := func(id string, at time.Time) {
			tx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			ev := &payhook.Event{Source: "shop", EventID: id, Type: "x", ReceivedAt: at, OccurredAt: at, Payload: []byte(`{}`), Status: payhook.StatusReceived}
			if _, err := db.InsertEventsTx(ctx, tx, []*payhook.Event{ev}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		alert := func() (count int, acked bool) {
			db.SQL.QueryRow(`SELECT count, acknowledged FROM payhook_alerts WHERE kind = $1`, reconcile.AlertSilence).Scan(&count, &acked)
			return
		}
		check := func(at time.Time, want bool) {
			t.Helper()
			if silent, err := reconcile.CheckSilence(ctx, db, "shop", time.Hour, at); silent != want || err != nil {
				t.Fatalf("CheckSilence at %s = %v, %v; want %v", at, silent, err, want)
			}
		}
		check(t0, false) // nothing ever received: not judged
		receive("evt_1", t0)
		check(t0.Add(30*time.Minute), false)
		check(t0.Add(2*time.Hour), true)
		check(t0.Add(3*time.Hour), true)
		if n, acked := alert(); n != 1 || acked {
			t.Fatalf("alert count %d, acknowledged %v; want raised once, open", n, acked)
		}
		receive("evt_2", t0.Add(3*time.Hour))
		check(t0.Add(3*time.Hour+time.Minute), false)
		if n, acked := alert(); n != 1 || !acked {
			t.Fatalf("alert count %d, acknowledged %v; want cleared", n, acked)
		}
		check(t0.Add(5*time.Hour), true)
		if n, acked := alert(); n != 2 || acked {
			t.Fatalf("alert count %d, acknowledged %v; want raised again for the new spell", n, acked)
		}
	})
}
