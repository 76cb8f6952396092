package store_test

import (
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestIgnoredEventRaisesEnvironmentAlert: an event stored as ignored at
// ingest (payhook.NewEvent: another environment than its source's, or
// none) raises AlertEnvironmentMismatch for its source, once per event
// stored (a duplicate counts nothing), on both engines and both ways in.
// Before, such events were stored silently: a source configured with the
// other environment's secret dropped every event of the provider without
// an alert, and an ignored event cannot be replayed once it is fixed.
func TestIgnoredEventRaisesEnvironmentAlert(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		eachWayIn(t, db, func(way string, insert func(*testing.T, *store.DB, ...*payhook.Event) []bool) {
			src := payhook.Source{Name: way, Environment: "live"}
			event := func(id, env string) *payhook.Event {
				ev := newEvent(id)
				return payhook.NewEvent(src, payhook.Envelope{EventID: id, Type: ev.Type, Environment: env, OccurredAt: ev.OccurredAt},
					ev.Payload, ev.ReceivedAt)
			}
			alert := func() (count int, msg string) {
				t.Helper()
				err := db.SQL.QueryRow(`SELECT count, message FROM payhook_alerts WHERE kind = $1 AND subject = $2`,
					store.AlertEnvironmentMismatch, way).Scan(&count, &msg)
				if err != nil && !strings.Contains(err.Error(), "no rows") {
					t.Fatal(err)
				}
				return count, msg
			}
			for _, step := range []struct {
				name      string
				evs       []*payhook.Event
				wantCount int
				wantMsg   string
			}{
				{"an event of the source's environment", []*payhook.Event{event("evt_live", "live")}, 0, ""},
				{"a test event on a live source", []*payhook.Event{event("evt_test", "test")}, 1, `evt_test`},
				{"the same again", []*payhook.Event{event("evt_test", "test")}, 1, `evt_test`},
				{"two more in one batch, one without an environment", []*payhook.Event{event("evt_t2", "test"), event("evt_none", "")}, 3, `evt_none`},
			} {
				insert(t, db, step.evs...)
				count, msg := alert()
				if count != step.wantCount || !strings.Contains(msg, step.wantMsg) {
					t.Fatalf("%s: %s: alert count %d, message %q; want %d, naming %q", way, step.name, count, msg, step.wantCount, step.wantMsg)
				}
			}
		})
	})
}
