package provider_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
)

// GetObject of each client that retrieves subscriptions: its route, the
// pinned version sent, the object read as its list reads one (status in
// payhook's words, plan, created, the answer's version); a 404 wraps
// payhook.ErrNotFound (and is an *APIError), a 503 is an *APIError worth
// retrying, an answer of another object or not an object is malformed,
// a kind it cannot retrieve is invalid.
func TestGetObjectSubscription(t *testing.T) {
	t.Parallel()
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name, path, header, body, other string
		want                            adapter.Object
	}{
		{"stripe", "/v1/subscriptions/sub_1", "Stripe-Version",
			`{"id":"sub_1","object":"subscription","status":"active","cancel_at_period_end":true,"created":1735787045,` +
				`"items":{"data":[{"price":{"id":"price_pro"}}]}}`,
			`{"id":"sub_2","object":"subscription","status":"active","created":1735787045}`,
			adapter.Object{Kind: adapter.KindSubscription, Ref: "sub_1", Status: "canceled", Plan: "price_pro", Created: created, APIVersion: "v9"}},
		{"paddle", "/subscriptions/sub_1", "Paddle-Version",
			`{"data":{"id":"sub_1","status":"canceled","created_at":"2025-01-02T03:04:05Z","items":[{"price":{"id":"pri_pro"}}]},"meta":{}}`,
			`{"data":{"id":"sub_2","status":"active","created_at":"2025-01-02T03:04:05Z"}}`,
			adapter.Object{Kind: adapter.KindSubscription, Ref: "sub_1", Status: "ended", Plan: "pri_pro", Created: created, APIVersion: "v9"}},
		{"billete", "/subscriptions/sub_1", "Billete-Version",
			`{"id":"sub_1","object":"subscription","status":"active","plan":"pro","created_at":"2025-01-02T03:04:05Z"}`,
			`{"id":"sub_2","object":"subscription","status":"active","plan":"pro","created_at":"2025-01-02T03:04:05Z"}`,
			adapter.Object{Kind: adapter.KindSubscription, Ref: "sub_1", Status: "active", Plan: "pro", Created: created, APIVersion: "v9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(tc.header, "v9")
				switch {
				case r.Header.Get(tc.header) != "v1" || r.Header.Get("Authorization") != "Bearer key":
					http.Error(w, "no version or key", http.StatusBadRequest)
				case r.URL.Path == tc.path:
					w.Write([]byte(tc.body))
				case r.URL.Path == tc.path+"x":
					w.Write([]byte(tc.other))
				case r.URL.Path == tc.path+"y":
					w.Write([]byte(`[]`))
				case r.URL.Path == tc.path+"z":
					http.Error(w, `{"error":{}}`, http.StatusServiceUnavailable)
				default:
					http.Error(w, `{"error":{}}`, http.StatusNotFound)
				}
			}))
			t.Cleanup(api.Close)
			c, err := provider.NewClient(tc.name, adapter.ClientConfig{BaseURL: api.URL, Key: "key", APIVersion: "v1"})
			if err != nil {
				t.Fatal(err)
			}
			g, ok := c.(adapter.ObjectGetter)
			if !ok {
				t.Fatalf("%T is no adapter.ObjectGetter", c)
			}
			ctx := context.Background()
			got, err := g.GetObject(ctx, adapter.KindSubscription, "sub_1")
			if err != nil || got != tc.want {
				t.Fatalf("GetObject = %+v, %v; want %+v", got, err, tc.want)
			}
			var ae *adapter.APIError
			if _, err := g.GetObject(ctx, adapter.KindSubscription, "sub_nope"); !errors.Is(err, payhook.ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 {
				t.Errorf("a 404: %v; want payhook.ErrNotFound", err)
			}
			if _, err := g.GetObject(ctx, adapter.KindSubscription, "sub_1z"); !errors.As(err, &ae) || !ae.Temporary() || errors.Is(err, payhook.ErrNotFound) {
				t.Errorf("a 503: %v; want a temporary *APIError", err)
			}
			for _, ref := range []string{"sub_1x", "sub_1y"} {
				if _, err := g.GetObject(ctx, adapter.KindSubscription, ref); !errors.Is(err, payhook.ErrMalformed) {
					t.Errorf("%s: %v; want payhook.ErrMalformed", ref, err)
				}
			}
			if _, err := g.GetObject(ctx, adapter.KindRefund, "sub_1"); !errors.Is(err, payhook.ErrInvalid) {
				t.Errorf("a refund: %v; want payhook.ErrInvalid", err)
			}
		})
	}
}

// GetObject of a payment, by each client: its route and query (Stripe's
// payment intent with its latest charge expanded, or a ch_ reference's
// charge; Paddle's transaction with its adjustments; billete's payment),
// read as the list reads one, with what was refunded (Paddle: its
// approved refund adjustments) and, for a payment that captured nothing,
// the provider's status of it and no amount; a 404 wraps
// payhook.ErrNotFound and names the URL asked.
func TestGetObjectPayment(t *testing.T) {
	t.Parallel()
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	const charge = `"object":"charge","amount":1000,"amount_captured":1000,"amount_refunded":300,"currency":"eur","status":"succeeded","captured":true,"created":1735787045`
	for _, tc := range []struct {
		name, provider, ref, path, query, body string
		want                                   adapter.Object
	}{
		{"stripe payment intent", "stripe", "pi_1", "/v1/payment_intents/pi_1", "expand%5B%5D=latest_charge",
			`{"id":"pi_1","object":"payment_intent","status":"succeeded","currency":"eur","created":1735787000,` +
				`"latest_charge":{"id":"ch_1","payment_intent":"pi_1",` + charge + `}}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "pi_1", Status: "partially_refunded", Amount: 1000, Currency: "EUR",
				RefundedAmount: 300, Created: created, APIVersion: "v9"}},
		{"stripe payment intent never charged", "stripe", "pi_1", "/v1/payment_intents/pi_1", "expand%5B%5D=latest_charge",
			`{"id":"pi_1","object":"payment_intent","status":"canceled","currency":"eur","created":1735787045,"latest_charge":null}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "pi_1", Status: "canceled", Currency: "EUR", Created: created, APIVersion: "v9"}},
		{"stripe authorization never captured", "stripe", "pi_1", "/v1/payment_intents/pi_1", "expand%5B%5D=latest_charge",
			`{"id":"pi_1","object":"payment_intent","status":"canceled","currency":"eur","created":1735787000,` +
				`"latest_charge":{"id":"ch_1","payment_intent":"pi_1","object":"charge","amount":1000,"amount_captured":0,"currency":"eur","status":"succeeded","captured":false,"created":1735787045}}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "pi_1", Status: "uncaptured", Currency: "EUR", Created: created, APIVersion: "v9"}},
		{"stripe charge", "stripe", "ch_1", "/v1/charges/ch_1", "",
			`{"id":"ch_1","payment_intent":null,` + charge + `}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "ch_1", Status: "partially_refunded", Amount: 1000, Currency: "EUR",
				RefundedAmount: 300, Created: created, APIVersion: "v9"}},
		{"paddle", "paddle", "txn_1", "/transactions/txn_1", "include=adjustments",
			`{"data":{"id":"txn_1","status":"completed","currency_code":"EUR","created_at":"2025-01-02T03:04:05Z",` +
				`"details":{"totals":{"total":"1000","grand_total":"1000","credit":"0"}},"adjustments":[` +
				`{"id":"adj_1","action":"refund","transaction_id":"txn_1","status":"approved","totals":{"total":"300"},"created_at":"2025-01-03T00:00:00Z"},` +
				`{"id":"adj_2","action":"refund","transaction_id":"txn_1","status":"approved","totals":{"total":"200"},"created_at":"2025-03-01T00:00:00Z"},` +
				`{"id":"adj_3","action":"refund","transaction_id":"txn_1","status":"rejected","totals":{"total":"400"},"created_at":"2025-03-02T00:00:00Z"}]},"meta":{}}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "txn_1", Status: "partially_refunded", Amount: 1000, Currency: "EUR",
				RefundedAmount: 500, Created: created, APIVersion: "v9"}},
		{"paddle charged back", "paddle", "txn_1", "/transactions/txn_1", "include=adjustments",
			`{"data":{"id":"txn_1","status":"completed","currency_code":"EUR","created_at":"2025-01-02T03:04:05Z",` +
				`"details":{"totals":{"total":"1000","grand_total":"1000","credit":"0"}},"adjustments":[` +
				`{"id":"adj_1","action":"chargeback","transaction_id":"txn_1","status":"approved","totals":{"total":"1000"},"created_at":"2025-01-03T00:00:00Z"}]},"meta":{}}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "txn_1", Status: "charged_back", Amount: 1000, Currency: "EUR",
				Created: created, APIVersion: "v9"}},
		{"paddle charged back again after a won chargeback", "paddle", "txn_1", "/transactions/txn_1", "include=adjustments",
			`{"data":{"id":"txn_1","status":"completed","currency_code":"EUR","created_at":"2025-01-02T03:04:05Z",` +
				`"details":{"totals":{"total":"1000","grand_total":"1000","credit":"0"}},"adjustments":[` +
				`{"id":"adj_1","action":"chargeback","transaction_id":"txn_1","status":"reversed","totals":{"total":"1000"},"created_at":"2025-01-03T00:00:00Z"},` +
				`{"id":"adj_2","action":"chargeback_reverse","transaction_id":"txn_1","status":"approved","totals":{"total":"1000"},"created_at":"2025-02-03T00:00:00Z"},` +
				`{"id":"adj_3","action":"chargeback","transaction_id":"txn_1","status":"approved","totals":{"total":"1000"},"created_at":"2025-03-03T00:00:00Z"}]},"meta":{}}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "txn_1", Status: "charged_back", Amount: 1000, Currency: "EUR",
				Created: created, APIVersion: "v9"}},
		{"paddle chargeback won by a reversal alone", "paddle", "txn_1", "/transactions/txn_1", "include=adjustments",
			`{"data":{"id":"txn_1","status":"completed","currency_code":"EUR","created_at":"2025-01-02T03:04:05Z",` +
				`"details":{"totals":{"total":"1000","grand_total":"1000","credit":"0"}},"adjustments":[` +
				`{"id":"adj_1","action":"chargeback","transaction_id":"txn_1","status":"approved","totals":{"total":"1000"},"created_at":"2025-01-03T00:00:00Z"},` +
				`{"id":"adj_2","action":"chargeback_reverse","transaction_id":"txn_1","status":"approved","totals":{"total":"1000"},"created_at":"2025-02-03T00:00:00Z"}]},"meta":{}}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "txn_1", Status: "succeeded", Amount: 1000, Currency: "EUR",
				Created: created, APIVersion: "v9"}},
		{"paddle not paid", "paddle", "txn_1", "/transactions/txn_1", "include=adjustments",
			`{"data":{"id":"txn_1","status":"billed","currency_code":"EUR","created_at":"2025-01-02T03:04:05Z"},"meta":{}}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "txn_1", Status: "billed", Currency: "EUR", Created: created, APIVersion: "v9"}},
		{"billete", "billete", "pay_1", "/payments/pay_1", "",
			`{"id":"pay_1","object":"payment","status":"refunded","amount":1000,"currency":"eur","refunded_amount":1000,"created_at":"2025-01-02T03:04:05Z"}`,
			adapter.Object{Kind: adapter.KindPayment, Ref: "pay_1", Status: "refunded", Amount: 1000, Currency: "EUR",
				RefundedAmount: 1000, Created: created, APIVersion: "v9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			header := map[string]string{"stripe": "Stripe-Version", "paddle": "Paddle-Version", "billete": "Billete-Version"}[tc.provider]
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(header, "v9")
				if r.URL.Path == tc.path && r.URL.RawQuery == tc.query {
					w.Write([]byte(tc.body))
					return
				}
				http.Error(w, `{"error":{}}`, http.StatusNotFound)
			}))
			t.Cleanup(api.Close)
			c, err := provider.NewClient(tc.provider, adapter.ClientConfig{BaseURL: api.URL + "/", Key: "key"})
			if err != nil {
				t.Fatal(err)
			}
			g := c.(adapter.ObjectGetter)
			ctx := context.Background()
			got, err := g.GetObject(ctx, adapter.KindPayment, tc.ref)
			if err != nil || got != tc.want {
				t.Fatalf("GetObject = %+v, %v; want %+v", got, err, tc.want)
			}
			var ae *adapter.APIError
			_, err = g.GetObject(ctx, adapter.KindPayment, tc.ref+"nope")
			if !errors.Is(err, payhook.ErrNotFound) || !errors.As(err, &ae) || ae.URL != api.URL+tc.path+"nope" {
				t.Errorf("a 404: %v; want payhook.ErrNotFound naming %s", err, api.URL+tc.path+"nope")
			}
		})
	}
}
