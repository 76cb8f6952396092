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
			if _, err := g.GetObject(ctx, adapter.KindPayment, "sub_1"); !errors.Is(err, payhook.ErrInvalid) {
				t.Errorf("a payment: %v; want payhook.ErrInvalid", err)
			}
		})
	}
}
