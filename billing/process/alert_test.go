package process_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

// The event_failed alert is written in the transaction that marks the event
// failed: it exists when that commits and not when it rolls back. Its
// message is storable whatever the cause's text.
func TestFailedAlertInTheFailureTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		cfg := config(t, db, nil, now)
		for _, c := range []struct {
			eventID string
			commit  bool
		}{{"evt_rolled_back", false}, {"evt_committed", true}} {
			tx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			ev := &payhook.Event{Source: "stripe", EventID: c.eventID, Type: "charge.refunded", Status: payhook.StatusFailed, Attempts: 25}
			if err := cfg.OnFailed(ctx, tx, ev, errors.New("payment pi_x\x00y not found")); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			if c.commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		alerts, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: billing.AlertEventFailed})
		if err != nil {
			t.Fatal(err)
		}
		if len(alerts) != 1 || alerts[0].Subject != "stripe/evt_committed" || !strings.Contains(alerts[0].Message, "pi_x\uFFFDy") {
			t.Fatalf("alerts = %+v, want one for stripe/evt_committed with a storable message", alerts)
		}
	})
}
