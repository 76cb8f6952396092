package mapping_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
)

// The money rules as the mappings read them: Charges-API payments keyed by
// their charge, orders from subscription and zero-total checkouts, zero
// captures, and values that cannot be stored or summed (malformed at once,
// never retried).
func TestMoneyRulesMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, provider, payload string
		want                    []billing.Fact
		errField                string // a malformed error naming it
		ignored                 string // in the reason for no facts
	}{
		// ---- Stripe's Charges API: "payment_intent": null ----
		{
			name: "charge.succeeded without payment intent: captured by its charge", provider: "stripe",
			payload: `{"type":"charge.succeeded","created":1772366400,"data":{"object":{"id":"ch_1","object":"charge",
				"payment_intent":null,"amount":2000,"amount_captured":2000,"currency":"usd","captured":true,
				"metadata":{"order_id":"ord_1"}}}}`,
			want: []billing.Fact{
				billing.Captured{Payment: billing.Payment{Ref: "ch_1", OrderID: "ord_1", Amount: 2000, Currency: "USD", CapturedAt: t0}},
				billing.OrderPaid{OrderID: "ord_1", PaymentRef: "ch_1", At: t0},
			},
		},
		{
			name: "charge.captured without payment intent", provider: "stripe",
			payload: `{"type":"charge.captured","created":1772366400,"data":{"object":{"id":"ch_1","payment_intent":null,
				"amount":2000,"amount_captured":1500,"currency":"eur","captured":true}}}`,
			want: []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "ch_1", Amount: 1500, Currency: "EUR", CapturedAt: t0}}},
		},
		{
			name: "charge.succeeded only authorized", provider: "stripe",
			payload: `{"type":"charge.succeeded","created":1772366400,"data":{"object":{"id":"ch_1","payment_intent":null,
				"amount":2000,"amount_captured":0,"currency":"usd","captured":false}}}`,
			ignored: "not captured yet",
		},
		{
			name: "charge.succeeded of a PaymentIntent", provider: "stripe",
			payload: `{"type":"charge.succeeded","created":1772366400,"data":{"object":{"id":"ch_1","payment_intent":"pi_1",
				"amount":2000,"currency":"usd","captured":true}}}`,
			ignored: "payment_intent.succeeded captures it",
		},
		{
			name: "charge.refunded without payment intent: the charge's refunds", provider: "stripe",
			payload: `{"type":"charge.refunded","created":1772366460,"data":{"object":{"id":"ch_1","object":"charge",
				"payment_intent":null,"amount":2000,"amount_captured":2000,"currency":"usd","created":1772366400,
				"refunds":{"object":"list","data":[{"id":"re_1","amount":500,"currency":"usd","status":"succeeded",
				"charge":"ch_1","payment_intent":null,"created":1772366450}]}}}}`,
			want: []billing.Fact{billing.Refunded{
				Payment:    &billing.Payment{Ref: "ch_1", Amount: 2000, Currency: "USD", CapturedAt: t0},
				PaymentRef: "ch_1", RefundRef: "re_1", Amount: 500, Currency: "USD", At: unixT(1772366450)}},
		},
		{
			name: "charge.refunded lists refunds of every status: those of refund.* move money", provider: "stripe",
			payload: `{"type":"charge.refunded","created":1772366460,"data":{"object":{"id":"ch_1","payment_intent":"pi_1",
				"amount":2000,"amount_captured":2000,"currency":"usd","created":1772366400,
				"refunds":{"data":[{"id":"re_1","amount":500,"currency":"usd","status":"succeeded","created":1772366450},
				{"id":"re_2","amount":700,"currency":"usd","status":"requires_action","created":1772366450},
				{"id":"re_3","amount":100,"currency":"usd","status":"pending","created":1772366450},
				{"id":"re_4","amount":300,"currency":"usd","status":"failed","created":1772366450}]}}}}`,
			want: []billing.Fact{
				billing.Refunded{Payment: &billing.Payment{Ref: "pi_1", Amount: 2000, Currency: "USD", CapturedAt: t0},
					PaymentRef: "pi_1", RefundRef: "re_1", Amount: 500, Currency: "USD", At: unixT(1772366450)},
				billing.Refunded{Payment: &billing.Payment{Ref: "pi_1", Amount: 2000, Currency: "USD", CapturedAt: t0},
					PaymentRef: "pi_1", RefundRef: "re_3", Amount: 100, Currency: "USD", At: unixT(1772366450)},
				billing.RefundFailed{PaymentRef: "pi_1", RefundRef: "re_4", At: unixT(1772366460)},
			},
		},
		{
			name: "charge.refunded listing only a refund that requires action", provider: "stripe",
			payload: `{"type":"charge.refunded","created":1772366460,"data":{"object":{"id":"ch_1","payment_intent":"pi_1",
				"amount":2000,"currency":"usd","refunds":{"data":[{"id":"re_2","amount":700,"currency":"usd","status":"requires_action"}]}}}}`,
			ignored: "no refund of the charge has succeeded or failed yet",
		},
		{
			name: "charge.refunded listing a refund of an unknown status", provider: "stripe",
			payload: `{"type":"charge.refunded","created":1772366460,"data":{"object":{"id":"ch_1","payment_intent":"pi_1",
				"amount":2000,"currency":"usd","refunds":{"data":[{"id":"re_2","amount":700,"currency":"usd","status":"lost"}]}}}}`,
			errField: "data.object.refunds.data[0].status",
		},
		{
			name: "paddle chargeback_reverse pending approval: nothing yet", provider: "paddle",
			payload: `{"event_type":"adjustment.created","occurred_at":"2026-03-01T12:00:00Z","data":{"id":"adj_r","action":"chargeback_reverse",
				"status":"pending_approval","transaction_id":"txn_1","totals":{"total":"10","currency_code":"USD"}}}`,
			ignored: "pending approval",
		},
		{
			name: "paddle chargeback_reverse of an unknown status", provider: "paddle",
			payload:  `{"event_type":"adjustment.created","data":{"id":"adj_r","action":"chargeback_reverse","status":"maybe","transaction_id":"txn_1"}}`,
			errField: "data.status",
		},
		{
			name: "paddle chargeback pending approval: nothing yet", provider: "paddle",
			payload: `{"event_type":"adjustment.created","occurred_at":"2026-03-01T12:00:00Z","data":{"id":"adj_c","action":"chargeback",
				"status":"pending_approval","transaction_id":"txn_1","totals":{"total":"10","currency_code":"USD"}}}`,
			ignored: "pending approval",
		},
		{
			name: "paddle chargeback of an unknown status", provider: "paddle",
			payload:  `{"event_type":"adjustment.created","data":{"id":"adj_c","action":"chargeback","status":"maybe","transaction_id":"txn_1"}}`,
			errField: "data.status",
		},
		{
			name: "paddle chargeback without a status", provider: "paddle",
			payload:  `{"event_type":"adjustment.created","data":{"id":"adj_c","action":"chargeback","transaction_id":"txn_1"}}`,
			errField: "data.status",
		},
		{
			name: "charge.refunded of a newer API version: the refund events count", provider: "stripe",
			payload: `{"type":"charge.refunded","created":1772366460,"data":{"object":{"id":"ch_1","payment_intent":"pi_1",
				"amount":2000,"currency":"usd","refunds":null}}}`,
			ignored: "the refund.* events count its refunds",
		},
		// ---- orders from subscription and zero-total checkouts ----
		{
			name: "subscription checkout with an order: the order is paid by the subscription", provider: "stripe",
			payload: `{"type":"checkout.session.completed","created":1772366400,"data":{"object":{"id":"cs_1",
				"object":"checkout.session","mode":"subscription","payment_intent":null,"payment_status":"paid",
				"subscription":"sub_1","invoice":"in_1","amount_total":1500,"currency":"usd","metadata":{"order_id":"ord_7"}}}}`,
			want: []billing.Fact{billing.OrderPaid{OrderID: "ord_7", PaymentRef: "sub_1", At: t0}},
		},
		{
			name: "subscription checkout without an order", provider: "stripe",
			payload: `{"type":"checkout.session.completed","created":1772366400,"data":{"object":{"id":"cs_1",
				"mode":"subscription","payment_intent":null,"payment_status":"paid","subscription":"sub_1"}}}`,
			ignored: "subscription Checkout Session without an order id",
		},
		{
			name: "checkout of zero (100% discount): the order is paid by the session", provider: "stripe",
			payload: `{"type":"checkout.session.completed","created":1772366400,"data":{"object":{"id":"cs_2",
				"mode":"payment","payment_intent":null,"payment_status":"no_payment_required","amount_total":0,
				"currency":"usd","client_reference_id":"ord_8"}}}`,
			want: []billing.Fact{billing.OrderPaid{OrderID: "ord_8", PaymentRef: "cs_2", At: t0}},
		},
		{
			name: "paddle transaction of zero: captured for nothing, the order paid", provider: "paddle",
			payload: `{"event_type":"transaction.completed","occurred_at":"2026-03-01T12:00:00Z","data":{"id":"txn_0",
				"status":"completed","currency_code":"USD","custom_data":{"order_id":"ord_9"},
				"details":{"totals":{"subtotal":"1000","discount":"1000","total":"0"}}}}`,
			want: []billing.Fact{
				billing.Captured{Payment: billing.Payment{Ref: "txn_0", OrderID: "ord_9", Amount: 0, Currency: "USD", CapturedAt: t0}},
				billing.OrderPaid{OrderID: "ord_9", PaymentRef: "txn_0", At: t0},
			},
		},
		{
			name: "paddle transaction with credit applied: the grand total is captured", provider: "paddle",
			payload: `{"event_type":"transaction.completed","occurred_at":"2026-03-01T12:00:00Z","data":{"id":"txn_2",
				"status":"completed","currency_code":"USD","details":{"totals":{"total":"5000","credit":"3000","grand_total":"2000","balance":"0"}}}}`,
			want: []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "txn_2", Amount: 2000, Currency: "USD", CapturedAt: t0}}},
		},
		{
			name: "paddle transaction with credit and no grand total: total less credit", provider: "paddle",
			payload: `{"event_type":"transaction.completed","occurred_at":"2026-03-01T12:00:00Z","data":{"id":"txn_3",
				"status":"completed","currency_code":"USD","details":{"totals":{"total":"5000","credit":"3000"}}}}`,
			want: []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "txn_3", Amount: 2000, Currency: "USD", CapturedAt: t0}}},
		},
		{
			name: "paddle transaction with a credit above its total", provider: "paddle",
			payload:  `{"event_type":"transaction.completed","data":{"id":"txn_4","currency_code":"USD","details":{"totals":{"total":"1000","credit":"3000"}}}}`,
			errField: "data.details.totals.credit",
		},
		// ---- subscriptions not paid for: no access ----
		{
			name: "stripe incomplete subscription: incomplete", provider: "stripe",
			payload: `{"id":"evt_1","type":"customer.subscription.created","created":1772366400,
				"data":{"object":{"id":"sub_1","customer":"cus_1","status":"incomplete","plan":{"id":"pro"},"current_period_end":1775000000}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "incomplete",
				CurrentPeriodEnd: unixT(1775000000), UpdatedAt: t0}},
		},
		{
			name: "stripe unpaid subscription: unpaid", provider: "stripe",
			payload: `{"id":"evt_1","type":"customer.subscription.updated","created":1772366400,
				"data":{"object":{"id":"sub_1","customer":"cus_1","status":"unpaid","plan":{"id":"pro"},"current_period_end":1775000000}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "unpaid",
				CurrentPeriodEnd: unixT(1775000000), UpdatedAt: t0}},
		},
		{
			name: "stripe paused subscription: paused", provider: "stripe",
			payload: `{"id":"evt_1","type":"customer.subscription.updated","created":1772366400,
				"data":{"object":{"id":"sub_1","customer":"cus_1","status":"paused","plan":{"id":"pro"},"current_period_end":1775000000}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "paused",
				CurrentPeriodEnd: unixT(1775000000), UpdatedAt: t0}},
		},
		// ---- references that cannot be stored ----
		{
			name: "payment id with NUL", provider: "stripe",
			payload:  `{"type":"payment_intent.succeeded","data":{"object":{"id":"pi_x\u0000y","amount":1,"currency":"usd"}}}`,
			errField: "payment ref",
		},
		{
			name: "order id with U+202E", provider: "stripe",
			payload:  `{"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":1,"currency":"usd","metadata":{"order_id":"ord\u202e1"}}}}`,
			errField: "order id",
		},
		{
			name: "refund id with a control character", provider: "stripe",
			payload:  `{"type":"refund.created","data":{"object":{"id":"re\u0007","payment_intent":"pi_1","amount":1,"currency":"usd","status":"succeeded"}}}`,
			errField: "refund ref",
		},
		{
			name: "dispute id with NUL", provider: "stripe",
			payload:  `{"type":"charge.dispute.created","data":{"object":{"id":"dp\u0000","payment_intent":"pi_1","status":"needs_response"}}}`,
			errField: "dispute ref",
		},
		{
			name: "subscription id with NUL", provider: "paddle",
			payload:  `{"event_type":"subscription.created","data":{"id":"sub\u0000","customer_id":"ctm_1","status":"active"}}`,
			errField: "subscription ref",
		},
		{
			name: "customer with a line separator", provider: "billete",
			payload:  `{"type":"subscription.created","data":{"id":"sub_1","customer":"cus\u20281","status":"active"}}`,
			errField: "customer",
		},
		{
			name: "transaction id with NUL", provider: "paddle",
			payload:  `{"event_type":"transaction.completed","data":{"id":"txn\u0000","currency_code":"USD","details":{"totals":{"total":"1"}}}}`,
			errField: "payment ref",
		},
		{
			name: "chain reference with NUL", provider: "crypto",
			payload:  `{"type":"InvoiceSettled","invoiceId":"inv_1","chainRef":"tx\u0000","amount":1,"currency":"BTC"}`,
			errField: "chain ref",
		},
		// ---- amounts ----
		{
			name: "-0 (JSON)", provider: "stripe",
			payload:  `{"type":"refund.created","data":{"object":{"id":"re_1","payment_intent":"pi_1","amount":-0,"currency":"usd","status":"succeeded"}}}`,
			errField: "data.object.amount",
		},
		{
			name: "-0 (Paddle string)", provider: "paddle",
			payload:  `{"event_type":"adjustment.created","data":{"id":"adj_1","action":"refund","status":"approved","transaction_id":"txn_1","currency_code":"USD","totals":{"total":"-0"}}}`,
			errField: "data.totals.total",
		},
		{
			name: "+5 (Paddle string)", provider: "paddle",
			payload:  `{"event_type":"transaction.completed","data":{"id":"txn_1","currency_code":"USD","details":{"totals":{"total":"+5"}}}}`,
			errField: "data.details.totals.total",
		},
		{
			name: "amount beyond 10^15", provider: "stripe",
			payload:  `{"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":1000000000000001,"currency":"usd"}}}`,
			errField: "data.object.amount",
		},
		{
			name: "amount near int64", provider: "billete",
			payload:  `{"type":"payment.succeeded","data":{"id":"pay_1","amount":9223372036854775807,"currency":"usd"}}`,
			errField: "data.amount",
		},
		{
			name: "amount 10^15 passes", provider: "billete",
			payload: `{"type":"payment.succeeded","created_at":"2026-03-01T12:00:00Z","data":{"id":"pay_1","amount":1000000000000000,"currency":"usd"}}`,
			want:    []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "pay_1", Amount: payhook.MaxAmount, Currency: "USD", CapturedAt: t0}}},
		},
		// ---- times ----
		{
			name: "envelope time out of range", provider: "stripe",
			payload:  `{"type":"payment_intent.succeeded","created":10000000000000,"data":{"object":{"id":"pi_1","amount":1,"currency":"usd"}}}`,
			errField: `"created"`,
		},
		{
			name: "milliseconds where seconds belong", provider: "stripe",
			payload:  `{"type":"customer.subscription.updated","created":1772366400,"data":{"object":{"id":"sub_1","status":"active","current_period_end":1774958400000}}}`,
			errField: "current_period_end",
		},
		{
			name: "RFC 3339 time past 2200", provider: "paddle",
			payload:  `{"event_type":"subscription.updated","data":{"id":"sub_1","status":"active","updated_at":"3000-01-01T00:00:00Z"}}`,
			errField: "data.updated_at",
		},
		{
			name: "fetched updated_at_ns out of range", provider: "stripe",
			payload:  `{"type":"customer.subscription.updated","created":1772366400,"data":{"object":{"id":"sub_1","status":"active","updated_at_ns":1}}}`,
			errField: "updated_at_ns",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := mapping.Read(c.provider, &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: []byte(c.payload)})
			switch {
			case c.errField != "":
				if !errors.Is(err, payhook.ErrMalformed) || !strings.Contains(err.Error(), c.errField) || r.Facts != nil {
					t.Fatalf("Read = %s, %v; want ErrMalformed naming %s", show(r.Facts), err, c.errField)
				}
			case err != nil:
				t.Fatal(err)
			case c.want == nil:
				if r.Facts != nil || !strings.Contains(r.Ignored, c.ignored) {
					t.Fatalf("Read = %s ignored %q; want ignored saying %q", show(r.Facts), r.Ignored, c.ignored)
				}
			case !reflect.DeepEqual(r.Facts, c.want):
				t.Fatalf("\n got  %s\n want %s", show(r.Facts), show(c.want))
			}
		})
	}
}

// The money rules on the providers' own payload shapes (testdata/, see
// its README): the Charges API, subscription and zero-total checkouts,
// dispute amounts, Paddle's chargebacks and their reversal, the
// providers' end times.
func TestMoneyRulesOnProviderFixtures(t *testing.T) {
	t.Parallel()
	const (
		session     = "cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY"
		paddleCB    = "adj_01hvgf2s84dr6reszzg29zbvcm"
		paddleCBRev = "adj_01hvgh7c5w2e8kq9r6t3y1u4i0"
	)
	runFixtureCases(t, []fixtureCase{
		{file: "stripe/charge.succeeded.charges_api.json", want: []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: stripeCharge, Amount: 100, Currency: "USD", CapturedAt: stripeT}},
		}},
		{file: "stripe/charge.refunded.charges_api.json", want: []billing.Fact{
			billing.Refunded{Payment: &billing.Payment{Ref: stripeCharge, Amount: 100, Currency: "USD", CapturedAt: stripeT},
				PaymentRef: stripeCharge, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: stripeT},
		}},
		{file: "stripe/refund.created.charges_api.json", want: []billing.Fact{
			billing.Refunded{PaymentRef: stripeCharge, RefundRef: stripeRefund, Amount: 100, Currency: "USD", At: stripeT},
		}},
		{file: "stripe/charge.dispute.created.json", want: []billing.Fact{
			billing.ChargedBack{PaymentRef: stripePI, DisputeRef: stripeDispute, Amount: 1000, At: stripeT},
		}},
		{file: "stripe/charge.dispute.funds_withdrawn.charges_api.json", want: []billing.Fact{
			billing.ChargedBack{PaymentRef: stripeCharge, DisputeRef: stripeDispute, Amount: 1000, At: stripeT},
		}},
		{file: "stripe/checkout.session.completed.subscription.json", want: []billing.Fact{
			billing.OrderPaid{OrderID: "ord_2", PaymentRef: stripeSub, At: stripeT},
		}},
		{file: "stripe/checkout.session.completed.no_payment_required.json", want: []billing.Fact{
			billing.OrderPaid{OrderID: "ord_4", PaymentRef: session, At: stripeT},
		}},
		{file: "stripe/customer.subscription.deleted.json", want: []billing.Fact{
			billing.Subscription{Ref: stripeSub, Customer: stripeCus, Plan: stripePrice, Status: "ended",
				CurrentPeriodEnd: unixT(976287773), UpdatedAt: stripeT, EndedAt: stripeT},
		}},
		{file: "paddle/adjustment.created.chargeback.json", want: []billing.Fact{
			billing.ChargedBack{PaymentRef: paddleTxn, DisputeRef: paddleCB, Amount: 100, At: rfc(t, "2024-04-15T08:48:20.239695Z")},
		}},
		{file: "paddle/adjustment.created.chargeback_reverse.json", want: []billing.Fact{
			billing.ChargebackWon{PaymentRef: paddleTxn, ReversalRef: paddleCBRev, Amount: 100, At: rfc(t, "2024-05-15T08:48:20.239695Z")},
		}},
		{file: "paddle/adjustment.created.chargeback_warning.json"},
		{file: "paddle/adjustment.created.credit.json"},
		{file: "paddle/adjustment.created.credit_reverse.json"},
		{file: "paddle/subscription.canceled.json", want: []billing.Fact{
			billing.Subscription{Ref: "sub_01hv8x29kz0t586xy6zn1a62ny", Customer: paddleSubCust, Plan: paddlePrice, Status: "ended",
				UpdatedAt: rfc(t, "2024-04-12T11:24:54.873Z"), EndedAt: rfc(t, "2024-04-12T11:24:54.868Z")},
		}},
	})
}
