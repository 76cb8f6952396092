package process_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
)

// HandleBatch reads a batch's events on several cores (SQLite) and still
// answers as one by one, in order: the first event that cannot be read
// fails the batch, an ignored one is ignored, the others are applied.
func TestHandleBatchReadsInOrder(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	bad := func(n int) *payhook.Event {
		ev := checkout(n, now)
		ev.Payload = []byte(`{"id":"` + ev.EventID + `","type":"checkout.session.completed","created":1796115600,` +
			`"data":{"object":{"id":"cs_x","object":"checkout.session","mode":"payment","payment_status":"paid",` +
			`"payment_intent":"pi_x","amount_total":"many","currency":"usd"}}}`)
		return ev
	}
	ping := func(n int) *payhook.Event {
		ev := checkout(n, now)
		ev.Type, ev.Payload = "ping", []byte(`{"id":"`+ev.EventID+`","type":"ping","data":{"object":{}}}`)
		return ev
	}
	for _, c := range []struct {
		name    string
		odd     map[int]func(int) *payhook.Event
		failed  int // the event whose error fails the batch, -1 for none
		ignored int
	}{
		{"all applied", nil, -1, -1},
		{"the first unreadable fails the batch", map[int]func(int) *payhook.Event{5: bad, 30: bad}, 5, -1},
		{"an ignored one is ignored", map[int]func(int) *payhook.Event{7: ping}, -1, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := open(t, dbURL)
				cfg := config(t, db, []payhook.Source{{Name: "shop", Provider: "stripe"}}, now)
				var evs []*payhook.Event
				for n := range 40 {
					ev := checkout(n, now)
					if odd := c.odd[n]; odd != nil {
						ev = odd(n)
					}
					ev.ID = int64(n + 1)
					evs = append(evs, ev)
				}
				tx, err := db.SQL.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				errs, ok, err := cfg.Handlers.DispatchBatch(ctx, tx, evs)
				if c.failed >= 0 {
					if want := fmt.Sprintf("event %d:", c.failed+1); err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("DispatchBatch = %v; want the error of %q", err, want)
					}
					return
				}
				if err != nil || !ok {
					t.Fatalf("DispatchBatch = %v, %v", ok, err)
				}
				for i, err := range errs {
					if ignored := errors.Is(err, payhook.ErrIgnored); (err != nil && !ignored) || ignored != (i == c.ignored) {
						t.Errorf("event %d: %v", i, err)
					}
				}
				var payments int
				if err := tx.QueryRow(`SELECT COUNT(*) FROM payhook_payments`).Scan(&payments); err != nil {
					t.Fatal(err)
				}
				if want := 40 - len(c.odd); payments != want {
					t.Errorf("%d payments; want %d", payments, want)
				}
			})
		})
	}
}
