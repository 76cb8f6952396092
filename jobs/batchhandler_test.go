package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
)

// batchHandler is a payhook.BatchHandler over effect: HandleBatch fails
// when its batch holds the event fail names, and ignores the event
// ignore names, as Handle does.
type batchHandler struct {
	fail, ignore string
	mu           sync.Mutex
	batches      int // HandleBatch calls that applied their batch
	alone        int // Handle calls
}

func (h *batchHandler) Handle(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
	h.mu.Lock()
	h.alone++
	h.mu.Unlock()
	return h.apply(ctx, tx, ev)
}

func (h *batchHandler) apply(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
	switch ev.EventID {
	case h.fail:
		return errors.New("this event fails")
	case h.ignore:
		return fmt.Errorf("%w: nothing to do", payhook.ErrIgnored)
	}
	return effect(ctx, tx, ev)
}

func (h *batchHandler) HandleBatch(ctx context.Context, tx *sql.Tx, evs []*payhook.Event) ([]error, error) {
	errs := make([]error, len(evs))
	for i, ev := range evs {
		err := h.apply(ctx, tx, ev)
		if err != nil && !errors.Is(err, payhook.ErrIgnored) {
			return nil, err
		}
		errs[i] = err
	}
	h.mu.Lock()
	h.batches++
	h.mu.Unlock()
	return errs, nil
}

// TestBatchHandler: a queue hands its batches to a payhook.BatchHandler
// at once, each event then processed (or ignored) after one attempt with
// one effect; a batch that fails rolls back and its events are applied
// alone, the failing one failing on its own.
func TestBatchHandler(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail string
	}{{"all succeed", ""}, {"one fails", "evt_3"}} {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				h := &batchHandler{fail: tc.fail, ignore: "evt_5"}
				mux := &payhook.Mux{}
				mux.Handle("*", h)
				db, q := setup(t, dbURL, jobs.Config{Handlers: mux, Workers: 1, Batch: 16, MaxAttempts: 1})
				var evs []*payhook.Event
				for i := range 8 {
					evs = append(evs, event(fmt.Sprint("evt_", i)))
				}
				if _, err := q.Ingest(context.Background(), evs); err != nil {
					t.Fatal(err)
				}
				start(t, q)
				for _, ev := range evs {
					got := waitDone(t, db, ev.ID)
					want, effect := payhook.StatusProcessed, 1
					switch ev.EventID {
					case tc.fail:
						want, effect = payhook.StatusFailed, 0
					case h.ignore:
						want, effect = payhook.StatusIgnored, 0
					}
					if got.Status != want || got.Attempts != 1 || effects(t, db, ev.EventID) != effect {
						t.Errorf("%s: %s after %d attempts with %d effects; want %s after 1 with %d",
							ev.EventID, got.Status, got.Attempts, effects(t, db, ev.EventID), want, effect)
					}
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				if tc.fail == "" && (h.batches == 0 || h.alone > 1) {
					t.Errorf("%d batches handled at once, %d events alone; want the events in batches", h.batches, h.alone)
				}
				if tc.fail != "" && h.alone == 0 {
					t.Errorf("no event handled alone after the batch failed")
				}
			})
		})
	}
}
