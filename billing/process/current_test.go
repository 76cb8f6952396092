package process

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
			`{"id":"evt_1","data":{"id":"sub_1","plan":"pro"}}`},
		{"stripe subscription", "stripe", "customer.subscription.updated",
			`{"id":"evt_1","data":{"object":{"id":"sub_1","status":"active"},"previous_attributes":{}}}`, `{"id":"sub_1","status":"canceled"}`,
			`{"id":"evt_1","data":{"object":{"id":"sub_1","status":"canceled"},"previous_attributes":{}}}`},
		{"a missing subject is created", "stripe", "customer.subscription.updated",
			`{"id":"evt_1"}`, `{"id":"sub_1"}`, `{"id":"evt_1","data":{"object":{"id":"sub_1"}}}`},
		{"a refund replaces the refund only", "billete", "payment.refunded",
			`{"data":{"id":"pay_1","refund":{"id":"re_1","status":"succeeded"}}}`, `{"id":"re_1","status":"failed"}`,
			`{"data":{"id":"pay_1","refund":{"id":"re_1","status":"failed"}}}`},
		{"stripe dispute", "stripe", "charge.dispute.created",
			`{"data":{"object":{"id":"dp_1","status":"needs_response"}}}`, `{"id":"dp_1","status":"won"}`,
			`{"data":{"object":{"id":"dp_1","status":"won"}}}`},
		{"a type not fetched", "stripe", "ping", `{"data":{"object":{}}}`, `{"id":"x"}`, `{"data":{"object":{}}}`},
		{"nothing fetched", "stripe", "customer.subscription.updated", `{"data":{"object":{}}}`, "", `{"data":{"object":{}}}`},
		{"a resource that is not JSON", "stripe", "customer.subscription.updated", `{"data":{"object":{}}}`, `{"id":`, `{"data":{"object":{}}}`},
		{"provider without an API", "crypto", "InvoiceSettled", `{"data":{}}`, `{"id":"x"}`, `{"data":{}}`},
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

func TestSJSONPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"data"}, "data"},
		{[]string{"data", "object"}, "data.object"},
		{[]string{"a.b", "c*", "d_e-1"}, `a\.b.c\*.d_e-1`},
	} {
		if got := sjsonPath(tc.path); got != tc.want {
			t.Errorf("sjsonPath(%q) = %q; want %q", tc.path, got, tc.want)
		}
	}
}
