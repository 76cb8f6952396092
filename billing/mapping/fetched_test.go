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
		{"stripe payment intent refunded since", "stripe", "payment_intent.succeeded",
			`{"data":{"object":{"id":"pi_1","amount":1000,"currency":"usd","latest_charge":{"id":"ch_1",
			"refunds":{"data":[{"id":"re_1","amount":300,"currency":"usd","status":"succeeded"},{"id":"re_2","amount":100,"status":"failed"},
			{"id":"re_3","amount":100,"status":"requires_action"}]}}}}}`,
			[]string{"billing.Captured", "billing.Refunded", "billing.RefundFailed"}},
		{"stripe payment intent with a refund in a status unknown here", "stripe", "payment_intent.succeeded",
			`{"data":{"object":{"id":"pi_1","amount":1000,"currency":"usd","latest_charge":{"id":"ch_1",
			"refunds":{"data":[{"id":"re_1","amount":300,"currency":"usd","status":"succeeded"},{"id":"re_2","amount":100,"status":"reversed_later"}]}}}}}`,
			[]string{"billing.Captured", "billing.Refunded"}},
		{"stripe payment intent, its latest charge not expanded", "stripe", "payment_intent.succeeded",
			`{"data":{"object":{"id":"pi_1","amount":1000,"currency":"usd","latest_charge":"ch_1"}}}`,
			[]string{"billing.Captured"}},
		{"paddle transaction refunded and charged back since", "paddle", "transaction.paid",
			`{"data":{"id":"txn_1","currency_code":"EUR","details":{"totals":{"total":"1000"}},"adjustments":[
			{"id":"adj_1","action":"refund","status":"approved","transaction_id":"txn_1","currency_code":"EUR","totals":{"total":"300"}},
			{"id":"adj_2","action":"refund","status":"pending_approval","transaction_id":"txn_1","totals":{"total":"50"}},
			{"id":"adj_3","action":"chargeback","status":"reversed","transaction_id":"txn_1","totals":{"total":"700"}}]}}`,
			[]string{"billing.Captured", "billing.Refunded", "billing.ChargedBack", "billing.ChargebackWon"}},
		{"paddle transaction with an adjustment in a status unknown here", "paddle", "transaction.paid",
			`{"data":{"id":"txn_1","currency_code":"EUR","details":{"totals":{"total":"1000"}},"adjustments":[
			{"id":"adj_1","action":"refund","status":"on_hold","transaction_id":"txn_1","totals":{"total":"300"}}]}}`,
			[]string{"billing.Captured"}},
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
