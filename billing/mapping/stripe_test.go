package mapping_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
)

// A subscription fetched from the simulator's Stripe API carries
// updated_at_ns: it is the fact's UpdatedAt, to the nanosecond, so that
// two states within one second do not tie. Without it, as today.
func TestStripeSubscriptionUpdatedAtNS(t *testing.T) {
	t.Parallel()
	const object = `"id":"sub_1","object":"subscription","customer":"cus_1","status":"active",` +
		`"plan":{"id":"pro"},"current_period_end":1774958400,"updated_at":1772366400`
	base := billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active", CurrentPeriodEnd: unixT(1774958400)}
	for _, tc := range []struct {
		name, extra string
		want        time.Time
		errField    string
	}{
		{"updated_at_ns", `,"updated_at_ns":1772366400123456789`, time.Unix(1772366400, 123456789).UTC(), ""},
		{"no updated_at_ns: updated_at", ``, unixT(1772366400), ""},
		{"null updated_at_ns: updated_at", `,"updated_at_ns":null`, unixT(1772366400), ""},
		{"updated_at_ns a string", `,"updated_at_ns":"soon"`, time.Time{}, "data.object.updated_at_ns"},
		{"updated_at_ns a fraction", `,"updated_at_ns":1.5`, time.Time{}, "data.object.updated_at_ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := `{"type":"customer.subscription.updated","created":1772366399,"data":{"object":{` + object + tc.extra + `}}}`
			facts, err := mapping.Facts("stripe", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: []byte(payload)})
			if tc.errField != "" {
				if !errors.Is(err, payhook.ErrMalformed) || !strings.Contains(err.Error(), tc.errField) {
					t.Fatalf("Facts error = %v, want malformed %s", err, tc.errField)
				}
				return
			}
			want := base
			want.UpdatedAt = tc.want
			if err != nil || !reflect.DeepEqual(facts, []billing.Fact{want}) {
				t.Fatalf("Facts = %+v, %v; want %+v", facts, err, want)
			}
		})
	}
}
