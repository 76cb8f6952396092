package adapter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

func TestSubjectTakes(t *testing.T) {
	t.Parallel()
	sub := adapter.Subject{TypePrefix: "customer.subscription.", Path: []string{"data", "object"}}
	for _, tc := range []struct {
		s    adapter.Subject
		typ  string
		want bool
	}{
		{sub, "customer.subscription.updated", true},
		{sub, "customer.subscription.", true},
		{sub, "customer.subscription", false},
		{sub, "checkout.session.completed", false},
		{sub, "", false},
		{adapter.Subject{}, "customer.subscription.updated", false},
		{adapter.Subject{}, "", false},
	} {
		if got := tc.s.Takes(tc.typ); got != tc.want {
			t.Errorf("Subject{%q}.Takes(%q) = %v; want %v", tc.s.TypePrefix, tc.typ, got, tc.want)
		}
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
