package mapping_test

import (
	"reflect"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
)

// A multicapture charge (payment_method_options.card.request_multicapture,
// payment_method_details.card.multicapture.status available) as Stripe's
// multicapture guide (docs.stripe.com/payments/multicapture) has it: the
// fixtures' 1099 authorized, 800 captured with final_capture=false, then
// the other 299 refunded by a refund of captured money; the final capture
// takes 200 more and releases the last 99.
const (
	multiFirst = partialCaptured                // captured with final_capture=false
	multiLeft  = partialAuthorized - multiFirst // what the first capture left capturable
	multiFinal = multiFirst + 200               // captured in all after the final capture
	multiRest  = partialAuthorized - multiFinal // released at the final capture
	multiRefAt = releaseAt + 3600               // the refund of captured money, between the captures
	multiEndAt = releaseAt + 7200               // the final capture and its release
)

// multicaptureCharge edits a charge of a fixture into the multicapture
// charge: captured (false until the final capture: "The captured field
// for a charge only becomes true after a final capture or authorization
// reversal"), amountCaptured, and its refunds (newest first) summed in
// amount_refunded; multicapture.status stays available either way.
func multicaptureCharge(c map[string]any, captured bool, amountCaptured int64, refunds ...map[string]any) {
	partialCharge(c, refunds...)
	c["captured"], c["amount_captured"] = captured, amountCaptured
	c["payment_method_details"] = map[string]any{"type": "card", "card": map[string]any{
		"brand": "visa", "last4": "4242", "network": "visa",
		"multicapture": map[string]any{"status": "available"},
	}}
}

// multicaptureRefunded is charge.refunded for the multicapture charge.
func multicaptureRefunded(t *testing.T, captured bool, amountCaptured int64, refunds ...map[string]any) []byte {
	return editFixture(t, "stripe/charge.refunded.json", func(o map[string]any) {
		multicaptureCharge(o, captured, amountCaptured, refunds...)
	})
}

// multicaptureIntent is the payment intent of the multicapture charge as
// payhook fetches it (expand[]=latest_charge.refunds) after the final
// capture: succeeded, amount_received multiFinal, amount_capturable 0.
func multicaptureIntent(t *testing.T, refunds ...map[string]any) []byte {
	_, charge := fixtureData(t, "stripe/charge.refunded.json")
	c := charge["object"].(map[string]any)
	multicaptureCharge(c, true, multiFinal, refunds...)
	return editFixture(t, "stripe/payment_intent.succeeded.json", func(o map[string]any) {
		o["status"], o["amount"], o["amount_received"], o["amount_capturable"] = "succeeded", partialAuthorized, multiFinal, 0
		o["capture_method"] = "manual"
		o["latest_charge"] = c
	})
}

// multicaptureRefundEvent is refund.created for refund r as payhook
// fetches it (expand[]=charge.refunds), its charge the multicapture
// charge in the state given; without the charge's refunds when refunds
// is nil.
func multicaptureRefundEvent(t *testing.T, r map[string]any, captured bool, amountCaptured int64, refunds []map[string]any) []byte {
	_, charge := fixtureData(t, "stripe/charge.refunded.json")
	c := charge["object"].(map[string]any)
	multicaptureCharge(c, captured, amountCaptured, refunds...)
	if refunds == nil {
		delete(c, "refunds")
		c["amount_refunded"] = r["amount"]
	}
	return editFixture(t, "stripe/refund.created.json", func(o map[string]any) {
		for k, v := range r {
			o[k] = v
		}
		o["charge"] = c
	})
}

// Between its captures a multicapture charge released nothing, and says
// so by captured false (its multicapture.status says only that it may be
// captured again, and stays available after the final capture): a refund
// of exactly what the first capture left (amount − amount_captured),
// without a reason, is a refund of captured money, booked by its refund
// event. After the final capture (captured true) its release of the rest
// is left out as any partial capture's, and that refund stays booked.
func TestStripeMulticapture(t *testing.T) {
	t.Parallel()
	real := stripeRefundObj(t, "re_real", multiLeft, nil, multiRefAt)
	release := stripeRefundObj(t, "re_multi_release", multiRest, nil, multiEndAt)
	booked := billing.Refunded{PaymentRef: stripePI, RefundRef: "re_real", Amount: multiLeft, Currency: "USD", At: unixT(multiRefAt)}
	snapped := booked
	snapped.Payment = &billing.Payment{Ref: stripePI, Amount: multiFinal, Currency: "USD", CapturedAt: stripeT}
	for _, c := range []struct {
		name    string
		payload []byte
		want    []billing.Fact
	}{
		// Between the captures: captured false, amount_captured 800 of
		// 1099, the refund of 299 its only one.
		{"between the captures: refund.created fetched",
			multicaptureRefundEvent(t, real, false, multiFirst, []map[string]any{real}), []billing.Fact{booked}},
		{"between the captures: refund.created fetched, the charge's refunds not listed",
			multicaptureRefundEvent(t, real, false, multiFirst, nil), []billing.Fact{booked}},
		// The payment is booked at the final capture (payment_intent.succeeded,
		// fetched with its refunds): charge.refunded places no payment of
		// a charge not captured yet.
		{"between the captures: charge.refunded",
			multicaptureRefunded(t, false, multiFirst, real), nil},
		// After the final capture: captured true, amount_captured 1000,
		// the release of 99 made at it, the newest refund.
		{"after the final capture: charge.refunded",
			multicaptureRefunded(t, true, multiFinal, release, real), []billing.Fact{snapped}},
		{"after the final capture: payment_intent.succeeded fetched",
			multicaptureIntent(t, release, real), []billing.Fact{
				billing.Captured{Payment: billing.Payment{Ref: stripePI, OrderID: "ord_3", Amount: multiFinal, Currency: "USD", CapturedAt: stripeT}},
				billing.OrderPaid{OrderID: "ord_3", PaymentRef: stripePI, At: stripeT},
				booked,
			}},
		{"after the final capture: refund.created fetched, the release",
			multicaptureRefundEvent(t, release, true, multiFinal, []map[string]any{release, real}), nil},
		{"after the final capture: refund.created fetched, the refund",
			multicaptureRefundEvent(t, real, true, multiFinal, []map[string]any{release, real}), []billing.Fact{booked}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := mapping.Facts("stripe", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: c.payload})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Facts:\n got  %s\n want %s", show(got), show(c.want))
			}
		})
	}
}
