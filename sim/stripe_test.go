package sim

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/payhook/payhook/sim/flavour"
)

// With the stripe flavour, GET /v1/subscriptions/{id} returns a
// subscription's current state as its events render it in data.object,
// plus created (as Stripe's) and updated_at_ns, which orders states that Stripe's whole seconds
// cannot: here every change happens at the same instant of the clock.
func TestStripeRetrieveSubscription(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Flavour = flavour.Stripe() })
	h.endpoint(t, h.test, "*")
	sub := h.must(t, 201, h.test, "POST", "/subscriptions", map[string]any{"customer": "cus_1", "plan": "basic"})
	id := sub["id"].(string)

	var lastNS float64
	var lastSeconds any
	for i, change := range []struct{ path, plan string }{
		{"", ""}, {"/subscriptions/" + id, "pro"}, {"/subscriptions/" + id + "/renew", ""},
		{"/subscriptions/" + id + "/cancel", ""}, {"/subscriptions/" + id + "/end", ""},
	} {
		if change.path != "" {
			var body any
			if change.plan != "" {
				body = map[string]any{"plan": change.plan}
			}
			h.must(t, 200, h.test, "POST", change.path, body)
		}
		got := h.must(t, 200, h.test, "GET", "/v1/subscriptions/"+id, nil)

		// The event of this change, as delivered.
		sent := h.sender.Sent()
		ev := sent[len(sent)-1].ev
		raw, err := flavour.Stripe().Body(ev, "")
		if err != nil {
			t.Fatal(err)
		}
		var delivered struct {
			Data struct{ Object map[string]any }
		}
		if err := json.Unmarshal(raw, &delivered); err != nil {
			t.Fatal(err)
		}
		ns, ok := got["updated_at_ns"].(float64)
		if !ok || ns <= lastNS {
			t.Fatalf("change %d: updated_at_ns %v, want more than %v", i, got["updated_at_ns"], lastNS)
		}
		if i > 0 && got["updated_at"] != lastSeconds {
			t.Fatalf("change %d: updated_at %v; the clock did not move from %v", i, got["updated_at"], lastSeconds)
		}
		lastNS, lastSeconds = ns, got["updated_at"]
		// created, Stripe's creation time, which the sim's events leave
		// out (they carry created_at).
		if created, _ := time.Parse(time.RFC3339Nano, sub["created_at"].(string)); got["created"] != float64(created.Unix()) {
			t.Fatalf("change %d: created %v; want %d, the subscription's created_at", i, got["created"], created.Unix())
		}
		delete(got, "updated_at_ns")
		delete(got, "created")
		if !reflect.DeepEqual(got, delivered.Data.Object) {
			t.Fatalf("change %d (%s): GET returned\n%v\nthe event carried\n%v", i, ev.Type, got, delivered.Data.Object)
		}
	}
	final := h.must(t, 200, h.test, "GET", "/v1/subscriptions/"+id, nil)
	if final["status"] != "canceled" || final["ended_at"] == nil || final["plan"].(map[string]any)["id"] != "pro" {
		t.Fatalf("ended subscription: %v", final)
	}

	for _, tc := range []struct {
		key, path string
		status    int
		errType   string
	}{
		{"", "/v1/subscriptions/" + id, 401, "authentication"},
		{"sk_test_wrong", "/v1/subscriptions/" + id, 401, "authentication"},
		{h.test, "/v1/subscriptions/sub_nope", 404, "not_found"},
		{h.live, "/v1/subscriptions/" + id, 404, "not_found"}, // another environment
	} {
		r := h.do(t, tc.key, "GET", tc.path, nil)
		if r.status != tc.status || r.errType(t) != tc.errType {
			t.Errorf("GET %s with key %q = %d %s, want %d %s", tc.path, tc.key, r.status, r.body, tc.status, tc.errType)
		}
	}
}

// Flavours without a Retriever have no such route.
func TestRetrieveNeedsAFlavourThatServesIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Flavour = flavour.Billete() })
	sub := h.must(t, 201, h.test, "POST", "/subscriptions", map[string]any{"customer": "cus_1", "plan": "basic"})
	if r := h.do(t, h.test, "GET", "/v1/subscriptions/"+sub["id"].(string), nil); r.status != 404 {
		t.Fatalf("billete: GET /v1/subscriptions/{id} = %d %s, want 404", r.status, r.body)
	}
}
