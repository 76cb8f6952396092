package stripe_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/stripemock"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/stripe"
)

// Every route and expansion Fetch asks of Stripe exists in Stripe's own
// API, as stripe-mock (its emulator, validating against Stripe's OpenAPI
// specification) serves it: each answer is the object of the event's
// type, of the id asked for, with the pinned Stripe-Version.
func TestClientFetchAgainstStripeMock(t *testing.T) {
	t.Parallel()
	c := &stripe.Client{BaseURL: stripemock.Start(t), Key: "sk_test_123", APIVersion: "2024-06-20"}
	for _, tc := range []struct{ typ, id, object string }{
		{"checkout.session.completed", "cs_test_1", "checkout.session"},
		{"payment_intent.succeeded", "pi_1", "payment_intent"},
		{"charge.succeeded", "ch_1", "charge"},
		{"charge.refunded", "ch_1", "charge"},
		{"refund.updated", "re_1", "refund"},
		{"charge.dispute.created", "dp_1", "dispute"},
		{"customer.subscription.updated", "sub_1", "subscription"},
	} {
		b, err := c.Fetch(context.Background(), &payhook.Event{EventID: "evt_1", Type: tc.typ,
			Payload: []byte(`{"data":{"object":{"id":"` + tc.id + `"}}}`)})
		var got struct{ ID, Object string }
		if err == nil {
			err = json.Unmarshal(b, &got)
		}
		if err != nil || got.ID != tc.id || got.Object != tc.object {
			t.Errorf("%s: Fetch = %.200s, %v; want the %s %s", tc.typ, b, err, tc.object, tc.id)
		}
	}
}

// The refund list's expansion (expand[]=data.charge.refunds: each
// refund's charge, with the charge's refunds) is one Stripe's API
// serves: stripe-mock answers it with the charge expanded.
func TestListRefundsAgainstStripeMock(t *testing.T) {
	t.Parallel()
	c := &stripe.Client{BaseURL: stripemock.Start(t), Key: "sk_test_123", APIVersion: "2024-06-20"}
	page, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: adapter.KindRefund})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) == 0 || page.Objects[0].PaymentRef == "" {
		t.Errorf("stripe-mock's refunds listed as %+v; want its refund, with its charge", page.Objects)
	}
}
