package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestEventsMissingDatabase: the events commands read an existing
// database; a mistyped SQLite path is an error and is not created. (It
// belongs with the events commands; it lives here because this change may
// only touch config_test.go among the tests of package main.)
func TestEventsMissingDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"events", "list", "--db", "sqlite://" + missing},
		{"events", "show", "evt_1", "--db", "sqlite://" + missing},
		{"events", "replay", "1", "--db", "sqlite://" + missing},
	} {
		code, out, errOut := run(t, nil, args...)
		if code != 1 || !strings.Contains(errOut, "does not exist") || !strings.Contains(errOut, "payhook migrate") || out != "" {
			t.Errorf("%v = %d, stdout %q, stderr %q; want 1 and an error saying the database does not exist", args, code, out, errOut)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the events commands created %v", entries)
	}
	// A database that exists but was never migrated is refused too, and
	// left without a schema.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, nil, "events", "list", "--db", "sqlite://"+empty)
	if code != 1 || !strings.Contains(errOut, "has no payhook schema; run payhook migrate") {
		t.Errorf("events list on an unmigrated database = %d, %q; want 1 and no payhook schema", code, errOut)
	}
	code, _, errOut = run(t, map[string]string{"PAYHOOK_DB": "sqlite://" + empty}, "events", "list")
	if code != 1 || !strings.Contains(errOut, "has no payhook schema") {
		t.Errorf("events list with PAYHOOK_DB on an unmigrated database = %d, %q", code, errOut)
	}
}

// seedEvents stores events in a migrated database (payhook's schema and
// the job queue's) and returns their row ids by "source/event_id".
func seedEvents(t *testing.T, dbURL string, keys ...[2]string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := migrateAll(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ids := map[string]int64{}
	for _, k := range keys {
		ev := &payhook.Event{Source: k[0], EventID: k[1], Type: "checkout.completed", ReceivedAt: time.Now(),
			Payload: []byte(`{"id":"` + k[1] + `"}`), Status: payhook.StatusProcessed}
		if _, err := db.InsertEventsTx(ctx, tx, []*payhook.Event{ev}); err != nil {
			t.Fatal(err)
		}
		ids[k[0]+"/"+k[1]] = ev.ID
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// markIgnored marks the stored event id ignored, with reason.
func markIgnored(t *testing.T, dbURL string, id int64, reason string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.SQL.ExecContext(ctx, `UPDATE payhook_events SET status = 'ignored', last_error = $1 WHERE id = $2`, reason, id); err != nil {
		t.Fatal(err)
	}
}

// TestEventsShowAndReplayByEventID: show and replay take a row id or the
// provider's event id, and --source; an event id that two sources share
// is refused without --source, naming both, and nothing is replayed.
func TestEventsShowAndReplayByEventID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ids := seedEvents(t, dbURL, [2]string{"shop-a", "evt_shared"}, [2]string{"shop-b", "evt_shared"}, [2]string{"shop-a", "evt_one"},
			[2]string{"shop-a", "evt_numeric"}, [2]string{"shop-a", "evt_ignored"})
		markIgnored(t, dbURL, ids["shop-a/evt_ignored"], "no handler for event type \"checkout.completed\"")
		// shop-b's provider numbers its events: one has evt_numeric's row id.
		numeric := fmt.Sprint(ids["shop-a/evt_numeric"])
		for k, v := range seedEvents(t, dbURL, [2]string{"shop-b", numeric}) {
			ids[k] = v
		}
		env := map[string]string{"PAYHOOK_DB": dbURL}
		one, sharedB := fmt.Sprint(ids["shop-a/evt_one"]), fmt.Sprint(ids["shop-b/evt_shared"])
		ambiguous := "event evt_shared exists in several sources: shop-a, shop-b; give --source shop-a or --source shop-b"
		for _, tc := range []struct {
			args   []string
			code   int
			stdout string // a part of it; "" wants it empty
			stderr string
		}{
			{[]string{"events", "show", "evt_one"}, 0, "shop-a", ""},
			{[]string{"events", "show", one, "--json"}, 0, `"event_id": "evt_one"`, ""},
			{[]string{"events", "show", "evt_shared"}, 2, "", ambiguous},
			{[]string{"events", "show", "evt_shared", "--json"}, 2, "", ambiguous},
			{[]string{"events", "show", "evt_shared", "--source", "shop-b"}, 0, "shop-b", ""},
			{[]string{"events", "show", "--source", "shop-b", "evt_shared", "--json"}, 0, `"source": "shop-b"`, ""},
			{[]string{"events", "show", "evt_shared", "--source", "shop-c"}, 1, "", `event "evt_shared" in source "shop-c": not found`},
			{[]string{"events", "show", one, "--source", "shop-b"}, 1, "", "not found"},
			{[]string{"events", "replay", "evt_shared"}, 2, "", ambiguous},
			{[]string{"events", "replay", "evt_missing"}, 1, "", "not found"},
			{[]string{"events", "replay", "evt_shared", "--source", "shop-b"}, 0, "event " + sharedB + " (shop-b evt_shared) re-enqueued", ""},
			{[]string{"events", "replay", "evt_one"}, 0, "re-enqueued", ""},
			{[]string{"events", "replay", one}, 0, "re-enqueued", ""},
			// A provider's numeric event id that is also another event's
			// row id names two events: neither is taken for the other.
			{[]string{"events", "replay", numeric}, 2, "", "is both"},
			{[]string{"events", "show", numeric}, 2, "", "give evt_numeric --source shop-a for the first, " + numeric + " --source shop-b for the second"},
			{[]string{"events", "show", numeric, "--source", "shop-b"}, 0, "shop-b", ""},
			{[]string{"events", "show", numeric, "--source", "shop-a"}, 0, "evt_numeric", ""},
			// An ignored event was ignored for a reason: replaying it is
			// refused as the console refuses it (400) and as a bulk
			// replay refuses --status ignored (2), not as a failure (1).
			{[]string{"events", "replay", "evt_ignored"}, 2, "", `it was ignored (no handler for event type "checkout.completed")`},
		} {
			code, stdout, stderr := run(t, env, tc.args...)
			if code != tc.code || (tc.stdout == "") != (stdout == "") || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("payhook %v = %d, stdout %q, stderr %q; want %d, stdout with %q, stderr with %q",
					tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		}
		// The refused replay left shop-a's evt_shared processed; the
		// others are back to received.
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for key, want := range map[string]payhook.Status{"shop-a/evt_shared": payhook.StatusProcessed,
			"shop-a/evt_numeric": payhook.StatusProcessed, "shop-b/" + numeric: payhook.StatusProcessed,
			"shop-b/evt_shared": payhook.StatusReceived, "shop-a/evt_one": payhook.StatusReceived,
			"shop-a/evt_ignored": payhook.StatusIgnored} {
			if ev, err := db.Event(ctx, ids[key]); err != nil || ev.Status != want {
				t.Errorf("%s after the replays = %v, %v; want %s", key, ev, err, want)
			}
		}
	})
}

// TestListLimit: every list takes --limit from 1 to 1000, and says so.
func TestListLimit(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t, "sqlite")
	seedEvents(t, dbURL, [2]string{"shop-a", "evt_1"}, [2]string{"shop-a", "evt_2"})
	env := map[string]string{"PAYHOOK_DB": dbURL}
	for _, list := range [][]string{{"events", "list"}, {"payments", "list"}, {"orders", "list"},
		{"subscriptions", "list"}, {"alerts", "list"}} {
		for limit, want := range map[string]int{"0": 2, "-1": 2, "1001": 2, "1": 0, "1000": 0} {
			code, _, stderr := run(t, env, append(slices.Clone(list), "--limit", limit)...)
			if code != want || (want == 2 && !strings.Contains(stderr, "--limit "+limit+": want 1 to 1000")) {
				t.Errorf("payhook %v --limit %s = %d, %q; want %d", list, limit, code, stderr, want)
			}
		}
		if _, stdout, _ := run(t, nil, append(slices.Clone(list), "--help")...); !strings.Contains(stdout, "(1 to 1000)") {
			t.Errorf("payhook %v --help does not give --limit's bounds:\n%s", list, stdout)
		}
	}
	if _, stdout, stderr := run(t, env, "events", "list", "--limit", "1"); strings.Count(stdout, "evt_") != 1 ||
		!strings.Contains(stderr, "the newest 1 shown; there may be more") {
		t.Errorf("events list --limit 1 =\n%s\n%s\nwant one event, and on stderr a word that there may be more", stdout, stderr)
	}
	if _, stdout, stderr := run(t, env, "events", "list"); strings.Contains(stdout+stderr, "there may be more") {
		t.Errorf("events list of all there is =\n%s\n%s\nwant no word of more", stdout, stderr)
	}
}
