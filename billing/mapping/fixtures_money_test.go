package mapping_test

import (
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
)

// The money rules of issue 7 on the providers' own shapes: payments of
// the Charges API (payment_intent null) keyed by their charge, the
// disputed amount of a dispute, orders of subscription and zero-total
// checkouts, Paddle's chargeback adjustments, the provider's end time.
func TestFactsOnProviderFixturesMoneyRules(t *testing.T) {
	t.Parallel()
	chargeSnap := &billing.Payment{Ref: stripeCharge, Amount: 100, Currency: "USD", CapturedAt: stripeT}
	runFixtureCases(t, []fixtureCase{
		// ---- Stripe ----
		{file: "stripe/charge.succeeded.charges_api.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: stripeCharge, Amount: 100, Currency: "USD", CapturedAt: stripeT}},
		}},
		{file: "stripe/charge.refunded.charges_api.json", want: []billing.Fact{
			billing.Refunded{Payment: chargeSnap, PaymentRef: stripeCharge, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: stripeT},
		}},
		{file: "stripe/refund.created.charges_api.json", want: []billing.Fact{
			billing.Refunded{PaymentRef: stripeCharge, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: stripeT},
		}},
		// The fixture's dispute is of 1000, not of the payment.
		{file: "stripe/charge.dispute.created.json", want: []billing.Fact{
			billing.ChargedBack{PaymentRef: stripePI, DisputeRef: stripeDispute, Amount: 1000, At: stripeT},
		}},
		{file: "stripe/charge.dispute.funds_withdrawn.charges_api.json", want: []billing.Fact{
			billing.ChargedBack{PaymentRef: stripeCharge, DisputeRef: stripeDispute, Amount: 1000, At: stripeT},
		}},
		// No one-off payment: the order is paid by the subscription.
		{file: "stripe/checkout.session.completed.subscription.json", want: []billing.Fact{
			billing.OrderPaid{OrderID: "ord_2", PaymentRef: stripeSub, At: stripeT},
		}},
		// A total of zero has no payment at all: the session pays the order.
		{file: "stripe/checkout.session.completed.no_payment_required.json", want: []billing.Fact{
			billing.OrderPaid{OrderID: "ord_4", PaymentRef: "cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY", At: stripeT},
		}},
		{file: "stripe/customer.subscription.deleted.json", want: []billing.Fact{
			billing.Subscription{Ref: stripeSub, Customer: stripeCus, Plan: stripePrice, Status: "ended",
				CurrentPeriodEnd: unixT(976287773), UpdatedAt: stripeT, EndedAt: stripeT},
		}},

		// ---- Paddle ----
		// Paddle has no ended_at: a canceled subscription ended at canceled_at.
		{file: "paddle/subscription.canceled.json", want: []billing.Fact{
			billing.Subscription{Ref: "sub_01hv8x29kz0t586xy6zn1a62ny", Customer: paddleSubCust, Plan: paddlePrice, Status: "ended",
				UpdatedAt: rfc(t, "2024-04-12T11:24:54.873Z"), EndedAt: rfc(t, "2024-04-12T11:24:54.868Z")},
		}},
		{file: "paddle/adjustment.created.chargeback.json", want: []billing.Fact{
			billing.ChargedBack{PaymentRef: paddleTxn, DisputeRef: paddleAdj, Amount: 100, At: rfc(t, "2024-04-15T08:48:20.239695Z")},
		}},
		// A won dispute is a new adjustment, whose id is not the chargeback's.
		{file: "paddle/adjustment.created.chargeback_reverse.json", want: []billing.Fact{
			billing.ChargebackWon{PaymentRef: paddleTxn, ReversalRef: "adj_01hvgh7c5w2e8kq9r6t3y1u4i0", Amount: 100, At: rfc(t, "2024-05-15T08:48:20.239695Z")},
		}},
		{file: "paddle/adjustment.created.chargeback_warning.json"},
		{file: "paddle/adjustment.created.credit.json"},
		{file: "paddle/adjustment.created.credit_reverse.json"},
	})
}

// An ignored real shape says why, in its own terms, not only that its
// type changes nothing.
func TestProviderFixturesIgnoredReasons(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, reason string }{
		{"stripe/checkout.session.completed.json", "unpaid"},
		{"stripe/charge.succeeded.json", "payment_intent.succeeded"},
		{"stripe/charge.refunded.without_refunds.json", "refund.*"},
		{"stripe/charge.dispute.created.inquiry.json", "warning_needs_response"},
		{"stripe/charge.dispute.created.prevented.json", "prevented"},
		{"stripe/charge.dispute.closed.lost.json", "lost"},
		{"stripe/invoice.paid.json", "invoice"},
		{"paddle/adjustment.created.json", "pending approval"},
		{"paddle/adjustment.created.chargeback_warning.json", "warning"},
		{"paddle/adjustment.created.credit.json", "credit"},
		{"paddle/adjustment.created.credit_reverse.json", "credit_reverse"},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			provider, payload := readFixture(t, c.file)
			r, err := mapping.Read(provider, &payhook.Event{EventID: "evt_fixture", OccurredAt: occurred, Payload: payload})
			if err != nil || r.Facts != nil {
				t.Fatalf("Read = %s, %v; want ignored", show(r.Facts), err)
			}
			if !strings.Contains(r.Ignored, c.reason) || strings.HasSuffix(r.Ignored, "events change no billing state") {
				t.Errorf("Read ignored %q; want a reason naming %q", r.Ignored, c.reason)
			}
		})
	}
}
