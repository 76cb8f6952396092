package process_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
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

// In a batch (HandleBatch), an event's API-version drift alert is kept
// only if the event is: one that fails, such as a refund of a payment not
// seen yet, leaves no alert and no alert.raised fact, as it would alone;
// one applied or ignored raises it.
func TestBatchDriftAlertOnlyForEventsKept(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	event := func(id, typ, version, object string) *payhook.Event {
		return &payhook.Event{Source: "stripe", EventID: id, Type: typ, ReceivedAt: now, OccurredAt: now,
			Payload: []byte(`{"id":"` + id + `","type":"` + typ + `","api_version":"` + version +
				`","created":1772366400,"data":{"object":` + object + `}}`)}
	}
	refund := `{"id":"re_1","payment_intent":"pi_unseen","amount":100,"currency":"usd","status":"succeeded"}`
	payment := `{"id":"pi_1","amount":1000,"currency":"usd"}`
	for _, c := range []struct {
		name   string
		evs    []*payhook.Event
		failed []bool // per event: failed (ErrNotSeenYet) or not
		alerts int
	}{
		{"a failed event raises none", []*payhook.Event{
			event("evt_refund", "refund.created", "2099-01-01", refund),
			event("evt_pay", "payment_intent.succeeded", "2024-06-20", payment)}, []bool{true, false}, 0},
		{"an applied event raises it", []*payhook.Event{
			event("evt_refund", "refund.created", "2024-06-20", refund),
			event("evt_pay", "payment_intent.succeeded", "2099-01-01", payment)}, []bool{true, false}, 1},
		{"an ignored event raises it", []*payhook.Event{
			event("evt_invoice", "invoice.paid", "2099-01-01", `{"id":"in_1"}`),
			event("evt_pay", "payment_intent.succeeded", "2024-06-20", payment)}, []bool{false, false}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := open(t, dbURL)
				cfg := config(t, db, []payhook.Source{{Name: "stripe", Provider: "stripe", APIVersion: "2024-06-20"}}, now)
				// A copy for each engine: their subtests run at once.
				evs := make([]*payhook.Event, len(c.evs))
				for i, ev := range c.evs {
					e := *ev
					e.ID = int64(i + 1)
					evs[i] = &e
				}
				tx, err := db.SQL.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				errs, ok, err := cfg.Handlers.DispatchBatch(ctx, tx, evs)
				if err != nil || !ok {
					t.Fatalf("DispatchBatch = %v, %v", ok, err)
				}
				for i, failed := range c.failed {
					if got := errors.Is(errs[i], billing.ErrNotSeenYet); got != failed {
						t.Errorf("event %d: %v; want failed %v", i, errs[i], failed)
					}
				}
				if err := tx.Commit(); err != nil { // as the queue does, the failed event left out
					t.Fatal(err)
				}
				alerts, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: billing.AlertAPIVersionDrift})
				if err != nil {
					t.Fatal(err)
				}
				var facts int
				if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_facts WHERE type = 'alert.raised'`).Scan(&facts); err != nil {
					t.Fatal(err)
				}
				if len(alerts) != c.alerts || facts != c.alerts {
					t.Errorf("%d drift alerts, %d alert.raised facts; want %d, %d", len(alerts), facts, c.alerts, c.alerts)
				}
			})
		})
	}
}

// An API-version drift alert's fact goes out as the event's own facts do:
// routed in the transaction that raises it and told once that commits,
// never left to the outbox's sweep (an hour away here). Both of the
// queue's paths, one event at a time (a source with a Fetch) and in
// batches (without), and both an event applied and one ignored.
func TestDriftAlertToldAfterCommit(t *testing.T) {
	for _, oneByOne := range []bool{true, false} {
		t.Run(map[bool]string{true: "one by one", false: "batch"}[oneByOne], func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := open(t, dbURL)
				box, err := outbox.New(outbox.Config{DB: db, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				sink := &untoldSink{got: make(chan outbox.Fact, 16)}
				if err := box.Add("alerts", []string{outbox.AlertRaised}, sink); err != nil {
					t.Fatal(err)
				}
				src := payhook.Source{Name: "stripe", Provider: "stripe", APIVersion: "2024-06-20"}
				if oneByOne {
					src.Fetch = func(context.Context, *payhook.Event) ([]byte, error) { return nil, nil } // the payload as it is
				}
				q := running(t, process.Config{DB: db, Sources: []payhook.Source{src}, Outbox: box})
				now := time.Now()
				event := func(id, typ, version, object string) *payhook.Event {
					return &payhook.Event{Source: "stripe", EventID: id, Type: typ, ReceivedAt: now, OccurredAt: now,
						Payload: []byte(`{"id":"` + id + `","type":"` + typ + `","api_version":"` + version +
							`","created":1772366400,"data":{"object":` + object + `}}`)}
				}
				if _, err := q.Ingest(ctx, []*payhook.Event{
					event("evt_invoice", "invoice.paid", "2099-01-01", `{"id":"in_1"}`),
					event("evt_pay", "payment_intent.succeeded", "2099-02-02", `{"id":"pi_1","amount":1000,"currency":"usd"}`),
				}); err != nil {
					t.Fatal(err)
				}
				// One alert (kind, subject "stripe"), raised once per version.
				for told := map[string]bool{}; len(told) < 2; {
					select {
					case f := <-sink.got:
						told[f.ID] = true
					case <-time.After(stall):
						t.Fatalf("%d of 2 alert.raised facts told in %v", len(told), stall)
					}
				}
			})
		})
	}
}

// stall is how long a wait may see nothing arrive before it fails: long
// enough for a loaded machine, never a deadline for the whole test.
const stall = 2 * time.Minute

// untoldSink is an Unrecorded sink that hands each fact it is sent to got.
type untoldSink struct{ got chan outbox.Fact }

func (s *untoldSink) Send(_ context.Context, f outbox.Fact) (outbox.Receipt, error) {
	s.got <- f
	return outbox.Receipt{}, nil
}

func (*untoldSink) Unrecorded() {}

// An event whose api_version is no reference (4,096 bytes, or control
// characters) is processed, alone or in a batch, and raises one drift
// alert naming the version by its length and digest: on PostgreSQL the
// version itself, a key of the alerts' unique indexes, failed the event's
// transaction on every attempt (an index entry is at most 2,704 bytes).
func TestDriftOfAnUnreadableVersion(t *testing.T) {
	var long string // 4,096 bytes that do not compress
	for i := range 64 {
		sum := sha256.Sum256([]byte{byte(i)})
		long += hex.EncodeToString(sum[:])
	}
	for _, c := range []struct{ name, version string }{
		{"long", long},
		{"control", "2024-06-20\\u0007"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := open(t, dbURL)
				now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
				cfg := config(t, db, []payhook.Source{{Name: "stripe", Provider: "stripe", APIVersion: "2024-06-20"}}, now)
				for i, batch := range []bool{false, true} {
					id := fmt.Sprintf("pi_%d", i)
					ev := &payhook.Event{ID: int64(i + 1), Source: "stripe", EventID: "evt_" + id, Type: "payment_intent.succeeded",
						ReceivedAt: now, OccurredAt: now,
						Payload: []byte(`{"id":"evt_` + id + `","type":"payment_intent.succeeded","api_version":"` + c.version +
							`","created":1772366400,"data":{"object":{"id":"` + id + `","amount":1000,"currency":"usd"}}}`)}
					tx, err := db.SQL.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					if batch {
						var errs []error
						if errs, _, err = cfg.Handlers.DispatchBatch(ctx, tx, []*payhook.Event{ev}); err == nil {
							err = errs[0]
						}
					} else {
						err = cfg.Handlers.Dispatch(ctx, tx, ev)
					}
					if err != nil {
						tx.Rollback()
						t.Fatalf("batch %v: %v", batch, err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					if _, err := billing.GetPayment(ctx, db, "stripe", id); err != nil {
						t.Errorf("batch %v: %v", batch, err)
					}
				}
				alerts, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: billing.AlertAPIVersionDrift})
				if err != nil {
					t.Fatal(err)
				}
				if len(alerts) != 1 || alerts[0].Subject != "stripe" || alerts[0].Count != 1 ||
					!strings.Contains(alerts[0].Message, "version unreadable (") {
					t.Errorf("alerts = %+v; want one, counted once, naming the version by its length and digest", alerts)
				}
			})
		})
	}
}
