package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/stripe"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// nowhere is a Sender that delivers nothing: only the API is under test.
type nowhere struct{}

func (nowhere) Send(deliver.Target, flavour.Event)  {}
func (nowhere) Log(string) []deliver.Attempt        { return nil }
func (nowhere) Resend(string, deliver.Target) error { return nil }

func TestClientFetchesCurrentState(t *testing.T) {
	t.Parallel()
	p, err := sim.New(sim.Config{Flavour: flavour.Stripe(), Sender: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(p.Handler())
	defer api.Close()
	test, _ := p.Keys()
	sub, _ := p.CreateSubscription(sim.EnvTest, "cus_1", "basic")
	p.UpdateSubscription(sim.EnvTest, sub.ID, "pro") // newer than the event below says
	canceled, _ := p.CancelSubscription(sim.EnvTest, sub.ID)
	c := &stripe.Client{BaseURL: api.URL + "/", Key: test}

	for _, tc := range []struct {
		name, typ, payload string
		wantPlan           string
		wantErr            error
	}{
		{"subscription, current state", "customer.subscription.created",
			`{"type":"customer.subscription.created","data":{"object":{"id":"` + sub.ID + `","plan":{"id":"basic"}}}}`, "pro", nil},
		{"deleted subscription", "customer.subscription.deleted", `{"data":{"object":{"id":"` + sub.ID + `"}}}`, "pro", nil},
		{"about no resource", "ping", `{"data":{"object":{}}}`, "", nil},
		{"unknown subscription", "customer.subscription.updated", `{"data":{"object":{"id":"sub_nope"}}}`, "", payhook.ErrNotFound},
		{"no data.object.id", "customer.subscription.updated", `{"data":{}}`, "", payhook.ErrMalformed},
		// encoding/json would fetch the last of the two, the mapping reads the first.
		{"data.object.id beside ID", "customer.subscription.updated", `{"data":{"object":{"id":"sub_nope","ID":"` + sub.ID + `"}}}`, "", payhook.ErrMalformed},
		{"data.object.id not a string", "customer.subscription.updated", `{"data":{"object":{"id":7}}}`, "", payhook.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := c.Fetch(context.Background(), &payhook.Event{EventID: "evt_1", Type: tc.typ, Payload: []byte(tc.payload)})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Fetch error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantPlan == "" {
				if b != nil {
					t.Fatalf("fetched %s, want nothing", b)
				}
				return
			}
			var got struct {
				Object            string
				Plan              struct{ ID string }
				CancelAtPeriodEnd bool  `json:"cancel_at_period_end"`
				UpdatedAtNS       int64 `json:"updated_at_ns"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("fetched %s: %v", b, err)
			}
			if got.Object != "subscription" || got.Plan.ID != tc.wantPlan || !got.CancelAtPeriodEnd ||
				got.UpdatedAtNS != canceled.UpdatedAt.UnixNano() {
				t.Fatalf("fetched %s, want the canceled subscription on plan %s, updated_at_ns %d",
					b, tc.wantPlan, canceled.UpdatedAt.UnixNano())
			}
		})
	}
	for _, key := range []string{"sk_test_wrong", ""} {
		wrongKey := &stripe.Client{BaseURL: api.URL, Key: key}
		_, err := wrongKey.Fetch(context.Background(), &payhook.Event{Type: "customer.subscription.created",
			Payload: []byte(`{"data":{"object":{"id":"` + sub.ID + `"}}}`)})
		if err == nil || errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("key %q: Fetch error = %v, want a plain error (retried)", key, err)
		}
	}
	api.Close()
	if _, err := c.Fetch(context.Background(), &payhook.Event{Type: "customer.subscription.created",
		Payload: []byte(`{"data":{"object":{"id":"` + sub.ID + `"}}}`)}); err == nil || errors.Is(err, payhook.ErrNotFound) {
		t.Fatalf("API down: Fetch error = %v, want a plain error (retried)", err)
	}
}
