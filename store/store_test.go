package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)

func openDB(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return db
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
		waiting, err := db.WaitingSince(ctx, t0.Add(time.Second), 10)
		if err != nil || len(waiting) != 0 {
			t.Fatalf("WaitingSince = %v, %v; want none", waiting, err)
		}
		tx, _ = db.SQL.BeginTx(ctx, nil)
		if err := db.ResetEventTx(ctx, tx, failing.ID); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
		waiting, _ = db.WaitingSince(ctx, t0.Add(time.Second), 10)
		if len(waiting) != 1 || waiting[0] != failing.ID {
			t.Fatalf("WaitingSince after reset = %v, want [%d]", waiting, failing.ID)
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
