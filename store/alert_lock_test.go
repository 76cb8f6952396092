package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestIgnoredEventsAlertInSourceOrder: the environment_mismatch alerts
// of a batch are raised one per source, in the order of the sources'
// names, whatever the order the events arrived in: a batch of three
// ignored events of two sources counts each source's (on both engines).
// On PostgreSQL two committers whose batches hold ignored events of
// sources a and b in opposite orders then never deadlock: here the
// other committer is a transaction that holds a's alert (as its upsert
// does, a before b) while StoreEvents raises those of [b, a], and then
// takes b's. Before, StoreEvents upserted b's alert, then waited for
// a's while holding b's: PostgreSQL aborted one of the two, and the
// batch's events, committed already, were answered through the retry
// one at a time as duplicates, their alerts never raised.
func TestIgnoredEventsAlertInSourceOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		event := func(source, id string) *payhook.Event {
			ev := newEvent(id)
			return payhook.NewEvent(payhook.Source{Name: source, Environment: "live"},
				payhook.Envelope{EventID: id, Type: ev.Type, Environment: "test", OccurredAt: ev.OccurredAt}, ev.Payload, ev.ReceivedAt)
		}
		counts := func() map[string]int {
			t.Helper()
			rows, err := db.SQL.Query(`SELECT subject, count FROM payhook_alerts WHERE kind = $1`, store.AlertEnvironmentMismatch)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			got := map[string]int{}
			for rows.Next() {
				var s string
				var n int
				if err := rows.Scan(&s, &n); err != nil {
					t.Fatal(err)
				}
				got[s] = n
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return got
		}
		insert(t, db, event("b", "evt_b1"), event("a", "evt_a1"), event("b", "evt_b2"))
		if got := counts(); got["a"] != 1 || got["b"] != 2 || len(got) != 2 {
			t.Fatalf("alerts %v; want a counting 1, b 2", got)
		}
		if db.Engine != store.Postgres {
			return // one writer: no lock order to keep (and no StoreEvents)
		}
		other, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Rollback()
		hold := func(source string) error {
			_, err := other.ExecContext(ctx, `UPDATE payhook_alerts SET count = count + 1 WHERE kind = $1 AND subject = $2`,
				store.AlertEnvironmentMismatch, source)
			return err
		}
		if err := hold("a"); err != nil {
			t.Fatal(err)
		}
		// Until StoreEvents waits for a's alert (or has returned).
		stored := storeEventsBlocked(t, db, []*payhook.Event{event("b", "evt_b3"), event("a", "evt_a2")})
		if err := hold("b"); err != nil {
			t.Fatalf("the other committer, raising b's alert after a's: %v", err)
		}
		if err := other.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := stored(); err != nil {
			t.Fatalf("StoreEvents: %v", err)
		}
		if got := counts(); got["a"] != 3 || got["b"] != 4 {
			t.Errorf("alerts %v; want a counting 3, b 4", got)
		}
	})
}

// TestBodyConflictsAlertInKeyOrder: a batch's event_body_conflict alerts
// are raised in the order of their events' keys, whatever the order the
// deliveries arrived in, so that two committers bringing the same
// conflicting events in opposite orders never deadlock on PostgreSQL:
// here the other committer is a transaction that has raised a's alert
// (not committed) while StoreEvents raises those of [b, a], and then
// raises b's. In arrival order StoreEvents would hold b's new alert row
// while it waits for a's, and the other's b would wait for it.
func TestBodyConflictsAlertInKeyOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		event := func(source, id, body string) *payhook.Event {
			ev := newEvent(id)
			ev.Source, ev.Payload = source, []byte(body)
			return ev
		}
		insert(t, db, event("a", "evt_1", `{"v":1}`), event("b", "evt_1", `{"v":1}`), event("a", "evt_2", `{"v":1}`))
		// Sorted or not, each conflict of a batch is raised (both engines).
		insert(t, db, event("b", "evt_1", `{"v":0}`), event("a", "evt_2", `{"v":0}`))
		var raised []string
		rows, err := db.SQL.Query(`SELECT subject FROM payhook_alerts WHERE kind = $1 ORDER BY subject`, store.AlertEventBodyConflict)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			raised = append(raised, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if !slices.Equal(raised, []string{"a/evt_2", "b/evt_1"}) {
			t.Fatalf("body conflicts raised for %v; want a/evt_2, b/evt_1", raised)
		}
		if db.Engine != store.Postgres {
			return // one writer: no lock order to keep (and no StoreEvents)
		}
		if _, err := db.SQL.Exec(`DELETE FROM payhook_alerts`); err != nil {
			t.Fatal(err)
		}
		other, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Rollback()
		raise := func(subject string) error {
			_, err := other.ExecContext(ctx, `INSERT INTO payhook_alerts (kind, subject, message, first_seen, last_seen, count, acknowledged)
				VALUES ($1, $2, '', $3, $3, 1, FALSE) ON CONFLICT (kind, subject) DO NOTHING`, store.AlertEventBodyConflict, subject, t0)
			return err
		}
		if err := raise("a/evt_1"); err != nil {
			t.Fatal(err)
		}
		// Until StoreEvents waits for a's alert (or has returned).
		stored := storeEventsBlocked(t, db, []*payhook.Event{event("b", "evt_1", `{"v":2}`), event("a", "evt_1", `{"v":2}`)})
		if err := raise("b/evt_1"); err != nil {
			t.Fatalf("the other committer, raising b's alert after a's: %v", err)
		}
		if err := other.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := stored(); err != nil {
			t.Fatalf("StoreEvents: %v", err)
		}
	})
}

// storeEventsBlocked runs db.StoreEvents(evs) and returns once it waits
// for a lock another transaction holds (PostgreSQL's pg_locks says so),
// or has returned: progress, never a deadline. The function it returns
// waits for StoreEvents' end and gives its error.
func storeEventsBlocked(t *testing.T, db *store.DB, evs []*payhook.Event) func() error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := db.StoreEvents(context.Background(), evs, store.With{})
		done <- err
	}()
	for {
		select {
		case err := <-done:
			return func() error { return err }
		default:
		}
		var waiting int
		if err := db.SQL.QueryRow(`SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return func() error { return <-done }
		}
	}
}
