package mapping_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/mapping"
)

// An event whose object is read as it is now (processing puts the object
// fetched from the provider's API in place of the event's) maps what that
// state says: a dispute won since, a refund failed since.
func TestFetchedStates(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, provider, typ, payload string
		want                         []string // the facts' kinds
	}{
		{"stripe dispute still open", "stripe", "charge.dispute.created",
			`{"data":{"object":{"id":"dp_1","payment_intent":"pi_1","amount":500,"status":"needs_response"}}}`,
			[]string{"billing.ChargedBack"}},
		{"stripe dispute won since", "stripe", "charge.dispute.created",
			`{"data":{"object":{"id":"dp_1","payment_intent":"pi_1","amount":500,"status":"won"}}}`,
			[]string{"billing.ChargedBack", "billing.ChargebackWon"}},
		{"stripe dispute lost since", "stripe", "charge.dispute.funds_withdrawn",
			`{"data":{"object":{"id":"dp_1","payment_intent":"pi_1","amount":500,"status":"lost"}}}`,
			[]string{"billing.ChargedBack"}},
		{"billete chargeback still open", "billete", "payment.charged_back",
			`{"data":{"id":"pay_1","status":"charged_back","amount":500,"currency":"usd","dispute_id":"dp_pay_1"}}`,
			[]string{"billing.ChargedBack"}},
		{"billete chargeback won since", "billete", "payment.charged_back",
			`{"data":{"id":"pay_1","status":"partially_refunded","amount":500,"currency":"usd","dispute_id":"dp_pay_1"}}`,
			[]string{"billing.ChargedBack", "billing.ChargebackWon"}},
		{"billete refund succeeded", "billete", "payment.refunded",
			`{"data":{"id":"pay_1","refund":{"id":"re_1","amount":100,"currency":"usd","status":"succeeded"}}}`,
			[]string{"billing.Refunded"}},
		{"billete refund failed since", "billete", "payment.refunded",
			`{"data":{"id":"pay_1","refund":{"id":"re_1","amount":100,"currency":"usd","status":"failed"}}}`,
			[]string{"billing.RefundFailed"}},
	} {
		facts, err := mapping.Facts(tc.provider, &payhook.Event{EventID: "evt_1", Type: tc.typ, OccurredAt: at, Payload: []byte(tc.payload)})
		var got []string
		for _, f := range facts {
			got = append(got, fmt.Sprintf("%T", f))
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: facts %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
