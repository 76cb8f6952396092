package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/stripe"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
)

// Every object a Stripe event is about is fetched from the simulator's
// stripe flavour in its current state, whatever the event's snapshot said.
func TestClientFetchesEveryObject(t *testing.T) {
	t.Parallel()
	p, err := sim.New(sim.Config{Flavour: flavour.Stripe(), Sender: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(p.Handler())
	defer api.Close()
	test, _ := p.Keys()
	env := sim.EnvTest
	chk, _ := p.CreateCheckout(env, 1000, "usd", "ord_1")
	pay, _ := p.CompleteCheckout(env, chk.ID)
	re, _ := p.Refund(env, pay.ID, 300, "", false)
	failed, _ := p.Refund(env, pay.ID, 100, "", true)
	cb, _ := p.Chargeback(env, pay.ID)
	if _, err := p.WinChargeback(env, pay.ID); err != nil {
		t.Fatal(err)
	}
	c := &stripe.Client{BaseURL: api.URL, Key: test}
	obj := func(id string) string { return `{"data":{"object":{"id":"` + id + `","status":"stale"}}}` }
	for _, tc := range []struct {
		typ, payload          string
		wantObject, wantState string
		wantRefunds           int
	}{
		{"checkout.session.completed", obj(chk.ID), "checkout.session", "complete", 0},
		{"payment_intent.succeeded", obj(pay.ID), "payment_intent", "succeeded", 2}, // its latest charge's
		{"charge.refunded", obj(pay.ID), "charge", "succeeded", 2},
		{"refund.created", obj(re.ID), "refund", "succeeded", 0},
		{"charge.refund.updated", obj(failed.ID), "refund", "failed", 0},
		{"charge.dispute.created", obj(cb.DisputeID), "dispute", "won", 0},
		{"ping", obj("x"), "", "", 0},
	} {
		b, err := c.Fetch(context.Background(), &payhook.Event{EventID: "evt_1", Type: tc.typ, Payload: []byte(tc.payload)})
		if err != nil {
			t.Fatalf("%s: Fetch: %v", tc.typ, err)
		}
		if tc.wantObject == "" {
			if b != nil {
				t.Errorf("%s: fetched %s; want nothing", tc.typ, b)
			}
			continue
		}
		type refunds struct{ Data []struct{ Status string } }
		var got struct {
			Object, Status string
			Refunds        refunds
			LatestCharge   struct{ Refunds refunds } `json:"latest_charge"`
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Object != tc.wantObject || got.Status != tc.wantState ||
			len(got.Refunds.Data)+len(got.LatestCharge.Refunds.Data) != tc.wantRefunds {
			t.Errorf("%s: fetched %s (%v); want a %s %s with %d refunds", tc.typ, b, err, tc.wantObject, tc.wantState, tc.wantRefunds)
		}
	}
	_, err = c.Fetch(context.Background(), &payhook.Event{Type: "charge.dispute.closed", Payload: []byte(obj("dp_nope"))})
	if !errors.Is(err, payhook.ErrNotFound) {
		t.Errorf("an unknown dispute: Fetch error = %v; want one wrapping ErrNotFound", err)
	}
}

// The fetch pins the source's Stripe-Version, expands a charge's refunds,
// and says which answers are worth retrying: every one but a 404 and an
// event that names no object.
func TestClientFetchRequestsAndFaults(t *testing.T) {
	t.Parallel()
	var answer func(w http.ResponseWriter, r *http.Request)
	var seen *http.Request
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r
		answer(w, r)
	}))
	defer api.Close()
	c := &stripe.Client{BaseURL: api.URL, Key: "sk_test_1", APIVersion: "2024-06-20"}
	ev := &payhook.Event{EventID: "evt_1", Type: "charge.refunded", Payload: []byte(`{"data":{"object":{"id":"ch_1"}}}`)}
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		check  func(err error) bool
	}{
		{"ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"id":"ch_1","object":"charge"}`)) },
			func(err error) bool { return err == nil }},
		{"429", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		}, func(err error) bool {
			var ae *adapter.APIError
			return errors.As(err, &ae) && ae.Temporary() && ae.RetryAfter > 0 && !errors.Is(err, payhook.ErrNotFound)
		}},
		{"500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
			func(err error) bool {
				var ae *adapter.APIError
				return errors.As(err, &ae) && ae.Temporary() && !errors.Is(err, payhook.ErrNotFound)
			}},
		{"404", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) },
			func(err error) bool { return errors.Is(err, payhook.ErrNotFound) }},
		{"another object", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"id":"ch_2"}`)) },
			func(err error) bool {
				return err != nil && !errors.Is(err, payhook.ErrNotFound) && !errors.Is(err, payhook.ErrMalformed)
			}},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`<html>`)) },
			func(err error) bool {
				return err != nil && !errors.Is(err, payhook.ErrNotFound) && !errors.Is(err, payhook.ErrMalformed)
			}},
	} {
		answer = tc.answer
		_, err := c.Fetch(context.Background(), ev)
		if !tc.check(err) {
			t.Errorf("%s: Fetch error = %v", tc.name, err)
		}
		if seen.URL.Path != "/v1/charges/ch_1" || seen.URL.Query().Get("expand[]") != "refunds" ||
			seen.Header.Get("Stripe-Version") != "2024-06-20" || seen.Header.Get("Authorization") != "Bearer sk_test_1" {
			t.Errorf("%s: request %s %v; want GET /v1/charges/ch_1?expand[]=refunds with the key and Stripe-Version", tc.name, seen.URL, seen.Header)
		}
	}
}

// Stripe expands 10 of a charge's refunds: the fetch lists the rest
// (GET /v1/refunds?charge=, page after page), so that a charge or a
// payment intent fetched lists every refund, and has_more is false.
func TestClientFetchPagesRefunds(t *testing.T) {
	t.Parallel()
	p, err := sim.New(sim.Config{Flavour: flavour.Stripe(), Sender: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refunds []string // the starting_after of each GET /v1/refunds
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/refunds" {
			mu.Lock()
			refunds = append(refunds, r.URL.Query().Get("starting_after"))
			mu.Unlock()
			// The client asks for 100 a page; 5 make it page.
			q := r.URL.Query()
			q.Set("limit", "5")
			r.URL.RawQuery = q.Encode()
		}
		p.Handler().ServeHTTP(w, r)
	}))
	defer api.Close()
	test, _ := p.Keys()
	env := sim.EnvTest
	chk, _ := p.CreateCheckout(env, 1000, "usd", "ord_1")
	pay, _ := p.CompleteCheckout(env, chk.ID)
	other, _ := p.CompleteCheckout(env, must(p.CreateCheckout(env, 1000, "usd", "ord_2")).ID)
	want := map[string]bool{}
	for i := range 17 {
		if i == 12 {
			p.Refund(env, other.ID, 10, "", false) // another charge's, among the paged ones: not listed
		}
		re, err := p.Refund(env, pay.ID, 10, "", false)
		if err != nil {
			t.Fatal(err)
		}
		want[re.ID] = true
	}
	c := &stripe.Client{BaseURL: api.URL, Key: test}
	for _, typ := range []string{"charge.refunded", "payment_intent.succeeded"} {
		mu.Lock()
		refunds = nil
		mu.Unlock()
		b, err := c.Fetch(context.Background(), &payhook.Event{EventID: "evt_1", Type: typ, Payload: []byte(`{"data":{"object":{"id":"` + pay.ID + `"}}}`)})
		if err != nil {
			t.Fatalf("%s: Fetch: %v", typ, err)
		}
		type list struct {
			Data    []struct{ ID string }
			HasMore bool `json:"has_more"`
		}
		var got struct {
			Refunds      list
			LatestCharge struct{ Refunds list } `json:"latest_charge"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		l := got.Refunds
		if typ == "payment_intent.succeeded" {
			l = got.LatestCharge.Refunds
		}
		mu.Lock()
		requests := len(refunds)
		mu.Unlock()
		ids := map[string]bool{}
		for _, r := range l.Data {
			ids[r.ID] = true
		}
		if len(l.Data) != 17 || len(ids) != 17 || l.HasMore || requests != 2 {
			t.Errorf("%s: fetched %d refunds (%d distinct of the 17), has_more %t, in %d more requests; want the 17, has_more false, in 2",
				typ, len(l.Data), len(ids), l.HasMore, requests)
		}
		for id := range ids {
			if !want[id] {
				t.Errorf("%s: fetched refund %s, not one of the charge's", typ, id)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
