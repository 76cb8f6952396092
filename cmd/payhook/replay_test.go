package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestEventsReplayBulk: payhook events replay by filter refuses a filter
// without its bounds, shows what it would replay with --dry-run (and
// --json) and changes nothing, then replays the source's failed events
// since --since, each job marked as a replay, and leaves the others.
func TestEventsReplayBulk(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, _, err := migrateAll(ctx, db, nil); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		mk := func(source, id string, status payhook.Status, age time.Duration) *payhook.Event {
			return &payhook.Event{Source: source, EventID: id, Type: "checkout.completed", ReceivedAt: now.Add(-age),
				Payload: []byte(`{}`), Status: status}
		}
		evs := []*payhook.Event{mk("shop", "evt_f1", payhook.StatusFailed, time.Hour), mk("shop", "evt_f2", payhook.StatusFailed, 2*time.Hour),
			mk("shop", "evt_old", payhook.StatusFailed, 48*time.Hour), mk("shop", "evt_ok", payhook.StatusProcessed, time.Hour),
			mk("other", "evt_f3", payhook.StatusFailed, time.Hour)}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.InsertEventsTx(ctx, tx, evs); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		statuses := func() string {
			var b strings.Builder
			for _, ev := range evs {
				got, err := db.Event(ctx, ev.ID)
				if err != nil {
					t.Fatal(err)
				}
				b.WriteString(ev.EventID + "=" + string(got.Status) + " ")
			}
			return b.String()
		}
		before := statuses()
		env := map[string]string{"PAYHOOK_DB": dbURL}
		bulk := []string{"events", "replay", "--status", "failed", "--source", "shop", "--since", "24h"}
		for _, tc := range []struct {
			args   []string
			code   int
			stdout []string
			stderr string
		}{
			{[]string{"events", "replay", "--status", "failed", "--since", "24h"}, 2, nil, "needs --source"},
			{[]string{"events", "replay", "--source", "shop", "--since", "24h", "--dry-run"}, 2, nil, "needs --status"},
			{[]string{"events", "replay", "--status", "failed", "--source", "shop"}, 2, nil, "needs --since"},
			{[]string{"events", "replay", "--status", "received", "--source", "shop", "--since", "24h"}, 2, nil, "want failed or processed"},
			{[]string{"events", "replay", "--status", "ignored", "--source", "shop", "--since", "24h"}, 2, nil, "want failed or processed"},
			{append(bulk, "--rate", "fast"), 2, nil, `--rate "fast"`},
			{append(bulk, "--rate", "0/s"), 2, nil, `--rate "0/s"`},
			{append(bulk, "--rate", "NaN"), 2, nil, `--rate "NaN"`},
			{append(bulk, "--rate", "1e-11/s"), 2, nil, `--rate "1e-11/s"`},
			{[]string{"events", "replay", "1", "--status", "failed"}, 2, nil, "not both"},
			{[]string{"events", "replay", "1", "2"}, 2, nil, "takes one ID|EVENT_ID"},
			{append(bulk, "--dry-run"), 0, []string{"dry run: would replay 2 failed events of source shop received since", "evt_f1", "evt_f2"}, ""},
			{append(bulk, "--dry-run", "--type", "refund"), 0, []string{"dry run: would replay 0 failed events of source shop of type refund"}, ""},
			// A source with no events at all: said so, with those that have some.
			{[]string{"events", "replay", "--status", "failed", "--source", "stripe", "--since", "24h"}, 0,
				[]string{"replaying 0 failed events of source stripe", "\nno events stored for source stripe; sources with events: other, shop\n"}, ""},
		} {
			code, stdout, stderr := run(t, env, tc.args...)
			ok := code == tc.code && strings.Contains(stderr, tc.stderr) && (tc.stdout == nil) == (stdout == "")
			for _, s := range tc.stdout {
				ok = ok && strings.Contains(stdout, s)
			}
			// The hint only for a source without events.
			ok = ok && strings.Contains(stdout, "no events stored") == strings.Contains(strings.Join(tc.stdout, " "), "no events stored")
			if !ok || strings.Contains(stdout, "evt_old") || strings.Contains(stdout, "evt_ok") || strings.Contains(stdout, "evt_f3") {
				t.Errorf("payhook %v = %d, stdout %q, stderr %q; want %d, stdout with %q (and not the other events), stderr with %q",
					tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		}
		code, stdout, stderr := run(t, env, append(bulk, "--dry-run", "--json")...)
		var dry bulkReplay
		if err := json.Unmarshal([]byte(stdout), &dry); code != 0 || err != nil || !dry.DryRun || dry.Matched != 2 ||
			len(dry.IDs) != 2 || dry.IDs[0] != evs[0].ID || dry.IDs[1] != evs[1].ID || len(dry.Events) != 2 {
			t.Errorf("dry run --json = %d, %v, %+v (%s)", code, err, dry, stderr)
		}
		if got := statuses(); got != before {
			t.Fatalf("after the dry runs: %s; want %s", got, before)
		}

		code, stdout, stderr = run(t, env, append(bulk, "--rate", "1000000/s")...)
		if code != 0 || !strings.Contains(stdout, "replaying 2 failed events of source shop") || !strings.Contains(stdout, "replayed 2 of 2") ||
			!strings.Contains(stderr, "replay: 2 of 2 events") {
			t.Fatalf("replay = %d, stdout %q, stderr %q; want 2 replayed with a progress line", code, stdout, stderr)
		}
		want := "evt_f1=received evt_f2=received evt_old=failed evt_ok=processed evt_f3=failed "
		if got := statuses(); got != want {
			t.Fatalf("after the replay: %s; want %s", got, want)
		}
		var jobs int
		if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'
			AND CAST(args AS TEXT) LIKE '%replay%'`).Scan(&jobs); err != nil || jobs != 2 {
			t.Fatalf("replay jobs: %d, %v; want 2", jobs, err)
		}
		// Nothing is failed any more: a second run replays nothing.
		code, stdout, _ = run(t, env, append(bulk, "--json")...)
		var again bulkReplay
		if err := json.Unmarshal([]byte(stdout), &again); code != 0 || err != nil || again.Matched != 0 || again.Replayed != 0 || again.Hint != "" {
			t.Errorf("second replay = %d, %v, %s; want 0 matched", code, err, stdout)
		}
	})
}
