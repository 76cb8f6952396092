package store_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)

func openDB(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	return storetest.Migrated(t, dbURL)
}

func newEvent(id string) *payhook.Event {
	return &payhook.Event{
		Source: "src", EventID: id, Type: "payment.succeeded", Environment: "test",
		OccurredAt: t0.Add(-time.Minute), ReceivedAt: t0, Payload: []byte(`{"id":"` + id + `"}`),
		SecretID: "sha256:abc",
	}
}

func insert(t *testing.T, db *store.DB, evs ...*payhook.Event) []bool {
	t.Helper()
	ctx := context.Background()
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := db.InsertEventsTx(ctx, tx, evs)
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ins
}

func TestMigrateTwice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		applied, err := db.Migrate(context.Background())
		if err != nil || len(applied) != 0 {
			t.Fatalf("second Migrate = %v, %v; want nothing applied", applied, err)
		}
	})
}

func TestInsertRoundTripAndDedup(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		ev := newEvent("evt_1")
		if ins := insert(t, db, ev, newEvent("evt_1"), newEvent("evt_2")); fmt.Sprint(ins) != "[true false true]" {
			t.Fatalf("inserted = %v, want [true false true]", ins)
		}
		if ins := insert(t, db, newEvent("evt_1")); ins[0] {
			t.Fatal("second delivery inserted again")
		}
		other := newEvent("evt_1")
		other.Source = "other"
		if ins := insert(t, db, other); !ins[0] {
			t.Fatal("same event id of another source was not inserted")
		}
		got, err := db.Event(ctx, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.EventID != "evt_1" || string(got.Payload) != string(ev.Payload) || got.Status != payhook.StatusReceived ||
			!got.ReceivedAt.Equal(t0) || !got.OccurredAt.Equal(ev.OccurredAt) || !got.ProcessedAt.IsZero() ||
			got.SecretID != "sha256:abc" || got.Environment != "test" {
			t.Fatalf("Event() = %+v, want the inserted event", got)
		}
		if _, err := db.Event(ctx, 999999); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("Event(missing) error = %v, want ErrNotFound", err)
		}
	})
}

func TestConcurrentInsertOneRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		var wg sync.WaitGroup
		var mu sync.Mutex
		n := 0
		for range 50 {
			wg.Go(func() {
				if insert(t, db, newEvent("evt_same"))[0] {
					mu.Lock()
					n++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		evs, err := db.ListEvents(context.Background(), store.Filter{EventID: "evt_same"})
		if n != 1 || err != nil || len(evs) != 1 {
			t.Fatalf("inserted %d times, %d rows (%v); want 1 and 1", n, len(evs), err)
		}
	})
}

func TestClaimFinishFail(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		ev := newEvent("evt_1")
		insert(t, db, ev)

		if err := db.RecordFailure(ctx, ev.ID, "boom", false); err != nil {
			t.Fatal(err)
		}
		tx, _ := db.SQL.BeginTx(ctx, nil)
		claimed, err := db.ClaimEventTx(ctx, tx, ev.ID)
		if err != nil || claimed == nil || claimed.Attempts != 2 || claimed.LastError != "boom" {
			t.Fatalf("ClaimEventTx = %+v, %v; want attempts 2 with the last error", claimed, err)
		}
		if err := db.FinishEventTx(ctx, tx, ev.ID, payhook.StatusProcessed, t0, ""); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx, _ = db.SQL.BeginTx(ctx, nil)
		again, err := db.ClaimEventTx(ctx, tx, ev.ID)
		tx.Rollback()
		if again != nil || err != nil {
			t.Fatalf("claim of processed event = %+v, %v; want nil, nil", again, err)
		}
		if err := db.RecordFailure(ctx, ev.ID, "late", true); err != nil {
			t.Fatal(err)
		}
		got, _ := db.Event(ctx, ev.ID)
		if got.Status != payhook.StatusProcessed || !got.ProcessedAt.Equal(t0) || got.Attempts != 2 || got.LastError != "" {
			t.Fatalf("after processing: %+v", got)
		}

		failing := newEvent("evt_2")
		insert(t, db, failing)
		db.RecordFailure(ctx, failing.ID, "first", false)
		db.RecordFailure(ctx, failing.ID, "last", true)
		got, _ = db.Event(ctx, failing.ID)
		if got.Status != payhook.StatusFailed || got.Attempts != 2 || got.LastError != "last" {
			t.Fatalf("after final failure: status %s attempts %d error %q", got.Status, got.Attempts, got.LastError)
		}
		if stale := requeue(t, db, t0.Add(time.Second), t0.Add(time.Second)); len(stale) != 0 {
			t.Fatalf("stale events = %v; want none", stale)
		}
		tx, _ = db.SQL.BeginTx(ctx, nil)
		if err := db.ResetEventTx(ctx, tx, failing.ID, t0); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
		if stale := requeue(t, db, t0.Add(time.Second), t0.Add(time.Second)); len(stale) != 1 || stale[0] != failing.ID {
			t.Fatalf("stale events after reset = %v, want [%d]", stale, failing.ID)
		}
		counts, _ := db.CountByStatus(ctx)
		if counts[payhook.StatusProcessed] != 1 || counts[payhook.StatusReceived] != 1 {
			t.Fatalf("CountByStatus = %v", counts)
		}
	})
}

func TestListEventsFilter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		a, b := newEvent("a"), newEvent("b")
		b.Source = "other"
		insert(t, db, a, b)
		for _, tc := range []struct {
			f    store.Filter
			want string
		}{
			{store.Filter{}, "[b a]"},
			{store.Filter{Source: "other"}, "[b]"},
			{store.Filter{Status: payhook.StatusProcessed}, "[]"},
			{store.Filter{Limit: 1}, "[b]"},
			{store.Filter{Before: b.ID}, "[a]"},
		} {
			evs, err := db.ListEvents(context.Background(), tc.f)
			var ids []string
			for _, ev := range evs {
				ids = append(ids, ev.EventID)
			}
			if got := fmt.Sprint(ids); err != nil || got != tc.want {
				t.Errorf("ListEvents(%+v) = %s, %v; want %s", tc.f, got, err, tc.want)
			}
		}
	})
}

func TestOpenBadURL(t *testing.T) {
	for _, u := range []string{"mysql://x", "sqlite://"} {
		if _, err := store.Open(context.Background(), u); err == nil {
			t.Errorf("Open(%q) succeeded, want an error", u)
		}
	}
}

func requeue(t *testing.T, db *store.DB, before, now time.Time) []int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := db.RequeueStaleTx(ctx, tx, before, now, 2)
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestRequeueStaleMovesOn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		var evs []*payhook.Event
		for i := range 5 {
			ev := newEvent(fmt.Sprint("evt_", i))
			ev.ReceivedAt = t0.Add(time.Duration(i) * time.Second)
			evs = append(evs, ev)
		}
		insert(t, db, evs...)
		// Limit 2 per call: three sweeps get through all five, oldest first,
		// and a fourth finds nothing until they are stale again.
		var got []string
		for range 3 {
			for _, id := range requeue(t, db, t0.Add(time.Hour), t0.Add(time.Hour)) {
				got = append(got, fmt.Sprint(id))
			}
		}
		want := fmt.Sprint(evs[0].ID, evs[1].ID, evs[2].ID, evs[3].ID, evs[4].ID)
		if strings.Join(got, " ") != want {
			t.Fatalf("requeued %v, want %s", got, want)
		}
		if again := requeue(t, db, t0.Add(time.Hour), t0.Add(2*time.Hour)); len(again) != 0 {
			t.Fatalf("requeued again at once: %v", again)
		}
		if later := requeue(t, db, t0.Add(3*time.Hour), t0.Add(3*time.Hour)); len(later) != 2 {
			t.Fatalf("requeued %v once stale again, want 2", later)
		}
	})
}

// Every error text the store writes is made storable first: PostgreSQL's
// text refuses NUL and invalid UTF-8, and a failure that cannot be
// recorded leaves the event with no attempt counted.
func TestErrorTextsAreStorable(t *testing.T) {
	const bad, want = "pi_x\x00y \xff", "pi_x\uFFFDy \uFFFD"
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		ignored := newEvent("evt_ignored")
		ignored.Status, ignored.LastError = payhook.StatusIgnored, bad
		failing, finished := newEvent("evt_failing"), newEvent("evt_finished")
		insert(t, db, ignored, failing, finished)
		if err := db.RecordFailure(ctx, failing.ID, bad, false); err != nil {
			t.Fatalf("RecordFailure: %v", err)
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.FinishEventTx(ctx, tx, finished.ID, payhook.StatusIgnored, t0, bad); err != nil {
			tx.Rollback()
			t.Fatalf("FinishEventTx: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name     string
			id       int64
			attempts int
		}{{"ignored at insert", ignored.ID, 0}, {"failed attempt", failing.ID, 1}, {"ignored by a handler", finished.ID, 0}} {
			got, err := db.Event(ctx, c.id)
			if err != nil {
				t.Fatal(err)
			}
			if got.LastError != want || got.Attempts != c.attempts {
				t.Errorf("%s: last_error %q, %d attempts; want %q, %d", c.name, got.LastError, got.Attempts, want, c.attempts)
			}
		}
	})
}

// The same event key with another body keeps the first body and raises
// event_body_conflict once, naming both digests; an identical redelivery
// raises nothing. Inside one batch too (the group committer's). Through
// InsertEventsTx, and on PostgreSQL through StoreEvents (the ack path's
// one statement), each on a source of its own.
func TestConflictingRedeliveryAlertsOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		eachWayIn(t, db, func(way string, insert func(*testing.T, *store.DB, ...*payhook.Event) []bool) {
			withBody := func(id, body string) *payhook.Event {
				ev := newEvent(id)
				ev.Source, ev.Payload = way, []byte(body)
				return ev
			}
			first := withBody("evt_1", `{"id":"evt_1","amount":100}`)
			insert(t, db, first, withBody("evt_2", `{"id":"evt_2"}`), withBody("evt_2", `{"id":"evt_2","x":1}`))
			// A stored key twice in a batch, the conflicting body first.
			if ins := insert(t, db, withBody("evt_1", `{"id":"evt_1","amount":999}`), withBody("evt_1", `{"id":"evt_1","amount":100}`)); ins[0] || ins[1] {
				t.Fatalf("%s: a stored event inserted again", way)
			}
			var raised int
			if err := db.SQL.QueryRow(`SELECT count(*) FROM payhook_alerts WHERE kind = $1 AND subject = $2`,
				store.AlertEventBodyConflict, way+"/evt_1").Scan(&raised); err != nil || raised != 1 {
				t.Fatalf("%s: %d alerts (%v) after a batch with a conflicting body and an identical one, want 1", way, raised, err)
			}
			for _, c := range []struct {
				name string
				body string
			}{
				{"identical", `{"id":"evt_1","amount":100}`},
				{"other body", `{"id":"evt_1","amount":999}`},
				{"third body", `{"id":"evt_1","amount":5}`},
				{"other body again", `{"id":"evt_1","amount":999}`},
			} {
				if ins := insert(t, db, withBody("evt_1", c.body)); ins[0] {
					t.Fatalf("%s: inserted again", c.name)
				}
			}
			rows, err := db.SQL.Query(`SELECT subject, message, count FROM payhook_alerts WHERE kind = $1 AND subject LIKE $2 ORDER BY subject`,
				store.AlertEventBodyConflict, way+"/%")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var subject, msg string
				var count int
				if err := rows.Scan(&subject, &msg, &count); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s %d %s", subject, count, msg))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			digest := func(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }
			if len(got) != 2 || !strings.HasPrefix(got[0], way+"/evt_1 1 ") || !strings.HasPrefix(got[1], way+"/evt_2 1 ") ||
				!strings.Contains(got[0], digest(`{"id":"evt_1","amount":100}`)) || !strings.Contains(got[0], digest(`{"id":"evt_1","amount":999}`)) ||
				!strings.Contains(got[1], digest(`{"id":"evt_2"}`)) || !strings.Contains(got[1], digest(`{"id":"evt_2","x":1}`)) {
				t.Fatalf("%s: alerts = %q; want one per key, raised once, with the first and the first conflicting digests", way, got)
			}
			if ev, err := db.Event(ctx, first.ID); err != nil || string(ev.Payload) != `{"id":"evt_1","amount":100}` {
				t.Fatalf("stored event = %+v, %v; want the first body kept", ev, err)
			}
		})
	})
}

// A redelivery whose body differs from the stored one only in the
// members that name a delivery (Event.DeliveryFields: Paddle's
// notification_id) raises no event_body_conflict; one that differs
// elsewhere does. Through InsertEventsTx, and on PostgreSQL through
// StoreEvents, in one batch and in the next.
func TestRedeliveryNamedAnewIsNoConflict(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		eachWayIn(t, db, func(way string, insert func(*testing.T, *store.DB, ...*payhook.Event) []bool) {
			delivery := func(id, ntf, total string) *payhook.Event {
				ev := newEvent(id)
				ev.Source, ev.DeliveryFields = way, []string{"notification_id"}
				ev.Payload = fmt.Appendf(nil, `{"event_id":%q,"notification_id":%q,"data":{"total":%q}}`, id, ntf, total)
				return ev
			}
			insert(t, db, delivery("evt_1", "ntf_1", "100"), delivery("evt_1", "ntf_2", "100"),
				delivery("evt_2", "ntf_3", "100"), delivery("evt_2", "ntf_4", "999"))
			insert(t, db, delivery("evt_1", "ntf_5", "100"), delivery("evt_2", "ntf_6", "100"))
			rows, err := db.SQL.Query(`SELECT subject FROM payhook_alerts WHERE kind = $1 AND subject LIKE $2 ORDER BY subject`,
				store.AlertEventBodyConflict, way+"/%")
			if err != nil {
				t.Fatal(err)
			}
			var subjects []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				subjects = append(subjects, s)
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
			if want := []string{way + "/evt_2"}; !slices.Equal(subjects, want) {
				t.Errorf("%s: conflicts %q; want %q (another total), not evt_1 (another notification only)", way, subjects, want)
			}
		})
	})
}

// TestLockTimeoutTx: the bound LockTimeoutTx sets holds for the rest of
// the transaction until ClearLockTimeoutTx lifts it (before a commit,
// which may queue on PostgreSQL's notify lock); SQLite has neither.
func TestLockTimeoutTx(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		timeout := func() string {
			if db.Engine != store.Postgres {
				return "none"
			}
			var v string
			if err := tx.QueryRowContext(ctx, "SHOW lock_timeout").Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		want := map[bool][2]string{true: {"200ms", "0"}, false: {"none", "none"}}[db.Engine == store.Postgres]
		if err := db.LockTimeoutTx(ctx, tx, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if got := timeout(); got != want[0] {
			t.Errorf("lock_timeout after LockTimeoutTx = %q, want %q", got, want[0])
		}
		if err := db.ClearLockTimeoutTx(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if got := timeout(); got != want[1] {
			t.Errorf("lock_timeout after ClearLockTimeoutTx = %q, want %q", got, want[1])
		}
	})
}

// TestLockEventsBoundsBytes: with maxBytes, LockEventsTx returns, in the
// order given, the events whose payloads fit in it together, taken in row
// id order; one that does not fit is left out, not those after it.
func TestLockEventsBoundsBytes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		a, big, b, c := newEvent("evt_a"), newEvent("evt_big"), newEvent("evt_b"), newEvent("evt_c")
		big.Payload = []byte(`{"pad":"` + strings.Repeat("x", 100) + `"}`)
		insert(t, db, a, big, b, c)
		p, q := int64(len(a.Payload)), int64(len(big.Payload)) // a's, b's and c's; big's
		for _, tc := range []struct {
			maxBytes int64
			want     []int64
		}{
			{0, []int64{c.ID, big.ID, b.ID, a.ID}},
			{3*p + q, []int64{c.ID, big.ID, b.ID, a.ID}},
			{3*p + q - 1, []int64{big.ID, b.ID, a.ID}},
			{3 * p, []int64{c.ID, b.ID, a.ID}},
			{2 * p, []int64{b.ID, a.ID}},
			{p, []int64{a.ID}},
			{p - 1, nil},
		} {
			tx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := db.LockEventsTx(ctx, tx, []int64{c.ID, big.ID, b.ID, a.ID}, false, tc.maxBytes)
			tx.Rollback()
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, ev := range evs {
				got = append(got, ev.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("maxBytes %d: locked %v; want %v", tc.maxBytes, got, tc.want)
			}
		}
	})
}

// TestLockEventsSkipsHeld: LockEventsTx returns the events still
// received, in the order given, each once; with skipLocked, on
// PostgreSQL, one another transaction holds is skipped at once instead of
// waited for (a batch must not wait on the sweep, which waits on the
// batch's jobs).
func TestLockEventsSkipsHeld(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		a, b, c := newEvent("evt_a"), newEvent("evt_b"), newEvent("evt_c")
		insert(t, db, a, b, c)
		lock := func(tx *sql.Tx, skip bool, ids ...int64) []int64 {
			t.Helper()
			evs, err := db.LockEventsTx(ctx, tx, ids, skip, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, ev := range evs {
				got = append(got, ev.ID)
			}
			return got
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if got, want := lock(tx, false, c.ID, b.ID, a.ID, b.ID), []int64{c.ID, b.ID, a.ID}; !slices.Equal(got, want) {
			t.Fatalf("locked %v; want %v (in the order given, each once)", got, want)
		}
		if db.Engine == store.SQLite {
			return // one writer: no second transaction to skip
		}
		tx.Rollback()
		holder, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if got := lock(holder, false, b.ID); !slices.Equal(got, []int64{b.ID}) {
			t.Fatalf("holder locked %v", got)
		}
		batch, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer batch.Rollback()
		if got, want := lock(batch, true, a.ID, b.ID, c.ID), []int64{a.ID, c.ID}; !slices.Equal(got, want) {
			t.Fatalf("locked %v while b is held; want %v", got, want)
		}
	})
}

// TestIdleTransactionEnded: a PostgreSQL session left idle inside a
// transaction (a process frozen, or cut off, while it held locks) is ended
// by the server after store.IdleInTransaction (30 s; a URL's own setting
// wins, here 200 ms), and the row it locked is free for another instance.
// Before, the other instances' batches waited on its locks until TCP gave
// up on the connection. SQLite's one writer has no such session.
func TestIdleTransactionEnded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		if !strings.HasPrefix(dbURL, "postgres") {
			return
		}
		ctx := context.Background()
		db := openDB(t, dbURL)
		var v string
		if err := db.SQL.QueryRowContext(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&v); err != nil || v != "30s" {
			t.Fatalf("idle_in_transaction_session_timeout = %q, %v; want 30s", v, err)
		}
		sep := "?"
		if strings.Contains(dbURL, "?") {
			sep = "&"
		}
		frozen := openDB(t, dbURL+sep+"idle_in_transaction_session_timeout=200")
		tx, err := frozen.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `SELECT probes FROM payhook_ready WHERE id = 1 FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		// The frozen one sends nothing more; another takes the row once the
		// server has ended that session (a generous bound, never a timing).
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if _, err := db.SQL.ExecContext(wctx, `UPDATE payhook_ready SET probes = probes + 1 WHERE id = 1`); err != nil {
			t.Fatalf("the row locked by a session idle in its transaction: %v", err)
		}
	})
}

// eachWayIn runs f for each way events are stored, with an insert for it:
// InsertEventsTx ("tx"), and on PostgreSQL StoreEvents ("one-statement",
// the ack path's one statement).
func eachWayIn(t *testing.T, db *store.DB, f func(way string, insert func(*testing.T, *store.DB, ...*payhook.Event) []bool)) {
	f("tx", insert)
	if db.Engine != store.Postgres {
		return
	}
	f("one-statement", func(t *testing.T, db *store.DB, evs ...*payhook.Event) []bool {
		t.Helper()
		ins, err := db.StoreEvents(context.Background(), evs, store.With{})
		if err != nil {
			t.Fatal(err)
		}
		return ins
	})
}
