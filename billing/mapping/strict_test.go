package mapping_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/mapping"
)

// TestStrictPayloads: the mappings read payloads with the envelope's strict
// reader (signing.Object). A provider fixture with one hostile edit fails
// with ErrMalformed naming the payload or the field: a duplicate name,
// invalid UTF-8, a lone surrogate, data after the object, or a field read
// beside a name differing only in case (which encoding/json, reading the
// stored payload for an application, could match instead). A case
// variant of a field no mapping reads changes nothing.
func TestStrictPayloads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		old, new   string // the edit: the first old in the fixture becomes new
		errField   string // "" when the facts are the fixture's own
	}{
		{"duplicate amount", "stripe/payment_intent.succeeded.json",
			`"amount_received": 1099,`, `"amount_received": 1099, "amount_received": 99999,`, "payload"},
		{"case variant of a read amount", "stripe/payment_intent.succeeded.json",
			`"amount_received": 1099,`, `"amount_received": 1099, "Amount_Received": 99999,`, "data.object.amount_received"},
		{"case variant of the order id", "stripe/payment_intent.succeeded.json",
			`"order_id": "ord_3"`, `"order_id": "ord_3", "ORDER_ID": "ord_4"`, "data.object.metadata.order_id"},
		{"case variant of a field only tested for presence", "stripe/customer.subscription.updated.cancel_at_period_end.json",
			`"cancel_at": null,`, `"cancel_at": null, "Cancel_At": 1234567890,`, "data.object.cancel_at"},
		{"case variant of grand_total", "paddle/transaction.completed.json",
			`"grand_total": "950",`, `"grand_total": "950", "Grand_Total": "1",`, "grand_total"},
		{"invalid UTF-8 in a field no mapping reads", "stripe/payment_intent.succeeded.json",
			`"capture_method": "automatic"`, "\"capture_method\": \"auto\xffmatic\"", "payload"},
		{"lone surrogate", "stripe/payment_intent.succeeded.json",
			`"capture_method": "automatic"`, `"capture_method": "auto\ud800matic"`, "payload"},
		{"data after the object", "stripe/payment_intent.succeeded.json", "\n}\n", "\n} {}\n", "payload"},
		{"case variant of a field no mapping reads", "stripe/payment_intent.succeeded.json",
			`"capture_method": "automatic"`, `"capture_method": "automatic", "Capture_Method": "manual"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			provider, _, _ := strings.Cut(tc.file, "/")
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			typ := strings.TrimSuffix(filepath.Base(tc.file), ".json")
			ev := &payhook.Event{EventID: "evt_strict", Type: typ, OccurredAt: occurred, Payload: b}
			want, err := mapping.Read(provider, ev)
			if err != nil || want.Facts == nil {
				t.Fatalf("the fixture itself: %+v, %v", want, err)
			}
			edited := strings.Replace(string(b), tc.old, tc.new, 1)
			if edited == string(b) {
				t.Fatalf("%s has no %q", tc.file, tc.old)
			}
			hostile := *ev
			hostile.Payload = []byte(edited)
			got, err := mapping.Read(provider, &hostile)
			if tc.errField == "" {
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("Read = %s, %v; want the fixture's %s", show(got.Facts), err, show(want.Facts))
				}
				return
			}
			if !errors.Is(err, payhook.ErrMalformed) || !strings.Contains(err.Error(), tc.errField) || got.Facts != nil {
				t.Fatalf("Read = %s, %v; want ErrMalformed naming %s", show(got.Facts), err, tc.errField)
			}
		})
	}
}
