package api_test

import (
	"context"
	"testing"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store/storetest"
)

// TestAckWithCountSeenKeepsANewOccurrenceOpen: a client lists the
// alerts (count 1), the alert is raised again, and the client
// acknowledges what it saw (?count=1): the alert stays open (409), so
// the occurrence raised since is not hidden; an ack of the count as it
// is now goes through.
func TestAckWithCountSeenKeepsANewOccurrenceOpen(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := storetest.Migrated(t, dbURL)
		raise := func() {
			ctx := context.Background()
			tx, err := billing.Begin(ctx, db, t0)
			if err != nil {
				t.Fatal(err)
			}
			if err := billing.RaiseAlert(ctx, tx, "source_silent", "shop", "silent"); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		raise()
		c := serve(t, db)
		var l struct{ Alerts []billing.AlertView }
		c.get("/api/v1/alerts?acknowledged=false", &l)
		if len(l.Alerts) != 1 || l.Alerts[0].Count != 1 {
			t.Fatalf("alerts = %+v; want one, count 1", l.Alerts)
		}
		id := l.Alerts[0].ID
		raise()
		var e errorBody
		c.call("POST", "/api/v1/alerts/"+itoa(id)+"/ack?count=1", 409, &e)
		c.get("/api/v1/alerts?acknowledged=false", &l)
		if len(l.Alerts) != 1 || l.Alerts[0].Count != 2 {
			t.Fatalf("open alerts after the stale ack = %+v; want the one, count 2", l.Alerts)
		}
		c.call("POST", "/api/v1/alerts/"+itoa(id)+"/ack?count=0", 400, &e)
		c.call("POST", "/api/v1/alerts/"+itoa(id)+"/ack?count=2", 200, nil)
		c.get("/api/v1/alerts?acknowledged=false", &l)
		if len(l.Alerts) != 0 {
			t.Errorf("open alerts after the fresh ack = %+v; want none", l.Alerts)
		}
	})
}
