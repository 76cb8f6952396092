package adapter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

func TestResourcesFor(t *testing.T) {
	t.Parallel()
	sub := adapter.Resource{Path: []string{"data", "object"}, Route: "v1/subscriptions/{id}"}
	dispute := adapter.Resource{Path: []string{"data", "object"}, Route: "v1/disputes/{id}"}
	deleted := adapter.Resource{Path: []string{"data"}, Route: "deleted/{id}"}
	rs := adapter.Resources{
		"customer.subscription.*":       sub,
		"customer.subscription.deleted": deleted,
		"charge.dispute.*":              dispute,
		"charge.*":                      {Route: "v1/charges/{id}"},
	}
	for _, tc := range []struct {
		rs    adapter.Resources
		typ   string
		route string
	}{
		{rs, "customer.subscription.updated", "v1/subscriptions/{id}"},
		{rs, "customer.subscription.", "v1/subscriptions/{id}"},
		{rs, "customer.subscription.deleted", "deleted/{id}"}, // exact wins
		{rs, "charge.dispute.created", "v1/disputes/{id}"},    // longer prefix wins
		{rs, "charge.refunded", "v1/charges/{id}"},
		{rs, "customer.subscription", ""},
		{rs, "customer.subscription.*", "v1/subscriptions/{id}"}, // a type that is a pattern is only a type
		{rs, "checkout.session.completed", ""},
		{rs, "", ""},
		{nil, "customer.subscription.updated", ""},
	} {
		r, ok := tc.rs.For(tc.typ)
		if ok != (tc.route != "") || r.Route != tc.route {
			t.Errorf("For(%q) = %q, %v; want %q", tc.typ, r.Route, ok, tc.route)
		}
	}
}

func TestResourceID(t *testing.T) {
	t.Parallel()
	r := adapter.Resource{Path: []string{"data", "object"}, Route: "v1/x/{id}"}
	for _, tc := range []struct {
		payload, want string
	}{
		{`{"data":{"object":{"id":"sub_1"}}}`, "sub_1"},
		{`{"data":{}}`, ""},
		{`{"data":{"object":{"id":7}}}`, ""},
		{`{"data":{"object":{"id":""}}}`, ""},
		{`{"data":{"object":{"id":"a","ID":"b"}}}`, ""}, // encoding/json would read "b"
		{`not json`, ""},
	} {
		got, err := r.ID(&payhook.Event{EventID: "evt_1", Payload: []byte(tc.payload)})
		if got != tc.want || (tc.want == "") != errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("ID(%s) = %q, %v; want %q", tc.payload, got, err, tc.want)
		}
	}
	if got, want := r.URLPath("a/b c"), "v1/x/a%2Fb%20c"; got != want {
		t.Errorf("URLPath = %q; want %q", got, want)
	}
}

func TestCheckedEnvelope(t *testing.T) {
	t.Parallel()
	read := func(env payhook.Envelope, err error) func([]byte) (payhook.Envelope, error) {
		return func([]byte) (payhook.Envelope, error) { return env, err }
	}
	good := payhook.Envelope{EventID: "evt_1", Type: "t", OccurredAt: payhook.MinTime}
	for _, tc := range []struct {
		name    string
		read    func([]byte) (payhook.Envelope, error)
		wantErr error
	}{
		{"read", read(good, nil), nil},
		{"read fails", read(payhook.Envelope{}, payhook.ErrMalformed), payhook.ErrMalformed},
		{"unstorable id", read(payhook.Envelope{EventID: "evt\x00", Type: "t", OccurredAt: payhook.MinTime}, nil), payhook.ErrMalformed},
		{"a time beyond MaxTime", read(payhook.Envelope{EventID: "evt_1", Type: "t", OccurredAt: payhook.MaxTime.Add(time.Hour)}, nil), payhook.ErrMalformed},
	} {
		env, err := adapter.CheckedEnvelope("p", tc.read)(nil)
		if !errors.Is(err, tc.wantErr) || (err == nil) != (env == good) {
			t.Errorf("%s: CheckedEnvelope = %+v, %v; want %v", tc.name, env, err, tc.wantErr)
		}
		if err != nil && err.Error()[:3] != "p: " {
			t.Errorf("%s: error %q does not name the provider", tc.name, err)
		}
	}
}
