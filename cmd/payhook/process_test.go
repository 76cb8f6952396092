package main

import (
	"testing"

	"github.com/payhook/payhook"
)

func TestCurrentReplacesTheSubject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, provider, typ, payload, resource, want string
	}{
		{"billete subscription", "billete", "subscription.updated",
			`{"id":"evt_1","data":{"id":"sub_1","plan":"basic"}}`, `{"id":"sub_1","plan":"pro"}`,
			`{"data":{"id":"sub_1","plan":"pro"},"id":"evt_1"}`},
		{"stripe subscription", "stripe", "customer.subscription.updated",
			`{"id":"evt_1","data":{"object":{"id":"sub_1","status":"active"},"previous_attributes":{}}}`, `{"id":"sub_1","status":"canceled"}`,
			`{"data":{"object":{"id":"sub_1","status":"canceled"},"previous_attributes":{}},"id":"evt_1"}`},
		{"money events keep their own data", "billete", "payment.refunded",
			`{"data":{"id":"pay_1"}}`, `{"id":"pay_1","status":"refunded"}`, `{"data":{"id":"pay_1"}}`},
		{"nothing fetched", "stripe", "customer.subscription.updated", `{"data":{"object":{}}}`, "", `{"data":{"object":{}}}`},
		{"provider without an API", "paddle", "subscription.updated", `{"data":{}}`, `{"id":"x"}`, `{"data":{}}`},
	} {
		ev := &payhook.Event{Type: tc.typ, Payload: []byte(tc.payload)}
		if tc.resource != "" {
			ev.Resource = []byte(tc.resource)
		}
		if got := string(current(tc.provider, ev).Payload); got != tc.want {
			t.Errorf("%s: current() payload = %s, want %s", tc.name, got, tc.want)
		}
		if string(ev.Payload) != tc.payload {
			t.Errorf("%s: current() changed the stored event's payload", tc.name)
		}
	}
}
