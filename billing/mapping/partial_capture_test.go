package mapping_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store/storetest"
)

// A partial capture: the fixtures' charge of 1099 (authorized) captured
// for 800 (Charges API capture amount, PaymentIntents amount_to_capture).
// Stripe refunds the other 299 itself, by a refund it makes at the
// capture: the charge says amount 1099, amount_captured 800 and counts
// that refund in amount_refunded (woocommerce-gateway-stripe's
// charge.captured handler reads amount − amount_refunded as what was
// captured; solidus_stripe's RefundsSynchronizer lists it among the
// payment intent's refunds). Stripe documents no reason for it: null (or
// expired_uncaptured_charge) is what its Refund.reason allows.
const (
	partialAuthorized = 1099
	partialCaptured   = 800
	partialReleased   = partialAuthorized - partialCaptured
	releaseRef        = "re_release"
	releaseAt         = 1234567890 // the capture's time: the fixtures' created
)

// stripeRefundObj is the fixtures' refund (stripe-openapi's, of the
// payment intent) with id, amount, reason (nil: null) and created set.
func stripeRefundObj(t *testing.T, id string, amount int64, reason any, created int64) map[string]any {
	t.Helper()
	_, d := fixtureData(t, "stripe/refund.created.json")
	r := d["object"].(map[string]any)
	r["id"], r["amount"], r["reason"], r["created"] = id, amount, reason, created
	return r
}

// partialCharge edits a charge of a fixture into the partial capture,
// its refunds (newest first, as Stripe lists them) summed in
// amount_refunded.
func partialCharge(c map[string]any, refunds ...map[string]any) {
	c["amount"], c["amount_captured"], c["captured"] = partialAuthorized, partialCaptured, true
	var sum int64
	data := make([]any, len(refunds))
	for i, r := range refunds {
		sum += r["amount"].(int64)
		data[i] = r
	}
	c["amount_refunded"], c["refunded"] = sum, false
	c["refunds"] = map[string]any{"object": "list", "data": data, "has_more": false, "total_count": len(data),
		"url": "/v1/charges/" + stripeCharge + "/refunds"}
}

// partialChargeRefunded is charge.refunded for the partial capture.
func partialChargeRefunded(t *testing.T, refunds ...map[string]any) []byte {
	return editFixture(t, "stripe/charge.refunded.json", func(o map[string]any) { partialCharge(o, refunds...) })
}

// partialChargeRefundedCut is charge.refunded for the partial capture as
// Stripe delivers a charge with more refunds than it embeds: the newest
// listed (listed), has_more, and amount_refunded counting every refund,
// the release (the oldest: made at the capture) among those not listed.
func partialChargeRefundedCut(t *testing.T, listed ...map[string]any) []byte {
	return editFixture(t, "stripe/charge.refunded.json", func(o map[string]any) {
		partialCharge(o, listed...)
		o["amount_refunded"] = o["amount_refunded"].(int64) + partialReleased
		o["refunds"].(map[string]any)["has_more"] = true
	})
}

// partialIntentSucceeded is the payment intent of the partial capture as
// payhook fetches it (expand[]=latest_charge.refunds).
func partialIntentSucceeded(t *testing.T, refunds ...map[string]any) []byte {
	_, charge := fixtureData(t, "stripe/charge.refunded.json")
	c := charge["object"].(map[string]any)
	partialCharge(c, refunds...)
	return editFixture(t, "stripe/payment_intent.succeeded.json", func(o map[string]any) {
		o["amount"], o["amount_received"], o["amount_capturable"] = partialAuthorized, partialCaptured, 0
		o["capture_method"] = "manual"
		o["latest_charge"] = c
	})
}

// partialRefundEvent is refund.created for refund r as payhook fetches it
// (expand[]=charge.refunds): its charge, the partial capture, expanded
// with its refunds; without them when refunds is nil.
func partialRefundEvent(t *testing.T, r map[string]any, refunds []map[string]any) []byte {
	_, charge := fixtureData(t, "stripe/charge.refunded.json")
	c := charge["object"].(map[string]any)
	partialCharge(c, refunds...)
	if refunds == nil {
		delete(c, "refunds")
		c["amount_refunded"] = int64(partialReleased)
	}
	return editFixture(t, "stripe/refund.created.json", func(o map[string]any) {
		for k, v := range r {
			o[k] = v
		}
		o["charge"] = c
	})
}

func TestStripePartialCaptureRelease(t *testing.T) {
	t.Parallel()
	release := stripeRefundObj(t, releaseRef, partialReleased, nil, releaseAt)
	expired := stripeRefundObj(t, releaseRef, partialReleased, "expired_uncaptured_charge", releaseAt)
	real100 := stripeRefundObj(t, stripeRefund, 100, nil, releaseAt+3600)
	// A real refund of exactly what the capture left, made later.
	realSame := stripeRefundObj(t, stripeRefund, partialReleased, nil, releaseAt+3600)
	asked := stripeRefundObj(t, stripeRefund, partialReleased, "requested_by_customer", releaseAt)
	snap := &billing.Payment{Ref: stripePI, Amount: partialCaptured, Currency: "USD", CapturedAt: stripeT}
	refunded := func(amount int64, at int64) billing.Fact {
		return billing.Refunded{Payment: snap, PaymentRef: stripePI, RefundRef: stripeRefund, Amount: amount, Currency: "USD", At: unixT(at)}
	}
	captured := billing.Captured{Payment: billing.Payment{Ref: stripePI, OrderID: "ord_3", Amount: partialCaptured, Currency: "USD", CapturedAt: stripeT}}
	for _, c := range []struct {
		name    string
		payload []byte
		want    []billing.Fact
	}{
		{"charge.refunded, the release alone", partialChargeRefunded(t, release), nil},
		{"charge.refunded, a refund of captured money after the release",
			partialChargeRefunded(t, real100, release), []billing.Fact{refunded(100, releaseAt+3600)}},
		{"charge.refunded, a later refund of the release's amount",
			partialChargeRefunded(t, realSame, release), []billing.Fact{refunded(partialReleased, releaseAt+3600)}},
		{"charge.refunded, listed oldest first", partialChargeRefunded(t, release, realSame),
			[]billing.Fact{refunded(partialReleased, releaseAt+3600)}},
		{"charge.refunded, the release as expired_uncaptured_charge and a refund of its amount",
			partialChargeRefunded(t, realSame, expired), []billing.Fact{refunded(partialReleased, releaseAt+3600)}},
		// The release is the oldest refund: a list cut short (has_more) by
		// the newest does not have it, and a refund of its amount listed
		// is one of captured money.
		{"charge.refunded cut short, a later refund of the release's amount listed, the release not",
			partialChargeRefundedCut(t, realSame), []billing.Fact{refunded(partialReleased, releaseAt+3600)}},
		{"charge.refunded cut short, two refunds listed, the release not",
			partialChargeRefundedCut(t, stripeRefundObj(t, "re_later", 100, nil, releaseAt+7200), realSame),
			[]billing.Fact{billing.Refunded{Payment: snap, PaymentRef: stripePI, RefundRef: "re_later", Amount: 100, Currency: "USD", At: unixT(releaseAt + 7200)},
				refunded(partialReleased, releaseAt+3600)}},
		{"charge.refunded, a refund with a reason given is never the release",
			partialChargeRefunded(t, asked), []billing.Fact{refunded(partialReleased, releaseAt)}},
		{"payment_intent.succeeded fetched, the release listed", partialIntentSucceeded(t, release),
			[]billing.Fact{captured, billing.OrderPaid{OrderID: "ord_3", PaymentRef: stripePI, At: stripeT}}},
		{"payment_intent.succeeded fetched, the release and a refund listed", partialIntentSucceeded(t, real100, release),
			[]billing.Fact{captured, billing.OrderPaid{OrderID: "ord_3", PaymentRef: stripePI, At: stripeT},
				billing.Refunded{PaymentRef: stripePI, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: unixT(releaseAt + 3600)}}},
		{"refund.created fetched, the release", partialRefundEvent(t, release, []map[string]any{real100, release}), nil},
		{"refund.created fetched, a refund of captured money", partialRefundEvent(t, real100, []map[string]any{real100, release}),
			[]billing.Fact{billing.Refunded{PaymentRef: stripePI, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: unixT(releaseAt + 3600)}}},
		{"refund.created fetched, a later refund of the release's amount", partialRefundEvent(t, realSame, []map[string]any{realSame, release}),
			[]billing.Fact{billing.Refunded{PaymentRef: stripePI, RefundRef: stripeRefund, Amount: partialReleased, Currency: "USD", At: unixT(releaseAt + 3600)}}},
		{"refund.created fetched, the charge's refunds not listed, the release only counted",
			partialRefundEvent(t, release, nil), nil},
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

// TestStripePartialCaptureReleaseApply: on both engines, a payment
// captured in part, told by every event Stripe may send about it (in
// either order: the release's own refund event first, or the payment's),
// stays captured at what was captured with nothing refunded; a later
// refund of part of it is booked once.
func TestStripePartialCaptureReleaseApply(t *testing.T) {
	t.Parallel()
	release := stripeRefundObj(t, releaseRef, partialReleased, nil, releaseAt)
	real100 := stripeRefundObj(t, stripeRefund, 100, nil, releaseAt+3600)
	intent := partialIntentSucceeded(t, release)
	releaseRefunded := partialChargeRefunded(t, release)
	releaseCreated := partialRefundEvent(t, release, []map[string]any{release})
	stories := map[string][][]byte{
		"payment first": {intent, releaseRefunded, releaseCreated},
		"release first": {releaseRefunded, releaseCreated, intent},
	}
	for name, released := range stories {
		t.Run(name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := storetest.Migrated(t, dbURL)
				apply := func(payloads ...[]byte) {
					t.Helper()
					for i, payload := range payloads {
						facts, err := mapping.Facts("stripe", &payhook.Event{EventID: "evt_" + string(rune('a'+i)), OccurredAt: occurred, Payload: payload})
						if err != nil {
							t.Fatal(err)
						}
						tx, err := billing.Begin(ctx, db, occurred)
						if err != nil {
							t.Fatal(err)
						}
						if err := billing.Apply(ctx, tx, "src", facts); err != nil {
							tx.Rollback()
							t.Fatalf("apply %s: %v", show(facts), err)
						}
						if err := tx.Commit(); err != nil {
							t.Fatal(err)
						}
					}
				}
				want := func(payment string, receivable int64) {
					t.Helper()
					st := readFixtureState(ctx, t, db)
					if got := st.Payments[stripePI]; got != payment {
						t.Errorf("payment %s: %q, want %q", stripePI, got, payment)
					}
					if got := st.Receivable["USD"]; got != receivable {
						t.Errorf("receivable %d, want %d", got, receivable)
					}
				}
				apply(released...)
				want("800 USD refunded 0 succeeded", partialCaptured)
				// A refund of 100 of what was captured, by its events, twice.
				later := [][]byte{
					partialChargeRefunded(t, real100, release),
					partialRefundEvent(t, real100, []map[string]any{real100, release}),
					partialIntentSucceeded(t, real100, release),
				}
				apply(later...)
				apply(append(released, later...)...)
				want("800 USD refunded 100 partially_refunded", partialCaptured-100)
			})
		})
	}
}
