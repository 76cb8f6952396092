package mapping_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
)

// fixtureCase is a payload shape taken from a provider's own SDK or
// published fixtures (testdata/README.md says where each comes from) and
// the facts payhook must read from it.
type fixtureCase struct {
	// file is under testdata/; its first directory is the provider.
	file string
	want []billing.Fact
	// errField, if set, means an error wrapping payhook.ErrMalformed
	// that names this field.
	errField string
}

// Stripe's fixtures carry created 1234567890 on every object and event.
var stripeT = unixT(1234567890)

const (
	stripePI      = "pi_1PgafyB7WZ01zgkWSjxsAJo3"
	stripeCharge  = "ch_1PgafuB7WZ01zgkWXYmPNZs8"
	stripeRefund  = "re_1Pgc72B7WZ01zgkWqPvrRrPE"
	stripeDispute = "dp_1Pgc71B7WZ01zgkWMevJiAUx"
	stripeSub     = "sub_1Pgc6rB7WZ01zgkWNy0Cn5nw"
	stripeCus     = "cus_QXg1o8vcGmoR32"
	stripePrice   = "price_1PgafmB7WZ01zgkW6dKueIc5"

	paddleTxn     = "txn_01hvcc93znj3mpqt1tenkjb04y"
	paddleAdj     = "adj_01hvgf2s84dr6reszzg29zbvcm"
	paddleSubCust = "ctm_01hv6y1jedq4p1n0yqn5ba3ky4"
	paddlePrice   = "pri_01gsz8x8sawmvhz1pv30nge1ke"
)

// rfc parses an RFC 3339 time of a fixture.
func rfc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

// fixtureCases are the shapes whose mapping is settled.
func fixtureCases(t *testing.T) []fixtureCase {
	stripeSnap := &billing.Payment{Ref: stripePI, Amount: 1099, Currency: "USD", CapturedAt: stripeT}
	return []fixtureCase{
		// ---- Stripe (stripe/openapi fixtures3.json objects in its event envelope) ----
		{file: "stripe/checkout.session.completed.json"}, // unpaid: the async payment has not paid yet
		{file: "stripe/checkout.session.completed.paid.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: stripePI, OrderID: "ord_1", Amount: 1099, Currency: "USD", CapturedAt: stripeT}},
			billing.OrderPaid{OrderID: "ord_1", PaymentRef: stripePI, At: stripeT},
		}},
		{file: "stripe/payment_intent.succeeded.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: stripePI, OrderID: "ord_3", Amount: 1099, Currency: "USD", CapturedAt: stripeT}},
			billing.OrderPaid{OrderID: "ord_3", PaymentRef: stripePI, At: stripeT},
		}},
		// A charge of a PaymentIntent: payment_intent.succeeded tells it, the
		// charge must not place a second payment.
		{file: "stripe/charge.succeeded.json"},
		{file: "stripe/charge.refunded.json", want: []billing.Fact{
			billing.Refunded{Payment: stripeSnap, PaymentRef: stripePI, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: stripeT},
		}},
		{file: "stripe/charge.refunded.without_refunds.json"}, // API versions from 2022-11-15: refund.* tell it
		{file: "stripe/refund.created.json", want: []billing.Fact{
			billing.Refunded{PaymentRef: stripePI, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: stripeT},
		}},
		{file: "stripe/refund.failed.json", want: []billing.Fact{
			billing.RefundFailed{PaymentRef: stripePI, RefundRef: stripeRefund, At: stripeT},
		}},
		{file: "stripe/charge.dispute.created.inquiry.json"}, // warning_needs_response: no money moves
		// prevented (blocked, or resolved by a refund that refund.* report)
		// before it became a chargeback: no money moves with the dispute.
		{file: "stripe/charge.dispute.created.prevented.json"},
		{file: "stripe/charge.dispute.closed.won.json", want: []billing.Fact{
			billing.ChargebackWon{PaymentRef: stripePI, DisputeRef: stripeDispute, At: stripeT},
		}},
		{file: "stripe/charge.dispute.closed.lost.json"},
		// current_period_end only on the items (API versions from 2025-03-31),
		// no top-level plan: the first item's price.
		{file: "stripe/customer.subscription.created.json", want: []billing.Fact{
			billing.Subscription{Ref: stripeSub, Customer: stripeCus, Plan: stripePrice, Status: "active",
				CurrentPeriodEnd: unixT(976287773), UpdatedAt: stripeT},
		}},
		{file: "stripe/customer.subscription.updated.cancel_at_period_end.json", want: []billing.Fact{
			billing.Subscription{Ref: stripeSub, Customer: stripeCus, Plan: stripePrice, Status: "canceled",
				CurrentPeriodEnd: unixT(976287773), UpdatedAt: stripeT},
		}},
		{file: "stripe/invoice.paid.json"},

		// ---- Paddle (paddle-go-sdk testdata/events.json, paddle-python-sdk notification fixtures) ----
		{file: "paddle/transaction.completed.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: "txn_01hywqfe6yxhxcsfb4ays8mqt3", Amount: 950, Currency: "GBP",
				CapturedAt: rfc(t, "2024-05-27T09:53:02.174288Z")}},
		}},
		// The same transaction with 300 of it paid from the customer's
		// credit balance: the capture is the 650 the customer paid.
		{file: "paddle/transaction.completed.credit.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: "txn_01hywqfe6yxhxcsfb4ays8mqt3", Amount: 650, Currency: "GBP",
				CapturedAt: rfc(t, "2024-05-27T09:53:02.174288Z")}},
		}},
		// A real completed transaction of total "0" (a 100% discount): a
		// capture of zero; what it posts is billing's rule.
		{file: "paddle/transaction.completed.zero_total.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: "txn_01hywqfervkjg6hkk035wy24gt", Amount: 0, Currency: "GBP",
				CapturedAt: rfc(t, "2024-05-27T09:53:02.747946Z")}},
		}},
		{file: "paddle/transaction.updated.zero_total.json"},
		{file: "paddle/transaction.paid.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: "txn_01hv8wptq8987qeep44cyrewp9", OrderID: "ord_p1", Amount: 65215, Currency: "USD",
				CapturedAt: rfc(t, "2024-04-12T10:18:48.294633Z")}},
			billing.OrderPaid{OrderID: "ord_p1", PaymentRef: "txn_01hv8wptq8987qeep44cyrewp9", At: rfc(t, "2024-04-12T10:18:48.294633Z")},
		}},
		{file: "paddle/subscription.created.json", want: []billing.Fact{
			billing.Subscription{Ref: "sub_01hv9770y40xzc823155s0z4zz", Customer: "ctm_01hv976dcgq4wmyrp8yq7asfmj", Plan: paddlePrice,
				Status: "active", CurrentPeriodEnd: rfc(t, "2024-05-12T13:16:08.821891Z"), UpdatedAt: rfc(t, "2024-04-12T13:16:09.54Z")},
		}},
		{file: "paddle/subscription.updated.json", want: []billing.Fact{
			billing.Subscription{Ref: "sub_01hv8x29kz0t586xy6zn1a62ny", Customer: paddleSubCust, Plan: paddlePrice,
				Status: "active", CurrentPeriodEnd: rfc(t, "2024-05-12T10:37:59.556997Z"), UpdatedAt: rfc(t, "2024-04-12T10:49:38.771Z")},
		}},
		{file: "paddle/subscription.updated.scheduled_cancel.json", want: []billing.Fact{
			billing.Subscription{Ref: "sub_01hv8x29kz0t586xy6zn1a62ny", Customer: paddleSubCust, Plan: paddlePrice,
				Status: "canceled", CurrentPeriodEnd: rfc(t, "2024-05-12T10:37:59.556997Z"), UpdatedAt: rfc(t, "2024-04-12T10:49:38.771Z")},
		}},
		{file: "paddle/adjustment.created.json"}, // a refund pending_approval
		{file: "paddle/adjustment.updated.approved.json", want: []billing.Fact{
			billing.Refunded{PaymentRef: paddleTxn, RefundRef: paddleAdj, Amount: 100, Currency: "USD", At: rfc(t, "2024-04-15T08:48:20.239695Z")},
		}},
		{file: "paddle/adjustment.updated.rejected.json", want: []billing.Fact{
			billing.RefundFailed{PaymentRef: paddleTxn, RefundRef: paddleAdj, At: rfc(t, "2024-04-15T08:54:10.646377Z")},
		}},
	}
}

// readFixture returns the payload of testdata/file and its provider.
func readFixture(t testing.TB, file string) (provider string, payload []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(file, "/", 2)[0], b
}

// runFixtureCases maps each case's fixture and compares the facts.
func runFixtureCases(t *testing.T, cases []fixtureCase) {
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			provider, payload := readFixture(t, c.file)
			got, err := mapping.Facts(provider, &payhook.Event{EventID: "evt_fixture", OccurredAt: occurred, Payload: payload})
			if c.errField != "" {
				if !errors.Is(err, payhook.ErrMalformed) || !strings.Contains(err.Error(), c.errField) {
					t.Fatalf("Facts = %s, %v; want malformed naming %s", show(got), err, c.errField)
				}
				return
			}
			if err != nil {
				t.Fatalf("Facts: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Facts:\n got  %s\n want %s", show(got), show(c.want))
			}
		})
	}
}

// The providers' own payload shapes, not only the simulator's.
func TestFactsOnProviderFixtures(t *testing.T) {
	t.Parallel()
	runFixtureCases(t, fixtureCases(t))
}
