package billete_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/billete"
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
	p, err := sim.New(sim.Config{Flavour: flavour.Billete(), Sender: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(p.Handler())
	defer api.Close()
	test, _ := p.Keys()
	sub, _ := p.CreateSubscription(sim.EnvTest, "cus_1", "basic")
	p.UpdateSubscription(sim.EnvTest, sub.ID, "pro") // newer than the event below says
	c := &billete.Client{BaseURL: api.URL, Key: test}

	for _, tc := range []struct {
		name, typ, payload string
		wantPlan           string
		wantErr            error
	}{
		{"subscription, current state", "subscription.created", `{"data":{"id":"` + sub.ID + `","plan":"basic"}}`, "pro", nil},
		{"about no resource", "webhook_endpoint.test", `{"data":{}}`, "", nil},
		{"unknown resource", "subscription.updated", `{"data":{"id":"sub_nope"}}`, "", payhook.ErrNotFound},
		{"no data.id", "subscription.renewed", `{"data":{}}`, "", payhook.ErrMalformed},
		// encoding/json would fetch the last of the two, the mapping reads the first.
		{"data.id beside ID", "subscription.updated", `{"data":{"id":"sub_nope","ID":"` + sub.ID + `"}}`, "", payhook.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := c.Fetch(context.Background(), &payhook.Event{EventID: "evt_1", Type: tc.typ, Payload: []byte(tc.payload)})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Fetch error = %v, want %v", err, tc.wantErr)
			}
			var got struct{ Plan string }
			if b != nil {
				json.Unmarshal(b, &got)
			}
			if got.Plan != tc.wantPlan {
				t.Fatalf("fetched plan %q (%s), want %q", got.Plan, b, tc.wantPlan)
			}
		})
	}
	wrongKey := &billete.Client{BaseURL: api.URL, Key: "sk_test_wrong"}
	if _, err := wrongKey.Fetch(context.Background(), &payhook.Event{Type: "subscription.created", Payload: []byte(`{"data":{"id":"` + sub.ID + `"}}`)}); err == nil {
		t.Fatal("a wrong API key fetched something")
	}
}
