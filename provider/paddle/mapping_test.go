package paddle_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/paddle"
)

// An entity listed reads as its event maps it: for each of billing's
// Paddle event fixtures (the SDKs' shapes), the row ListObjects makes of
// the event's entity agrees with the facts payhook's Paddle mapping reads
// from the event (the payment's ref, amount and currency; the refund's
// ref, payment, amount and outcome; the chargeback's outcome; the
// subscription's status and plan), and an entity the mapping ignores
// because it moves no money is left out, or listed as a pending refund.
// So reconcile compares like with like.
func TestListedAsMapped(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../billing/mapping/testdata/paddle/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			raw := fixture(t, file)
			var ev struct {
				Type string          `json:"event_type"`
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "transaction.updated" {
				t.Skip("payhook's mapping reads no transaction.updated: nothing to agree with")
			}
			facts, err := mapping.Facts("paddle", &payhook.Event{Source: "p", EventID: "evt_1", Type: ev.Type, ReceivedAt: time.Now(), Payload: raw})
			if err != nil {
				t.Fatalf("mapping: %v", err)
			}
			page, _ := json.Marshal(map[string]any{"data": []json.RawMessage{ev.Data}, "meta": map[string]any{"pagination": map[string]any{"has_more": false}}})
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(page) }))
			defer api.Close()
			c := &paddle.Client{BaseURL: api.URL, Key: "pdl_sdbx_apikey_x"}
			kinds := map[string][]string{"transaction": {adapter.KindPayment}, "subscription": {adapter.KindSubscription},
				"adjustment": {adapter.KindRefund, adapter.KindDispute}}[strings.Split(ev.Type, ".")[0]]
			var listed []adapter.Object
			for _, kind := range kinds {
				p, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: kind})
				if err != nil {
					t.Fatalf("ListObjects(%s): %v", kind, err)
				}
				listed = append(listed, p.Objects...)
			}
			var want []adapter.Object
			for _, f := range facts {
				switch f := f.(type) {
				case billing.Captured:
					want = append(want, adapter.Object{Kind: adapter.KindPayment, Ref: f.Payment.Ref, Status: "succeeded", Amount: f.Payment.Amount, Currency: f.Payment.Currency, RefundedAmount: -1})
				case billing.Refunded:
					want = append(want, adapter.Object{Kind: adapter.KindRefund, Ref: f.RefundRef, PaymentRef: f.PaymentRef, Status: "succeeded", Amount: f.Amount, Currency: f.Currency})
				case billing.RefundFailed:
					want = append(want, adapter.Object{Kind: adapter.KindRefund, Ref: f.RefundRef, PaymentRef: f.PaymentRef, Status: "failed"})
				case billing.ChargedBack:
					want = append(want, adapter.Object{Kind: adapter.KindDispute, Ref: f.DisputeRef, PaymentRef: f.PaymentRef, Status: "lost", Amount: f.Amount})
				case billing.ChargebackWon:
					if f.DisputeRef == "" {
						continue // a chargeback_reverse: the chargeback it reverses is listed, reversed
					}
					want = append(want, adapter.Object{Kind: adapter.KindDispute, Ref: f.DisputeRef, PaymentRef: f.PaymentRef, Status: "won"})
				case billing.Subscription:
					want = append(want, adapter.Object{Kind: adapter.KindSubscription, Ref: f.Ref, Status: f.Status, Plan: f.Plan})
				}
			}
			if len(want) == 0 && len(listed) == 1 && listed[0].Kind == adapter.KindRefund && listed[0].Status == "pending" {
				return // a refund pending approval: listed, counted for nothing
			}
			if len(listed) != len(want) {
				t.Fatalf("listed %+v; the mapping reads %+v", listed, facts)
			}
			for i, o := range listed {
				w := want[i]
				// What the fact does not say, the row may: compare the rest.
				if w.Amount == 0 && o.Kind != adapter.KindPayment {
					w.Amount = o.Amount
				}
				if w.Currency == "" && o.Kind != adapter.KindPayment {
					w.Currency = o.Currency
				}
				w.Created, w.APIVersion = o.Created, o.APIVersion
				if o != w {
					t.Errorf("listed %+v\nthe mapping reads %+v", o, w)
				}
			}
		})
	}
}
