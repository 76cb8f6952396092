package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

func TestRunRecord(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		r := &store.Run{Kind: store.RunBackfill, Source: "src", Params: "types=a", From: t0.Add(-time.Hour), Until: t0}
		if err := db.StartRun(ctx, r, t0); err != nil {
			t.Fatal(err)
		}
		r.Listed, r.New, r.Known, r.Cursor = 10, 7, 3, "evt_10"
		if err := db.RecordRun(ctx, r, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		r.Refused, r.Error = 1, "page 2: 503"
		if err := db.FinishRun(ctx, r, t0.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		got, err := db.Run(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Listed != 10 || got.New != 7 || got.Known != 3 || got.Refused != 1 || got.Cursor != "evt_10" ||
			got.Error != "page 2: 503" || !got.Failed() || !got.From.Equal(r.From) || !got.Until.Equal(t0) ||
			!got.FinishedAt.Equal(t0.Add(2*time.Second).Truncate(time.Microsecond)) {
			t.Fatalf("Run = %+v; want the recorded counts, cursor, error and window", got)
		}
		if err := db.FinishRun(ctx, r, t0); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("FinishRun(finished) = %v; want ErrNotFound", err)
		}
		if err := db.StartRun(ctx, &store.Run{Kind: "nap", Source: "src"}, t0); !errors.Is(err, payhook.ErrInvalid) {
			t.Fatalf("StartRun(kind nap) = %v; want ErrInvalid", err)
		}
		if _, err := db.Run(ctx, 999); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("Run(999) = %v; want ErrNotFound", err)
		}
		runs, err := db.Runs(ctx, store.RunFilter{Source: "src", Kind: store.RunBackfill})
		if err != nil || len(runs) != 1 || runs[0].ID != r.ID {
			t.Fatalf("Runs = %v, %v; want the one run", runs, err)
		}
		if runs, err := db.Runs(ctx, store.RunFilter{Kind: store.RunReconcile}); err != nil || len(runs) != 0 {
			t.Fatalf("Runs(reconcile) = %v, %v; want none", runs, err)
		}
	})
}

func TestResumeRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		if r, err := db.ResumeRun(ctx, store.RunBackfill, "src", "", t0, t0); r != nil || err != nil {
			t.Fatalf("ResumeRun(none) = %v, %v; want nil, nil", r, err)
		}
		done := &store.Run{Kind: store.RunBackfill, Source: "src"}
		cut := &store.Run{Kind: store.RunBackfill, Source: "src", From: t0.Add(-time.Hour), Until: t0}
		other := &store.Run{Kind: store.RunBackfill, Source: "src", Params: "types=x"}
		for _, r := range []*store.Run{cut, done, other} {
			if err := db.StartRun(ctx, r, t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.FinishRun(ctx, done, t0); err != nil {
			t.Fatal(err)
		}
		cut.Cursor = "evt_5"
		if err := db.RecordRun(ctx, cut, t0); err != nil {
			t.Fatal(err)
		}
		// Several at once: one of them resumes the cut run.
		var wg sync.WaitGroup
		got := make([]*store.Run, 4)
		errs := make([]error, len(got))
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = db.ResumeRun(ctx, store.RunBackfill, "src", "", t0.Add(30*time.Second), t0.Add(time.Minute))
			}()
		}
		wg.Wait()
		var resumed *store.Run
		for i, r := range got {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if r != nil {
				if resumed != nil {
					t.Fatalf("runs %d and %d both resumed run %d", resumed.ID, r.ID, cut.ID)
				}
				resumed = r
			}
		}
		if resumed == nil || resumed.Resumes != cut.ID || resumed.Cursor != "evt_5" ||
			!resumed.From.Equal(cut.From) || !resumed.Until.Equal(cut.Until) {
			t.Fatalf("ResumeRun = %+v; want a run resuming %d from evt_5 over its window", resumed, cut.ID)
		}
		if old, _ := db.Run(ctx, cut.ID); old.ResumedBy != resumed.ID {
			t.Fatalf("cut run's resumed_by = %d; want %d", old.ResumedBy, resumed.ID)
		}
		// The resuming run crashes too: it is the next to resume.
		if r, err := db.ResumeRun(ctx, store.RunBackfill, "src", "", t0.Add(time.Minute), t0.Add(time.Minute)); r != nil || err != nil {
			t.Fatalf("ResumeRun(while the resuming run goes on) = %+v, %v; want nil, nil", r, err)
		}
		again, err := db.ResumeRun(ctx, store.RunBackfill, "src", "", t0.Add(90*time.Second), t0.Add(2*time.Minute))
		if err != nil || again == nil || again.Resumes != resumed.ID {
			t.Fatalf("ResumeRun(after a second crash) = %+v, %v; want the run resuming %d", again, err, resumed.ID)
		}
	})
}

func TestReceivedVia(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		hook, listed := newEvent("evt_hook"), newEvent("evt_listed")
		listed.ReceivedVia = payhook.ViaBackfill
		insert(t, db, hook, listed)
		for _, c := range []struct {
			ev   *payhook.Event
			want payhook.Via
		}{{hook, payhook.ViaWebhook}, {listed, payhook.ViaBackfill}} {
			got, err := db.Event(ctx, c.ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.ReceivedVia != c.want {
				t.Errorf("event %s received_via = %q; want %q", c.ev.EventID, got.ReceivedVia, c.want)
			}
		}
		// The API renders an event its own way: listed again with another
		// body, it is known, and no conflict.
		again := newEvent("evt_hook")
		again.Payload, again.ReceivedVia = []byte(`{"id": "evt_hook", "listed": true}`), payhook.ViaBackfill
		if ins := insert(t, db, again); ins[0] {
			t.Fatal("a listed event already delivered was inserted again")
		}
		var alerts int
		if err := db.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_alerts`).Scan(&alerts); err != nil || alerts != 0 {
			t.Fatalf("alerts after listing a delivered event = %d, %v; want none", alerts, err)
		}
	})
}

// A listed event stored first (a backfill that ran while the provider
// was still retrying its delivery) and then delivered with the webhook's
// body, which the API renders differently (Stripe's pending_webhooks),
// is a duplicate and no conflict either: through InsertEventsTx and, on
// PostgreSQL, through StoreEvents (the ack path's one statement).
func TestWebhookAfterBackfillNoConflict(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		ways := []string{"tx"}
		if db.Engine == store.Postgres {
			ways = append(ways, "one-statement")
		}
		for _, way := range ways {
			listed := newEvent("evt_late")
			listed.Source, listed.ReceivedVia = way, payhook.ViaBackfill
			listed.Payload = []byte(`{"id":"evt_late","pending_webhooks":0}`)
			insert(t, db, listed)
			hook := newEvent("evt_late")
			hook.Source, hook.Payload = way, []byte(`{"id":"evt_late","pending_webhooks":1}`)
			var ins []bool
			if way == "tx" {
				ins = insert(t, db, hook)
			} else {
				var err error
				if ins, err = db.StoreEvents(ctx, []*payhook.Event{hook}, store.With{}); err != nil {
					t.Fatal(err)
				}
			}
			if ins[0] {
				t.Fatalf("%s: the webhook of a backfilled event was inserted again", way)
			}
			var alerts int
			if err := db.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_alerts WHERE kind = $1`,
				store.AlertEventBodyConflict).Scan(&alerts); err != nil || alerts != 0 {
				t.Fatalf("%s: %d event_body_conflict alerts (%v) after the webhook of a backfilled event; want none", way, alerts, err)
			}
		}
	})
}
