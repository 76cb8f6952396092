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

var (
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// occurred is Event.OccurredAt in these cases: the fallback time.
	occurred = time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC)
)

func unixT(s int64) time.Time { return time.Unix(s, 0).UTC() }

// Hand-written payloads: the real providers' shapes where they differ from
// the simulator's, the edges of each mapping, and what is rejected.
func TestFactsShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		provider string
		payload  string
		want     []billing.Fact
		// errField, if set, means an error wrapping payhook.ErrMalformed
		// that names this field.
		errField string
		// ignored, if set, is in the reason Read gives for no facts.
		ignored string
	}{
		// ---- ignored: nil facts ----
		{name: "standard knows no vocabulary", provider: "standard", payload: `{"type":"payment.succeeded"}`},
		{name: "hmac knows no vocabulary", provider: "hmac", payload: `not even JSON`},
		{name: "billete unknown type", provider: "billete", payload: `{"type":"customer.created","data":{"id":"cus_1"}}`},
		{name: "billete test event", provider: "billete", payload: `{"type":"webhook_endpoint.test","data":{"endpoint_id":"we_1"}}`},
		{name: "stripe unknown type", provider: "stripe", payload: `{"type":"customer.created","created":1772366400,"data":{"object":{"id":"cus_1"}}}`,
			ignored: "customer.created events change no billing state"},
		{name: "stripe ping", provider: "stripe", payload: `{"type":"ping","data":{"object":{"object":"webhook_endpoint"}}}`},
		{name: "stripe invoice.paid", provider: "stripe", payload: `{"type":"invoice.paid","data":{"object":{"id":"in_1","amount_paid":100,"currency":"usd"}}}`},
		{name: "paddle unknown type", provider: "paddle", payload: `{"event_type":"customer.created","data":{"id":"ctm_1"}}`},
		{name: "paddle notification.test", provider: "paddle", payload: `{"event_type":"notification.test","data":{"endpoint_id":"we_1"}}`},
		{name: "crypto test event", provider: "crypto", payload: `{"type":"WebhookEndpointTest","invoiceId":"evt_1","timestamp":1772366400}`},
		{name: "crypto other BTCPay type", provider: "crypto", payload: `{"type":"InvoiceExpired","invoiceId":"inv_1","timestamp":1772366400}`},
		{name: "crypto sim non-invoice type", provider: "crypto", payload: `{"type":"PaymentRefunded","invoiceId":"evt_1","timestamp":1772366400,"data":{"id":"pay_1"}}`},

		// ---- billete edges ----
		{
			name: "billete checkout without order: capture only", provider: "billete",
			payload: `{"type":"checkout.completed","created_at":"2026-03-01T12:00:05Z",
				"data":{"id":"chk_1","amount":1200,"currency":"usd","payment_id":"pay_1","metadata":{}}}`,
			want: []billing.Fact{billing.Captured{Payment: billing.Payment{
				Ref: "pay_1", Amount: 1200, Currency: "USD", CapturedAt: t0.Add(5 * time.Second)}}},
		},
		{
			name: "billete times keep nanoseconds", provider: "billete",
			payload: `{"type":"subscription.updated","created_at":"2026-03-01T12:00:00Z",
				"data":{"id":"sub_1","customer":"cus_1","plan":"pro","status":"active",
				"current_period_end":"2026-03-31T12:00:00.5Z","updated_at":"2026-03-01T12:00:00.123456789Z"}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active",
				CurrentPeriodEnd: time.Date(2026, 3, 31, 12, 0, 0, 5e8, time.UTC), UpdatedAt: t0.Add(123456789)}},
		},
		{
			name: "billete subscription without updated_at: envelope time", provider: "billete",
			payload: `{"type":"subscription.canceled","created_at":"2026-03-01T12:00:09Z",
				"data":{"id":"sub_1","customer":"cus_1","plan":"pro","status":"canceled"}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "canceled",
				UpdatedAt: t0.Add(9 * time.Second)}},
		},
		{
			name: "billete no time at all: Event.OccurredAt", provider: "billete",
			payload: `{"type":"refund.failed","data":{"id":"re_1","payment_id":"pay_1","status":"failed"}}`,
			want:    []billing.Fact{billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_1", At: occurred}},
		},
		{
			name: "billete refund of a payment that does not say its amount: no snapshot", provider: "billete",
			payload: `{"type":"payment.refunded","created_at":"2026-03-01T12:00:00Z",
				"data":{"id":"pay_1","currency":"EUR","refund":{"id":"re_1","amount":300}}}`,
			want: []billing.Fact{billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 300, Currency: "EUR", At: t0}},
		},
		{
			name: "billete chargeback with the provider's dispute id", provider: "billete",
			payload: `{"type":"payment.charged_back","created_at":"2026-03-01T12:00:00Z",
				"data":{"id":"pay_1","dispute_id":"dp_real","status":"charged_back"}}`,
			want: []billing.Fact{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_real", At: t0}},
		},
		{
			name: "billete chargeback won: the dispute id of its chargeback", provider: "billete",
			payload: `{"type":"payment.chargeback_won","created_at":"2026-03-01T12:00:09Z",
				"data":{"id":"pay_1","dispute_id":"dp_real","status":"succeeded","updated_at":"2026-03-01T12:00:05Z"}}`,
			want: []billing.Fact{billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_real", At: t0.Add(5 * time.Second)}},
		},
		{
			name: "billete chargeback won without a dispute id: dp_ + the payment, as its chargeback", provider: "billete",
			payload: `{"type":"payment.chargeback_won","created_at":"2026-03-01T12:00:00Z",
				"data":{"id":"pay_1","status":"partially_refunded"}}`,
			want: []billing.Fact{billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_pay_1", At: t0}},
		},
		{
			name: "billete chargeback won without the payment", provider: "billete",
			payload:  `{"type":"payment.chargeback_won","data":{"dispute_id":"dp_1"}}`,
			errField: "data.id",
		},
		{
			name: "billete refund without its refund id", provider: "billete",
			payload: `{"type":"payment.refunded","data":{"id":"pay_1","amount":1000,"currency":"USD",
				"refund":{"amount":300,"status":"succeeded"}}}`,
			errField: "data.refund.id",
		},
		{
			name: "billete refund without the refund", provider: "billete",
			payload:  `{"type":"payment.refunded","data":{"id":"pay_1","amount":1000,"currency":"USD"}}`,
			errField: "data.refund.id",
		},
		{
			name: "billete fractional amount", provider: "billete",
			payload:  `{"type":"payment.succeeded","data":{"id":"pay_1","amount":12.5,"currency":"USD"}}`,
			errField: "data.amount",
		},
		{
			name: "billete amount as a string", provider: "billete",
			payload:  `{"type":"payment.succeeded","data":{"id":"pay_1","amount":"1250","currency":"USD"}}`,
			errField: "data.amount",
		},
		{
			name: "billete exponent amount", provider: "billete",
			payload:  `{"type":"invoice.settled","data":{"id":"inv_1","amount":1e3,"currency":"BTC","chain_ref":"tx_1"}}`,
			errField: "data.amount",
		},
		{
			name: "billete negative amount", provider: "billete",
			payload:  `{"type":"checkout.completed","data":{"payment_id":"pay_1","amount":-5,"currency":"USD"}}`,
			errField: "data.amount",
		},
		{
			name: "billete capture without currency", provider: "billete",
			payload:  `{"type":"payment.succeeded","data":{"id":"pay_1","amount":5}}`,
			errField: "data.currency",
		},
		{
			name: "billete checkout without payment", provider: "billete",
			payload:  `{"type":"checkout.completed","data":{"id":"chk_1","amount":5,"currency":"USD"}}`,
			errField: "data.payment_id",
		},
		{
			name: "billete settlement without chain reference", provider: "billete",
			payload:  `{"type":"invoice.settled","data":{"id":"inv_1","amount":5,"currency":"BTC"}}`,
			errField: "data.chain_ref",
		},
		{
			name: "billete unknown subscription status", provider: "billete",
			payload:  `{"type":"subscription.updated","data":{"id":"sub_1","status":"paused"}}`,
			errField: "data.status",
		},
		{
			name: "billete unreadable time", provider: "billete",
			payload:  `{"type":"payment.succeeded","data":{"id":"pay_1","amount":5,"currency":"USD","created_at":"yesterday"}}`,
			errField: "data.created_at",
		},
		{
			name: "billete data not an object", provider: "billete",
			payload:  `{"type":"payment.succeeded","data":[1,2]}`,
			errField: "data",
		},

		// ---- stripe: real shapes ----
		{
			name: "stripe checkout session: client_reference_id, lower-case currency, event time", provider: "stripe",
			payload: `{"id":"evt_1","type":"checkout.session.completed","created":1772366400,"data":{"object":{
				"id":"cs_1","object":"checkout.session","mode":"payment","payment_status":"paid",
				"payment_intent":"pi_1","amount_total":1999,"currency":"usd","client_reference_id":"ord_7","metadata":{}}}}`,
			want: []billing.Fact{
				billing.Captured{Payment: billing.Payment{Ref: "pi_1", OrderID: "ord_7", Amount: 1999, Currency: "USD", CapturedAt: unixT(1772366400)}},
				billing.OrderPaid{OrderID: "ord_7", PaymentRef: "pi_1", At: unixT(1772366400)},
			},
		},
		{
			name: "stripe checkout session of a subscription", provider: "stripe",
			payload: `{"type":"checkout.session.completed","data":{"object":{"mode":"subscription","payment_intent":null,
				"subscription":"sub_1","amount_total":1000,"currency":"usd"}}}`,
		},
		{
			name: "stripe checkout session not paid yet", provider: "stripe",
			payload: `{"type":"checkout.session.completed","data":{"object":{"mode":"payment","payment_status":"unpaid",
				"payment_intent":"pi_1","amount_total":1000,"currency":"usd"}}}`,
		},
		{
			name: "stripe async payment succeeded", provider: "stripe",
			payload: `{"type":"checkout.session.async_payment_succeeded","created":1772366400,"data":{"object":{
				"mode":"payment","payment_status":"paid","payment_intent":{"id":"pi_2","object":"payment_intent"},
				"amount_total":700,"currency":"eur","metadata":{"order_id":"ord_8"}}}}`,
			want: []billing.Fact{
				billing.Captured{Payment: billing.Payment{Ref: "pi_2", OrderID: "ord_8", Amount: 700, Currency: "EUR", CapturedAt: unixT(1772366400)}},
				billing.OrderPaid{OrderID: "ord_8", PaymentRef: "pi_2", At: unixT(1772366400)},
			},
		},
		{
			name: "stripe payment intent: amount_received, metadata", provider: "stripe",
			payload: `{"type":"payment_intent.succeeded","created":1772366460,"data":{"object":{
				"id":"pi_1","object":"payment_intent","amount":2000,"amount_received":1500,"currency":"usd",
				"created":1772360000,"metadata":{"order_id":"ord_7"}}}}`,
			want: []billing.Fact{
				billing.Captured{Payment: billing.Payment{Ref: "pi_1", OrderID: "ord_7", Amount: 1500, Currency: "USD", CapturedAt: unixT(1772366460)}},
				billing.OrderPaid{OrderID: "ord_7", PaymentRef: "pi_1", At: unixT(1772366460)},
			},
		},
		{
			name: "stripe payment intent without order", provider: "stripe",
			payload: `{"type":"payment_intent.succeeded","created":1772366460,"data":{"object":{
				"id":"pi_1","amount":2000,"currency":"usd"}}}`,
			want: []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "pi_1", Amount: 2000, Currency: "USD", CapturedAt: unixT(1772366460)}}},
		},
		{
			name: "stripe charge with two refunds, one failed", provider: "stripe",
			payload: `{"type":"charge.refunded","created":1772366500,"data":{"object":{
				"id":"ch_1","object":"charge","payment_intent":"pi_1","amount":5000,"currency":"usd","created":1772360000,
				"metadata":{"order_id":"ord_7"},"amount_refunded":1000,
				"refunds":{"object":"list","data":[
					{"id":"re_2","amount":1000,"currency":"usd","status":"succeeded","created":1772366490},
					{"id":"re_1","amount":4000,"currency":"usd","status":"failed","created":1772366000}]}}}}`,
			// The failed one is a RefundFailed, as refund.failed would say.
			want: []billing.Fact{billing.Refunded{
				Payment:    &billing.Payment{Ref: "pi_1", OrderID: "ord_7", Amount: 5000, Currency: "USD", CapturedAt: unixT(1772360000)},
				PaymentRef: "pi_1", RefundRef: "re_2", Amount: 1000, Currency: "USD", At: unixT(1772366490),
			}, billing.RefundFailed{PaymentRef: "pi_1", RefundRef: "re_1", At: unixT(1772366500)}},
		},
		{
			// API versions from 2022-11-15: the refund.* events carry the refunds.
			name: "stripe charge.refunded without refunds (newer API versions): ignored", provider: "stripe",
			payload: `{"type":"charge.refunded","data":{"object":{"id":"ch_1","payment_intent":"pi_1","amount":5000,"currency":"usd","amount_refunded":5000}}}`,
		},
		{
			name: "stripe charge.refunded of a partial capture: the snapshot is amount_captured", provider: "stripe",
			payload: `{"type":"charge.refunded","created":1772366500,"data":{"object":{
				"id":"ch_1","object":"charge","payment_intent":"pi_1","amount":10000,"amount_captured":8000,"currency":"usd",
				"created":1772360000,"refunds":{"object":"list","data":[
					{"id":"re_1","amount":3000,"currency":"usd","status":"succeeded","created":1772366490}]}}}}`,
			want: []billing.Fact{billing.Refunded{
				Payment:    &billing.Payment{Ref: "pi_1", Amount: 8000, Currency: "USD", CapturedAt: unixT(1772360000)},
				PaymentRef: "pi_1", RefundRef: "re_1", Amount: 3000, Currency: "USD", At: unixT(1772366490),
			}},
		},
		{
			name: "stripe refund.created (newer API versions)", provider: "stripe",
			payload: `{"type":"refund.created","created":1772366500,"data":{"object":{"id":"re_1","object":"refund",
				"amount":3000,"currency":"usd","payment_intent":"pi_1","charge":"ch_1","status":"succeeded","created":1772366490}}}`,
			want: []billing.Fact{billing.Refunded{PaymentRef: "pi_1", RefundRef: "re_1", Amount: 3000, Currency: "USD", At: unixT(1772366490)}},
		},
		{
			name: "stripe refund.updated pending: refunded", provider: "stripe",
			payload: `{"type":"refund.updated","created":1772366500,"data":{"object":{"id":"re_1","object":"refund",
				"amount":3000,"currency":"eur","payment_intent":{"id":"pi_1","object":"payment_intent"},"status":"pending"}}}`,
			want: []billing.Fact{billing.Refunded{PaymentRef: "pi_1", RefundRef: "re_1", Amount: 3000, Currency: "EUR", At: unixT(1772366500)}},
		},
		{
			name: "stripe charge.refund.updated succeeded: refunded", provider: "stripe",
			payload: `{"type":"charge.refund.updated","created":1772366500,"data":{"object":{"id":"re_1","object":"refund",
				"amount":100,"currency":"usd","payment_intent":"pi_1","status":"succeeded","created":1772366400}}}`,
			want: []billing.Fact{billing.Refunded{PaymentRef: "pi_1", RefundRef: "re_1", Amount: 100, Currency: "USD", At: unixT(1772366400)}},
		},
		{
			name: "stripe refund.updated canceled: failed", provider: "stripe",
			payload: `{"type":"refund.updated","created":1772366500,"data":{"object":{"id":"re_1","object":"refund",
				"amount":3000,"currency":"usd","payment_intent":"pi_1","status":"canceled","created":1772366000}}}`,
			want: []billing.Fact{billing.RefundFailed{PaymentRef: "pi_1", RefundRef: "re_1", At: unixT(1772366500)}},
		},
		{
			name: "stripe refund requires_action: nothing yet", provider: "stripe",
			payload: `{"type":"refund.created","data":{"object":{"id":"re_1","object":"refund","amount":3000,"currency":"usd",
				"payment_intent":"pi_1","status":"requires_action"}}}`,
		},
		{
			name: "stripe refund.created without amount", provider: "stripe",
			payload: `{"type":"refund.created","data":{"object":{"id":"re_1","object":"refund","currency":"usd",
				"payment_intent":"pi_1","status":"succeeded"}}}`,
			errField: "data.object.amount",
		},
		{
			name: "stripe refund.created of a charge without payment intent: the charge", provider: "stripe",
			payload: `{"type":"refund.created","data":{"object":{"id":"re_1","object":"refund","amount":1,"currency":"usd",
				"charge":"ch_1","payment_intent":null,"status":"succeeded"}}}`,
			want: []billing.Fact{billing.Refunded{PaymentRef: "ch_1", RefundRef: "re_1", Amount: 1, Currency: "USD", At: occurred}},
		},
		{
			name: "stripe refund.created without payment intent or charge", provider: "stripe",
			payload: `{"type":"refund.created","data":{"object":{"id":"re_1","object":"refund","amount":1,"currency":"usd",
				"status":"succeeded"}}}`,
			errField: "data.object.charge",
		},
		{
			name: "stripe refund unknown status", provider: "stripe",
			payload: `{"type":"refund.updated","data":{"object":{"id":"re_1","object":"refund","amount":1,"currency":"usd",
				"payment_intent":"pi_1","status":"bounced"}}}`,
			errField: "data.object.status",
		},
		{
			name: "stripe refund without id", provider: "stripe",
			payload: `{"type":"charge.refunded","data":{"object":{"id":"ch_1","payment_intent":"pi_1","amount":5000,"currency":"usd",
				"refunds":{"data":[{"amount":5000,"status":"succeeded"}]}}}}`,
			errField: "data.object.refunds.data[0].id",
		},
		{
			name: "stripe refund with a fractional amount", provider: "stripe",
			payload: `{"type":"charge.refunded","data":{"object":{"id":"ch_1","payment_intent":"pi_1","amount":5000,"currency":"usd",
				"refunds":{"data":[{"id":"re_1","amount":50.5,"status":"succeeded"}]}}}}`,
			errField: "data.object.refunds.data[0].amount",
		},
		{
			name: "stripe refund.failed", provider: "stripe",
			payload: `{"type":"refund.failed","created":1772366500,"data":{"object":{"id":"re_1","object":"refund",
				"payment_intent":"pi_1","status":"failed","created":1772366000}}}`,
			want: []billing.Fact{billing.RefundFailed{PaymentRef: "pi_1", RefundRef: "re_1", At: unixT(1772366500)}},
		},
		{
			name: "stripe dispute created", provider: "stripe",
			payload: `{"type":"charge.dispute.created","created":1772366600,"data":{"object":{"id":"dp_1","object":"dispute",
				"charge":"ch_1","payment_intent":"pi_1","amount":5000,"currency":"usd","status":"needs_response","created":1772366590}}}`,
			want: []billing.Fact{billing.ChargedBack{PaymentRef: "pi_1", DisputeRef: "dp_1", Amount: 5000, At: unixT(1772366590)}},
		},
		{
			name: "stripe inquiry (warning_needs_response): no money moves", provider: "stripe",
			payload: `{"type":"charge.dispute.created","created":1772366600,"data":{"object":{"id":"dp_1","object":"dispute",
				"payment_intent":"pi_1","amount":5000,"currency":"usd","status":"warning_needs_response","is_charge_refundable":true}}}`,
			ignored: "inquiry (status warning_needs_response) takes no money",
		},
		{
			name: "stripe dispute created under review", provider: "stripe",
			payload: `{"type":"charge.dispute.created","created":1772366600,"data":{"object":{"id":"dp_1","object":"dispute",
				"payment_intent":"pi_1","amount":5000,"currency":"usd","status":"under_review"}}}`,
			want: []billing.Fact{billing.ChargedBack{PaymentRef: "pi_1", DisputeRef: "dp_1", Amount: 5000, At: unixT(1772366600)}},
		},
		{
			name: "stripe dispute funds withdrawn: the same dispute", provider: "stripe",
			payload: `{"type":"charge.dispute.funds_withdrawn","created":1772366650,"data":{"object":{"id":"dp_1","object":"dispute",
				"payment_intent":"pi_1","amount":5000,"currency":"usd","status":"needs_response","created":1772366590}}}`,
			want: []billing.Fact{billing.ChargedBack{PaymentRef: "pi_1", DisputeRef: "dp_1", Amount: 5000, At: unixT(1772366590)}},
		},
		{
			name: "stripe partial dispute: its amount", provider: "stripe",
			payload: `{"type":"charge.dispute.created","created":1772366600,"data":{"object":{"id":"dp_2","object":"dispute",
				"charge":"ch_1","payment_intent":"pi_1","amount":1000,"currency":"usd","status":"needs_response"}}}`,
			want: []billing.Fact{billing.ChargedBack{PaymentRef: "pi_1", DisputeRef: "dp_2", Amount: 1000, At: unixT(1772366600)}},
		},
		{
			name: "stripe dispute of a charge without payment intent: the charge", provider: "stripe",
			payload: `{"type":"charge.dispute.created","data":{"object":{"id":"dp_1","charge":"ch_1","payment_intent":null}}}`,
			want:    []billing.Fact{billing.ChargedBack{PaymentRef: "ch_1", DisputeRef: "dp_1", At: occurred}},
		},
		{
			name: "stripe dispute without payment intent or charge", provider: "stripe",
			payload:  `{"type":"charge.dispute.created","data":{"object":{"id":"dp_1"}}}`,
			errField: "data.object.charge",
		},
		{
			name: "stripe dispute closed won", provider: "stripe",
			payload: `{"type":"charge.dispute.closed","created":1772366700,"data":{"object":{"id":"dp_1",
				"payment_intent":"pi_1","status":"won"}}}`,
			want: []billing.Fact{billing.ChargebackWon{PaymentRef: "pi_1", DisputeRef: "dp_1", At: unixT(1772366700)}},
		},
		{
			name: "stripe dispute closed lost", provider: "stripe",
			payload: `{"type":"charge.dispute.closed","created":1772366700,"data":{"object":{"id":"dp_1",
				"payment_intent":"pi_1","status":"lost"}}}`,
			ignored: `closed with status "lost"`,
		},
		{
			name: "stripe dispute funds reinstated", provider: "stripe",
			payload: `{"type":"charge.dispute.funds_reinstated","created":1772366700,"data":{"object":{"id":"dp_1",
				"payment_intent":"pi_1","status":"won"}}}`,
			want: []billing.Fact{billing.ChargebackWon{PaymentRef: "pi_1", DisputeRef: "dp_1", At: unixT(1772366700)}},
		},
		{
			name: "stripe subscription, current API: items carry price and period", provider: "stripe",
			payload: `{"type":"customer.subscription.created","created":1772366400,"data":{"object":{
				"id":"sub_1","object":"subscription","customer":"cus_1","status":"trialing","cancel_at_period_end":false,
				"cancel_at":null,"items":{"object":"list","data":[{"price":{"id":"price_pro"},"current_period_end":1774958400}]}}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "price_pro", Status: "active",
				CurrentPeriodEnd: unixT(1774958400), UpdatedAt: unixT(1772366400)}},
		},
		{
			name: "stripe subscription past_due with cancel_at: past_due (not paid: no access)", provider: "stripe",
			payload: `{"type":"customer.subscription.updated","created":1772366400,"data":{"object":{
				"id":"sub_1","customer":{"id":"cus_1","object":"customer"},"status":"past_due","cancel_at":1774958400,
				"plan":{"id":"plan_basic"},"current_period_end":1774958400}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "plan_basic", Status: "past_due",
				CurrentPeriodEnd: unixT(1774958400), UpdatedAt: unixT(1772366400)}},
		},
		{
			name: "stripe subscription status canceled with ended_at: ended", provider: "stripe",
			payload: `{"type":"customer.subscription.updated","created":1772366400,"data":{"object":{
				"id":"sub_1","customer":"cus_1","status":"canceled","ended_at":1772366300,"current_period_end":1774958400}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Status: "ended",
				CurrentPeriodEnd: unixT(1774958400), UpdatedAt: unixT(1772366400), EndedAt: unixT(1772366300)}},
		},
		{
			name: "stripe subscription status canceled after its period: ended", provider: "stripe",
			payload: `{"type":"customer.subscription.updated","created":1774958500,"data":{"object":{
				"id":"sub_1","customer":"cus_1","status":"canceled","current_period_end":1774958400}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Status: "ended",
				CurrentPeriodEnd: unixT(1774958400), UpdatedAt: unixT(1774958500)}},
		},
		{
			name: "stripe subscription deleted", provider: "stripe",
			payload: `{"type":"customer.subscription.deleted","created":1772366400,"data":{"object":{
				"id":"sub_1","customer":"cus_1","status":"canceled","ended_at":1772366399}}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "cus_1", Status: "ended", UpdatedAt: unixT(1772366400),
				EndedAt: unixT(1772366399)}},
		},
		{
			name: "stripe subscription unknown status", provider: "stripe",
			payload:  `{"type":"customer.subscription.updated","data":{"object":{"id":"sub_1","status":"frozen"}}}`,
			errField: "data.object.status",
		},
		{
			name: "stripe amount as a string", provider: "stripe",
			payload:  `{"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":"2000","currency":"usd"}}}`,
			errField: "data.object.amount",
		},

		// ---- paddle: real shapes ----
		{
			name: "paddle transaction: the transaction is the payment", provider: "paddle",
			payload: `{"event_type":"transaction.completed","occurred_at":"2026-03-01T12:00:10Z","data":{
				"id":"txn_1","status":"completed","currency_code":"EUR","custom_data":{"order_id":"ord_7"},
				"billed_at":"2026-03-01T12:00:05Z","updated_at":"2026-03-01T12:00:09Z",
				"details":{"totals":{"total":"1999","currency_code":"EUR"}}}}`,
			want: []billing.Fact{
				billing.Captured{Payment: billing.Payment{Ref: "txn_1", OrderID: "ord_7", Amount: 1999, Currency: "EUR", CapturedAt: t0.Add(5 * time.Second)}},
				billing.OrderPaid{OrderID: "ord_7", PaymentRef: "txn_1", At: t0.Add(5 * time.Second)},
			},
		},
		{
			name: "paddle transaction: currency from the totals", provider: "paddle",
			payload: `{"event_type":"transaction.paid","occurred_at":"2026-03-01T12:00:10Z","data":{
				"id":"txn_1","details":{"totals":{"total":"10","currency_code":"usd"}}}}`,
			want: []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "txn_1", Amount: 10, Currency: "USD", CapturedAt: t0.Add(10 * time.Second)}}},
		},
		{
			name: "paddle decimal amount", provider: "paddle",
			payload:  `{"event_type":"transaction.completed","data":{"id":"txn_1","currency_code":"EUR","details":{"totals":{"total":"19.99"}}}}`,
			errField: "data.details.totals.total",
		},
		{
			name: "paddle transaction without total", provider: "paddle",
			payload:  `{"event_type":"transaction.completed","data":{"id":"txn_1","currency_code":"EUR","details":{}}}`,
			errField: "data.details.totals.total",
		},
		{
			name: "paddle crypto invoice as a transaction", provider: "paddle",
			payload: `{"event_type":"transaction.completed","data":{"id":"inv_1","chain_ref":"tx_1","currency_code":"BTC",
				"details":{"totals":{"total":"100"}}}}`,
		},
		{
			name: "paddle refund pending approval", provider: "paddle",
			payload: `{"event_type":"adjustment.created","data":{"id":"adj_1","action":"refund","status":"pending_approval",
				"transaction_id":"txn_1","currency_code":"EUR","totals":{"total":"500"}}}`,
		},
		{
			name: "paddle refund approved: the adjustment is the refund", provider: "paddle",
			payload: `{"event_type":"adjustment.updated","occurred_at":"2026-03-01T12:00:10Z","data":{"id":"adj_1",
				"action":"refund","status":"approved","transaction_id":"txn_1","currency_code":"EUR",
				"totals":{"total":"500","currency_code":"EUR"},"created_at":"2026-03-01T11:00:00Z"}}`,
			want: []billing.Fact{billing.Refunded{PaymentRef: "txn_1", RefundRef: "adj_1", Amount: 500, Currency: "EUR", At: t0.Add(-time.Hour)}},
		},
		{
			name: "paddle refund rejected", provider: "paddle",
			payload: `{"event_type":"adjustment.updated","occurred_at":"2026-03-01T12:00:10Z","data":{"id":"adj_1",
				"action":"refund","status":"rejected","transaction_id":"txn_1"}}`,
			want: []billing.Fact{billing.RefundFailed{PaymentRef: "txn_1", RefundRef: "adj_1", At: t0.Add(10 * time.Second)}},
		},
		{
			name: "paddle refund approved without amount", provider: "paddle",
			payload: `{"event_type":"adjustment.created","data":{"id":"adj_1","action":"refund","status":"approved",
				"transaction_id":"txn_1","currency_code":"EUR"}}`,
			errField: "data.totals.total",
		},
		{
			name: "paddle refund without transaction", provider: "paddle",
			payload:  `{"event_type":"adjustment.created","data":{"id":"adj_1","action":"refund","status":"approved"}}`,
			errField: "data.transaction_id",
		},
		{
			name: "paddle refund without status", provider: "paddle",
			payload:  `{"event_type":"adjustment.created","data":{"id":"adj_1","action":"refund","transaction_id":"txn_1"}}`,
			errField: "data.status",
		},
		{
			name: "paddle credit adjustment", provider: "paddle",
			payload: `{"event_type":"adjustment.created","data":{"id":"adj_1","action":"credit","status":"approved","transaction_id":"txn_1"}}`,
			ignored: "credit balance",
		},
		{
			name: "paddle credit reverse", provider: "paddle",
			payload: `{"event_type":"adjustment.created","data":{"id":"adj_3","action":"credit_reverse","status":"approved","transaction_id":"txn_1"}}`,
			ignored: "credit_reverse (adjustment adj_3)",
		},
		{
			name: "paddle chargeback warning: no money moves", provider: "paddle",
			payload: `{"event_type":"adjustment.created","data":{"id":"adj_4","action":"chargeback_warning","status":"approved","transaction_id":"txn_1"}}`,
			ignored: "chargeback warning (adjustment adj_4) moves no money",
		},
		{
			name: "paddle chargeback reverse: the win, a reversal of its own", provider: "paddle",
			payload: `{"event_type":"adjustment.created","data":{"id":"adj_2","action":"chargeback_reverse","status":"approved","transaction_id":"txn_1",
				"created_at":"2026-03-01T12:06:00Z","totals":{"total":"1999"}}}`,
			want: []billing.Fact{billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_2", Amount: 1999, At: t0.Add(6 * time.Minute)}},
		},
		{
			name: "paddle chargeback reverse without transaction", provider: "paddle",
			payload:  `{"event_type":"adjustment.created","data":{"id":"adj_2","action":"chargeback_reverse","status":"approved"}}`,
			errField: "data.transaction_id",
		},
		{
			name: "paddle chargeback", provider: "paddle",
			payload: `{"event_type":"adjustment.created","occurred_at":"2026-03-01T12:00:10Z","data":{"id":"adj_cb",
				"action":"chargeback","status":"approved","transaction_id":"txn_1","totals":{"total":"1999"}}}`,
			want: []billing.Fact{billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb", Amount: 1999, At: t0.Add(10 * time.Second)}},
		},
		{
			// The same adjustment as the chargeback above, so the same DisputeRef.
			name: "paddle chargeback reversed: taken, then won", provider: "paddle",
			payload: `{"event_type":"adjustment.updated","occurred_at":"2026-03-01T12:05:00Z","data":{"id":"adj_cb",
				"action":"chargeback","status":"reversed","transaction_id":"txn_1","totals":{"total":"1999"},
				"created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:04:00Z"}}`,
			want: []billing.Fact{billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb", Amount: 1999, At: t0},
				billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb", At: t0.Add(4 * time.Minute)}},
		},
		{
			name: "paddle chargeback rejected", provider: "paddle",
			payload: `{"event_type":"adjustment.updated","data":{"id":"adj_cb","action":"chargeback","status":"rejected","transaction_id":"txn_1"}}`,
		},
		{
			name: "paddle subscription past_due: past_due (not paid: no access)", provider: "paddle",
			payload: `{"event_type":"subscription.updated","occurred_at":"2026-03-01T12:00:10Z","data":{"id":"sub_1",
				"customer_id":"ctm_1","status":"past_due","scheduled_change":null,
				"items":[{"price":{"id":"pri_pro"}}],"current_billing_period":{"ends_at":"2026-03-31T12:00:00Z"},
				"updated_at":"2026-03-01T12:00:09Z"}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "ctm_1", Plan: "pri_pro", Status: "past_due",
				CurrentPeriodEnd: t0.Add(30 * 24 * time.Hour), UpdatedAt: t0.Add(9 * time.Second)}},
		},
		{
			name: "paddle subscription with a scheduled cancel and no period: its effective time", provider: "paddle",
			payload: `{"event_type":"subscription.updated","data":{"id":"sub_1","customer_id":"ctm_1","status":"active",
				"scheduled_change":{"action":"cancel","effective_at":"2026-03-31T12:00:00Z"},"updated_at":"2026-03-01T12:00:00Z"}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "ctm_1", Status: "canceled",
				CurrentPeriodEnd: t0.Add(30 * 24 * time.Hour), UpdatedAt: t0}},
		},
		{
			name: "paddle subscription paused: paused (no access)", provider: "paddle",
			payload: `{"event_type":"subscription.updated","data":{"id":"sub_1","customer_id":"ctm_1","status":"paused",
				"scheduled_change":{"action":"resume"},"updated_at":"2026-03-01T12:00:00Z"}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "ctm_1", Status: "paused", UpdatedAt: t0}},
		},
		{
			name: "paddle subscription status canceled in an update: ended", provider: "paddle",
			payload: `{"event_type":"subscription.updated","data":{"id":"sub_1","customer_id":"ctm_1","status":"canceled",
				"updated_at":"2026-03-01T12:00:00Z"}}`,
			want: []billing.Fact{billing.Subscription{Ref: "sub_1", Customer: "ctm_1", Status: "ended", UpdatedAt: t0}},
		},
		{
			name: "paddle subscription unknown status", provider: "paddle",
			payload:  `{"event_type":"subscription.updated","data":{"id":"sub_1","status":"frozen"}}`,
			errField: "data.status",
		},
		{
			name: "paddle subscription without id", provider: "paddle",
			payload:  `{"event_type":"subscription.created","data":{"status":"active"}}`,
			errField: "data.id",
		},

		// ---- crypto ----
		{
			name: "crypto settled", provider: "crypto",
			payload: `{"type":"InvoiceSettled","invoiceId":"inv_1","timestamp":1772366400,"metadata":{"orderId":"ord_9"},
				"chainRef":"tx_1","amount":150000,"currency":"btc","paymentMethod":"BTC-CHAIN"}`,
			want: []billing.Fact{billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_9", Amount: 150000, Currency: "BTC",
				ChainRef: "tx_1", At: unixT(1772366400)}},
		},
		{
			name: "crypto settled without timestamp: Event.OccurredAt", provider: "crypto",
			payload: `{"type":"InvoiceSettled","invoiceId":"inv_1","metadata":{},"chainRef":"tx_1","amount":1,"currency":"BTC"}`,
			want:    []billing.Fact{billing.Settled{InvoiceRef: "inv_1", Amount: 1, Currency: "BTC", ChainRef: "tx_1", At: occurred}},
		},
		{
			name: "crypto settled without chain reference (BTCPay's own payload)", provider: "crypto",
			payload:  `{"type":"InvoiceSettled","invoiceId":"inv_1","timestamp":1772366400,"metadata":{"orderId":"ord_9"}}`,
			errField: "chainRef",
		},
		{
			name: "crypto decimal amount", provider: "crypto",
			payload:  `{"type":"InvoiceSettled","invoiceId":"inv_1","chainRef":"tx_1","amount":"0.0015","currency":"BTC"}`,
			errField: "amount",
		},
		{
			name: "crypto settled without invoice", provider: "crypto",
			payload:  `{"type":"InvoiceSettled","chainRef":"tx_1","amount":1,"currency":"BTC"}`,
			errField: "invoiceId",
		},

		// ---- not readable at all ----
		{name: "not JSON", provider: "billete", payload: `{"type":`, errField: "payload"},
		{name: "not an object", provider: "stripe", payload: `["payment_intent.succeeded"]`, errField: "payload"},
		{name: "type not a string", provider: "paddle", payload: `{"event_type":7}`, errField: "event_type"},
		{name: "envelope time unreadable", provider: "stripe", payload: `{"type":"ping","created":"soon"}`, errField: "created"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ev := &payhook.Event{EventID: "evt_case", OccurredAt: occurred, Payload: []byte(c.payload)}
			r, err := mapping.Read(c.provider, ev)
			got := r.Facts
			if c.errField != "" {
				if !errors.Is(err, payhook.ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed (facts %s)", err, show(got))
				}
				if !strings.Contains(err.Error(), c.errField) {
					t.Errorf("err %q does not name %q", err, c.errField)
				}
				if got != nil {
					t.Errorf("facts %s with an error", show(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("\n got  %s\n want %s", show(got), show(c.want))
			}
			if got == nil && (r.Ignored == "" || !strings.Contains(r.Ignored, c.ignored)) {
				t.Errorf("ignored because %q; want a reason saying %q", r.Ignored, c.ignored)
			}
		})
	}
}

// The error names the missing field exactly.
func TestMissingRefundIDNamesTheField(t *testing.T) {
	t.Parallel()
	ev := &payhook.Event{Payload: []byte(`{"type":"payment.refunded","data":{"id":"pay_1","refund":{"amount":1}}}`)}
	_, err := mapping.Facts("billete", ev)
	if !errors.Is(err, payhook.ErrMalformed) || !strings.Contains(err.Error(), `field "data.refund.id" is missing`) {
		t.Fatalf("err = %v", err)
	}
	if payhook.HTTPStatus(err) != 400 {
		t.Errorf("status %d", payhook.HTTPStatus(err))
	}
}

// The type comes from the payload; a payload without one falls back to the
// stored Event.Type.
func TestTypeFallsBackToEventType(t *testing.T) {
	t.Parallel()
	ev := &payhook.Event{Type: "refund.failed", OccurredAt: occurred,
		Payload: []byte(`{"data":{"id":"re_1","payment_id":"pay_1"}}`)}
	got, err := mapping.Facts("billete", ev)
	want := []billing.Fact{billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_1", At: occurred}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s, %v", show(got), err)
	}
}

func TestUnknownProviderAndNilEvent(t *testing.T) {
	t.Parallel()
	if _, err := mapping.Facts("acme", &payhook.Event{Payload: []byte(`{}`)}); !errors.Is(err, payhook.ErrConfig) {
		t.Errorf("unknown provider: %v", err)
	}
	if _, err := mapping.Facts("stripe", nil); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf("nil event: %v", err)
	}
	for _, p := range []string{"standard", "hmac"} {
		if got, err := mapping.Facts(p, nil); got != nil || err != nil {
			t.Errorf("%s: %v %v", p, got, err)
		}
	}
}
