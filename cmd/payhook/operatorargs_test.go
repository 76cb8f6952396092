package main

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store/storetest"
)

// TestAlertsAckCountSeen: alerts ack --count N acknowledges the alert
// only as listed with that count; raised again since, it stays open.
func TestAlertsAckCountSeen(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := storetest.Migrated(t, dbURL)
		ctx := context.Background()
		if err := jobs.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		raise := func() {
			tx, err := billing.Begin(ctx, db, time.Now())
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
		var as []billing.AlertView
		mustCLI(t, dbURL, &as, "alerts", "list", "--open", "--json")
		if len(as) != 1 || as[0].Count != 1 {
			t.Fatalf("alerts = %+v; want one, count 1", as)
		}
		id := strconv.FormatInt(as[0].ID, 10)
		raise()
		if _, err := cli(t, dbURL, "alerts", "ack", "--count", "1", id); !errors.Is(err, payhook.ErrConflict) {
			t.Errorf("alerts ack --count 1 of an alert raised again = %v; want ErrConflict", err)
		}
		mustCLI(t, dbURL, &as, "alerts", "list", "--open", "--json")
		if len(as) != 1 || as[0].Count != 2 {
			t.Fatalf("open alerts after the stale ack = %+v; want the one, count 2", as)
		}
		mustCLI(t, dbURL, nil, "alerts", "ack", "--count", "2", id)
		mustCLI(t, dbURL, &as, "alerts", "list", "--open", "--json")
		if len(as) != 0 {
			t.Errorf("open alerts after the fresh ack = %+v; want none", as)
		}
	})
}

// TestReplayArgsNoColumnHolds: events replay, like the read commands
// (storableArgs), refuses as a usage error an argument or a flag no
// column can hold (invalid UTF-8), on both engines: not a database error
// on PostgreSQL where SQLite says "not found".
func TestReplayArgsNoColumnHolds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := storetest.Migrated(t, dbURL)
		if err := jobs.Migrate(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"events", "replay", "evt_\xff"},
			{"events", "replay", "--source", "shop\xff", "evt_1"},
			{"events", "replay", "--source", "shop\xff", "--status", "failed", "--since", "1h"},
			{"events", "replay", "--source", "shop", "--type", "t\xff", "--status", "failed", "--since", "1h"},
			{"payments", "refund", "pay_\xff"},
			{"payments", "refund", "--source", "shop\xff", "pay_1"},
		} {
			_, err := cli(t, dbURL, args...)
			if !errors.Is(err, errUsage) {
				t.Errorf("%q = %v; want a usage error", args, err)
			}
		}
	})
}
