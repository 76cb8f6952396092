package process_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
)

// The server's handler on events that cannot apply: each is failed at its
// first attempt (never retried for weeks) with an event_failed alert, and
// the events processed around it are unharmed, on both engines (a NUL in
// a payment id used to fail PostgreSQL's insert and its failure record);
// an ignored event says why.
func TestProcessingMoneyEdges(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		sources := []payhook.Source{{Name: "stripe", Provider: "stripe"}}
		q, err := jobs.New(db, config(t, db, sources, now))
		if err != nil {
			t.Fatal(err)
		}
		obj := func(typ, object string) string {
			return `{"id":"evt","type":"` + typ + `","created":1772366400,"data":{"object":` + object + `}}`
		}
		cases := []struct {
			eventID, typ, payload string
			status                payhook.Status
			lastError             string
		}{
			{"evt_pay", "payment_intent.succeeded", obj("payment_intent.succeeded",
				`{"id":"pi_1","amount":1000,"currency":"usd"}`), payhook.StatusProcessed, ""},
			{"evt_nul", "payment_intent.succeeded", obj("payment_intent.succeeded",
				`{"id":"pi_x\u0000y","amount":1000,"currency":"usd"}`), payhook.StatusFailed, "control or format characters"},
			{"evt_eur", "refund.created", obj("refund.created",
				`{"id":"re_1","payment_intent":"pi_1","amount":100,"currency":"eur","status":"succeeded"}`),
				payhook.StatusFailed, `currency "EUR" differs`},
			{"evt_minus0", "refund.created", obj("refund.created",
				`{"id":"re_2","payment_intent":"pi_1","amount":-0,"currency":"usd","status":"succeeded"}`),
				payhook.StatusFailed, "an amount has no sign"},
			{"evt_huge", "payment_intent.succeeded", obj("payment_intent.succeeded",
				`{"id":"pi_2","amount":9223372036854775807,"currency":"usd"}`), payhook.StatusFailed, "is beyond ±1000000000000000 minor units"},
			{"evt_inquiry", "charge.dispute.created", obj("charge.dispute.created",
				`{"id":"dp_1","payment_intent":"pi_1","amount":1000,"status":"warning_needs_response"}`),
				payhook.StatusIgnored, "a Stripe dispute inquiry (status warning_needs_response) takes no money"},
			{"evt_refund", "refund.created", obj("refund.created",
				`{"id":"re_3","payment_intent":"pi_1","amount":700,"currency":"usd","status":"succeeded"}`),
				payhook.StatusProcessed, ""},
		}
		for _, c := range cases {
			ev := &payhook.Event{Source: "stripe", EventID: c.eventID, Type: c.typ, ReceivedAt: now,
				OccurredAt: now, Payload: []byte(c.payload)}
			if _, err := q.Ingest(ctx, []*payhook.Event{ev}); err != nil {
				t.Fatalf("ingest %s: %v", c.eventID, err)
			}
			q.Process(ctx, ev.ID) // a failure is recorded on the event
			got, err := db.Event(ctx, ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != c.status || got.Attempts != 1 || !strings.Contains(got.LastError, c.lastError) {
				t.Errorf("%s: %s after %d attempts (%q); want %s after 1 saying %q",
					c.eventID, got.Status, got.Attempts, got.LastError, c.status, c.lastError)
			}
		}
		alerts, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: billing.AlertEventFailed})
		if err != nil {
			t.Fatal(err)
		}
		failed := map[string]bool{}
		for _, a := range alerts {
			failed[a.Subject] = true
		}
		for _, c := range cases {
			if want := c.status == payhook.StatusFailed; failed["stripe/"+c.eventID] != want {
				t.Errorf("event_failed alert for %s: %v; want %v", c.eventID, !want, want)
			}
		}
		p, err := billing.GetPayment(ctx, db, "stripe", "pi_1")
		if err != nil || p.RefundedAmount != 700 || p.Status != "partially_refunded" {
			t.Fatalf("pi_1 = %+v, %v; want partially refunded 700", p, err)
		}
	})
}
