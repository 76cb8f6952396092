package stripe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/stripe"
)

// TestListedChargesAreCaptures: reconciliation's charge list reads a
// charge as the mapping does: one only authorized (captured false, though
// Stripe's status says succeeded) is no payment, and a partially captured
// one is a payment of amount_captured, not of its authorization. Before,
// every authorization was reported missing here (its backfill then
// applied as a payment), and every partial capture of another amount.
func TestListedChargesAreCaptures(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"object":"list","has_more":false,"data":[
			{"id":"ch_auth","amount":1000,"amount_captured":0,"amount_refunded":0,"captured":false,"currency":"usd","status":"succeeded","payment_intent":null,"created":1700000000},
			{"id":"ch_part","amount":1000,"amount_captured":600,"amount_refunded":0,"captured":true,"currency":"usd","status":"succeeded","payment_intent":null,"created":1700000000}]}`))
	}))
	defer api.Close()
	c := &stripe.Client{BaseURL: api.URL, Key: "sk_test_x"}
	page, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: adapter.KindPayment})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 1 {
		t.Errorf("%d payments listed: %+v; want the partial capture only", len(page.Objects), page.Objects)
	}
	for _, o := range page.Objects {
		switch o.Ref {
		case "ch_auth":
			t.Errorf("an uncaptured authorization is listed as a payment: %+v", o)
		case "ch_part":
			if o.Amount != 600 {
				t.Errorf("a partial capture of 600 is listed with amount %d (its authorization)", o.Amount)
			}
		}
	}
}
