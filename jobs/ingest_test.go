package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// TestIngestNamesTheFailingEvent: when one event of a batch fails it, the
// error is a *payhook.EventError with its index and nothing of the batch
// is stored. On PostgreSQL, an event whose key another transaction holds
// fails IngestBounded that way, with payhook.ErrLocked, after LockWait
// instead of waiting for the other transaction; Ingest waits for it.
func TestIngestNamesTheFailingEvent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, q := setup(t, dbURL, jobs.Config{})
		ev := func(id string) *payhook.Event {
			return &payhook.Event{Source: "src", EventID: id, Type: "t", ReceivedAt: time.Now(), Payload: []byte(`{}`)}
		}
		bad := ev("evt_bad")
		bad.Status = "bogus" // refused by the status column's CHECK
		_, err := q.Ingest(ctx, []*payhook.Event{ev("evt_a"), bad, ev("evt_b")})
		var one *payhook.EventError
		if !errors.As(err, &one) || one.Index != 1 || !errors.Is(err, payhook.ErrUnavailable) || errors.Is(err, payhook.ErrLocked) {
			t.Fatalf("Ingest with a bad second event = %v, want an EventError at index 1 (not locked)", err)
		}
		if n := count(t, db); n != 0 {
			t.Fatalf("%d events stored by a failed batch, want 0", n)
		}
		if db.Engine != store.Postgres {
			return
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := db.InsertEventsTx(ctx, tx, []*payhook.Event{ev("evt_held")}); err != nil {
			t.Fatal(err)
		}
		_, err = q.IngestBounded(ctx, []*payhook.Event{ev("evt_a"), ev("evt_held"), ev("evt_b")})
		if !errors.As(err, &one) || one.Index != 1 || !errors.Is(err, payhook.ErrLocked) || !errors.Is(err, payhook.ErrUnavailable) {
			t.Fatalf("Ingest with a locked second event = %v, want an EventError at index 1 wrapping ErrLocked", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*jobs.LockWait)
		_, err = q.Ingest(wctx, []*payhook.Event{ev("evt_held")})
		cancel()
		if err == nil || errors.Is(err, payhook.ErrLocked) {
			t.Fatalf("Ingest of a locked event = %v, want it to wait until its context ends", err)
		}
		if ins, err := q.IngestBounded(ctx, []*payhook.Event{ev("evt_a"), ev("evt_b")}); err != nil || !ins[0] || !ins[1] {
			t.Fatalf("Ingest of the rest = %v, %v; want both stored", ins, err)
		}
		tx.Rollback()
		if ins, err := q.Ingest(ctx, []*payhook.Event{ev("evt_held")}); err != nil || !ins[0] {
			t.Fatalf("Ingest of the formerly locked event = %v, %v; want stored", ins, err)
		}
		if n := count(t, db); n != 3 {
			t.Fatalf("%d events stored, want 3", n)
		}
	})
}

// TestIngestRefusesIncompleteEvents: an event without what every stored
// event has is refused before anything of the batch is written, with an
// EventError naming it that wraps payhook.ErrInvalid (not ErrUnavailable:
// trying again cannot store it), and a nil one does not panic.
func TestIngestRefusesIncompleteEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, q := setup(t, dbURL, jobs.Config{})
		ev := func(id string) *payhook.Event {
			return &payhook.Event{Source: "src", EventID: id, Type: "t", ReceivedAt: time.Now(), Payload: []byte(`{}`)}
		}
		for name, bad := range map[string]*payhook.Event{
			"nil":         nil,
			"no source":   {EventID: "evt_x", ReceivedAt: time.Now(), Payload: []byte(`{}`)},
			"no event id": {Source: "src", ReceivedAt: time.Now(), Payload: []byte(`{}`)},
			"no received": {Source: "src", EventID: "evt_x", Payload: []byte(`{}`)},
			"no payload":  {Source: "src", EventID: "evt_x", ReceivedAt: time.Now()},
		} {
			for _, ingest := range []func(context.Context, []*payhook.Event) ([]bool, error){q.Ingest, q.IngestBounded} {
				_, err := ingest(ctx, []*payhook.Event{ev("evt_a"), bad})
				var one *payhook.EventError
				if !errors.As(err, &one) || one.Index != 1 || !errors.Is(err, payhook.ErrInvalid) || errors.Is(err, payhook.ErrUnavailable) {
					t.Errorf("%s: Ingest = %v, want an EventError at index 1 wrapping ErrInvalid", name, err)
				}
			}
		}
		if n := count(t, db); n != 0 {
			t.Fatalf("%d events stored by refused batches, want 0", n)
		}
	})
}

func count(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStoreFailureIsWholeBatch: a failure that no event caused (here the
// enqueue, River's job table being gone; a full disk fails the commit the
// same way) says so with WholeBatch, so that a caller batching deliveries
// answers them all at once; a failure caused by one event, or by the
// caller's ended context, does not.
func TestStoreFailureIsWholeBatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, q := setup(t, dbURL, jobs.Config{})
		wholeBatch := func(err error) bool {
			var w interface{ WholeBatch() bool }
			return errors.As(err, &w) && w.WholeBatch()
		}
		bad := event("evt_bad")
		bad.Status = "bogus" // refused by the status column's CHECK
		if _, err := q.IngestBounded(ctx, []*payhook.Event{event("evt_a"), bad}); err == nil || wholeBatch(err) {
			t.Fatalf("Ingest with a bad event = %v, want an error naming it, not the store's", err)
		}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := q.IngestBounded(ended, []*payhook.Event{event("evt_a")}); err == nil || wholeBatch(err) {
			t.Fatalf("Ingest with an ended context = %v, want the context's error, not the store's", err)
		}
		if _, err := db.SQL.Exec(`ALTER TABLE river_job RENAME TO river_job_away`); err != nil {
			t.Fatal(err)
		}
		for _, ingest := range []func(context.Context, []*payhook.Event) ([]bool, error){q.Ingest, q.IngestBounded} {
			_, err := ingest(ctx, []*payhook.Event{event("evt_a"), event("evt_b")})
			if !errors.Is(err, payhook.ErrUnavailable) || !wholeBatch(err) {
				t.Fatalf("Ingest while every enqueue fails = %v, want ErrUnavailable with WholeBatch", err)
			}
		}
		if n := count(t, db); n != 0 {
			t.Fatalf("%d events stored by failed batches, want 0", n)
		}
		if _, err := db.SQL.Exec(`ALTER TABLE river_job_away RENAME TO river_job`); err != nil {
			t.Fatal(err)
		}
		if ins, err := q.IngestBounded(ctx, []*payhook.Event{event("evt_a")}); err != nil || !ins[0] {
			t.Fatalf("Ingest once the store works again = %v, %v; want stored", ins, err)
		}
	})
}
