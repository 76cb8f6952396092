package stripe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/stripe"
)

// A charge authorized for 1000 and captured for 600: Stripe refunds the
// other 400 itself at the capture, and the charge's amount_refunded
// counts that release. The payment payhook booked is 600 with nothing
// refunded (the mapping leaves the release out); the charge list must
// say so too, or every partial capture is a difference. Before, the
// release was listed as 400 refunded of the 600 captured.
func TestListedPartialCaptureRefunded(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"object":"list","has_more":false,"data":[
			{"id":"ch_release","amount":1000,"amount_captured":600,"amount_refunded":400,"captured":true,"currency":"usd","status":"succeeded","payment_intent":"pi_release","created":1700000000},
			{"id":"ch_more","amount":1000,"amount_captured":600,"amount_refunded":500,"captured":true,"currency":"usd","status":"succeeded","payment_intent":"pi_more","created":1700000000},
			{"id":"ch_all","amount":1000,"amount_captured":600,"amount_refunded":1000,"captured":true,"currency":"usd","status":"succeeded","payment_intent":"pi_all","created":1700000000},
			{"id":"ch_full","amount":1000,"amount_captured":1000,"amount_refunded":400,"captured":true,"currency":"usd","status":"succeeded","payment_intent":"pi_full","created":1700000000}]}`))
	}))
	defer api.Close()
	c := &stripe.Client{BaseURL: api.URL, Key: "sk_test_x"}
	page, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: adapter.KindPayment})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		amount, refunded int64
		status           string
	}{
		"pi_release": {600, 0, "succeeded"},
		"pi_more":    {600, 100, "partially_refunded"},
		"pi_all":     {600, 600, "refunded"},
		"pi_full":    {1000, 400, "partially_refunded"},
	}
	if len(page.Objects) != len(want) {
		t.Fatalf("%d payments listed: %+v; want %d", len(page.Objects), page.Objects, len(want))
	}
	for _, o := range page.Objects {
		w := want[o.Ref]
		if o.Amount != w.amount || o.RefundedAmount != w.refunded || o.Status != w.status {
			t.Errorf("%s listed as %d, %d refunded, %s; want %d, %d refunded, %s", o.Ref, o.Amount, o.RefundedAmount, o.Status, w.amount, w.refunded, w.status)
		}
	}
}
