package paddle_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/paddle"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// quiet is a Sender that delivers nothing: only the API is under test.
type quiet struct{}

func (quiet) Send(deliver.Target, flavour.Event)  {}
func (quiet) Log(string) []deliver.Attempt        { return nil }
func (quiet) Resend(string, deliver.Target) error { return nil }

// Every entity a Paddle notification is about is fetched from the
// simulator's paddle flavour as it is now, in the pinned Paddle-Version;
// an adjustment through its transaction, which lists it.
func TestClientFetchesEveryEntity(t *testing.T) {
	t.Parallel()
	p, err := sim.New(sim.Config{Flavour: flavour.Paddle(), Sender: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		versions = append(versions, r.Header.Get(paddle.VersionHeader))
		p.Handler().ServeHTTP(w, r)
	}))
	defer api.Close()
	test, _ := p.Keys()
	env := sim.EnvTest
	chk, _ := p.CreateCheckout(env, 1000, "eur", "ord_1")
	pay, _ := p.CompleteCheckout(env, chk.ID)
	re, _ := p.Refund(env, pay.ID, 300, "", false)
	p.Chargeback(env, pay.ID)
	p.WinChargeback(env, pay.ID)
	sub, _ := p.CreateSubscription(env, "cus_1", "basic")
	p.CancelSubscription(env, sub.ID)
	c := &paddle.Client{BaseURL: api.URL, Key: test, APIVersion: "1"}
	adj := func(id string) string {
		return `{"data":{"id":"` + id + `","transaction_id":"` + pay.ID + `","status":"approved"}}`
	}
	for _, tc := range []struct {
		typ, payload, wantID, wantStatus string
	}{
		{"transaction.completed", `{"data":{"id":"` + chk.ID + `","status":"ready"}}`, chk.ID, "completed"},
		{"transaction.paid", `{"data":{"id":"` + pay.ID + `"}}`, pay.ID, "completed"},
		{"adjustment.created", adj("adj_" + re.ID), "adj_" + re.ID, "approved"},
		{"adjustment.created", adj("adj_cb_" + pay.ID), "adj_cb_" + pay.ID, "reversed"},
		{"adjustment.created", adj("adj_cbr_" + pay.ID), "adj_cbr_" + pay.ID, "approved"},
		{"subscription.updated", `{"data":{"id":"` + sub.ID + `","status":"active"}}`, sub.ID, "canceled"},
		{"notification.test", `{"data":{}}`, "", ""},
	} {
		b, err := c.Fetch(context.Background(), &payhook.Event{EventID: "evt_1", Type: tc.typ, Payload: []byte(tc.payload)})
		if err != nil {
			t.Fatalf("%s %s: Fetch: %v", tc.typ, tc.wantID, err)
		}
		var got struct {
			ID, Status      string
			ScheduledChange *struct{ Action string } `json:"scheduled_change"`
			Adjustments     []struct{ ID string }
		}
		if b != nil {
			json.Unmarshal(b, &got)
		}
		if got.ID != tc.wantID || got.Status != tc.wantStatus {
			t.Errorf("%s %s: fetched %s; want it %s", tc.typ, tc.wantID, b, tc.wantStatus)
		}
		if tc.typ == "transaction.paid" && len(got.Adjustments) != 3 {
			t.Errorf("transaction: fetched %s; want its refund's, chargeback's and win's adjustments", b)
		}
		if tc.typ == "subscription.updated" && (got.ScheduledChange == nil || got.ScheduledChange.Action != "cancel") {
			t.Errorf("subscription: fetched %s; want its scheduled cancel", b)
		}
	}
	for _, v := range versions {
		if v != "1" {
			t.Fatalf("requests pinned Paddle-Version %q; want every one 1", versions)
		}
	}
	_, err = c.Fetch(context.Background(), &payhook.Event{Type: "adjustment.updated", Payload: []byte(adj("adj_nope"))})
	if !errors.Is(err, payhook.ErrNotFound) {
		t.Errorf("an adjustment its transaction does not list: Fetch error = %v; want one wrapping ErrNotFound", err)
	}
	_, err = c.Fetch(context.Background(), &payhook.Event{Type: "adjustment.updated", Payload: []byte(`{"data":{"id":"adj_1"}}`)})
	if !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf("an adjustment without transaction_id: Fetch error = %v; want one wrapping ErrMalformed", err)
	}
}
