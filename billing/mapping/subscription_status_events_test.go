package mapping_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store/storetest"
)

// paddleVariant is the Paddle fixture file with event_type typ and, in
// data, the given fields replaced.
func paddleVariant(t *testing.T, file, typ string, data map[string]any) []byte {
	t.Helper()
	_, payload := readFixture(t, file)
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var ev map[string]any
	if err := dec.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	ev["event_type"] = typ
	for k, v := range data {
		ev["data"].(map[string]any)[k] = v
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Paddle tells a subscription's status changes in events of their own
// (paddle-go-sdk's event types: subscription.activated, .past_due,
// .paused, .resumed, .trialing, and .imported for one brought in from
// elsewhere), each carrying the subscription entity as subscription.updated
// does: each is the snapshot it carries, not an event to ignore.
func TestPaddleSubscriptionStatusEvents(t *testing.T) {
	t.Parallel()
	const file = "paddle/subscription.updated.json"
	_, payload := readFixture(t, file)
	base, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt_base", OccurredAt: occurred, Payload: payload})
	if err != nil || len(base) != 1 {
		t.Fatalf("%s: %v, %v", file, base, err)
	}
	for typ, status := range map[string]string{
		"subscription.activated": "active", "subscription.trialing": "trialing", "subscription.resumed": "active",
		"subscription.imported": "active", "subscription.past_due": "past_due", "subscription.paused": "paused",
	} {
		got, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt_" + typ, OccurredAt: occurred,
			Payload: paddleVariant(t, file, typ, map[string]any{"status": status})})
		want := base[0].(billing.Subscription)
		want.Status = map[string]string{"trialing": "active"}[status]
		if want.Status == "" {
			want.Status = status
		}
		if err != nil || !reflect.DeepEqual(got, []billing.Fact{want}) {
			t.Errorf("%s (status %s): %s, %v; want %s", typ, status, show(got), err, show([]billing.Fact{want}))
		}
	}

	// Applied: a subscription active, then past due later.
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := storetest.Migrated(t, dbURL)
		later := "2024-04-13T10:49:38.771Z"
		for _, p := range [][]byte{payload, paddleVariant(t, file, "subscription.past_due",
			map[string]any{"status": "past_due", "updated_at": later})} {
			facts, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt", OccurredAt: occurred, Payload: p})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := billing.Begin(ctx, db, occurred)
			if err != nil {
				t.Fatal(err)
			}
			if err := billing.Apply(ctx, tx, "src", facts); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		s, err := billing.GetSubscription(ctx, db, "src", "sub_01hv8x29kz0t586xy6zn1a62ny")
		if err != nil {
			t.Fatal(err)
		}
		if at, _ := time.Parse(time.RFC3339Nano, later); s.Status != "past_due" || !s.ProviderUpdatedAt.Equal(at) {
			t.Fatalf("subscription %s at %v; want past_due at %s (subscription.past_due applied)", s.Status, s.ProviderUpdatedAt, later)
		}
	})
}

// TestStripeSubscriptionPausedResumed: Stripe's customer.subscription.paused
// and .resumed carry the subscription object as .updated does (stripe-go's
// event types): each is the snapshot it carries, as the README's
// customer.subscription.* says, not an event to ignore.
func TestStripeSubscriptionPausedResumed(t *testing.T) {
	t.Parallel()
	const file = "stripe/customer.subscription.created.json"
	_, payload := readFixture(t, file)
	base, err := mapping.Facts("stripe", &payhook.Event{EventID: "evt_base", OccurredAt: occurred, Payload: payload})
	if err != nil || len(base) != 1 {
		t.Fatalf("%s: %v, %v", file, base, err)
	}
	for typ, status := range map[string]string{"customer.subscription.paused": "paused", "customer.subscription.resumed": "active"} {
		var ev map[string]any
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		ev["type"] = typ
		ev["data"].(map[string]any)["object"].(map[string]any)["status"] = status
		p, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mapping.Facts("stripe", &payhook.Event{EventID: "evt_" + typ, OccurredAt: occurred, Payload: p})
		want := base[0].(billing.Subscription)
		want.Status = status
		if err != nil || !reflect.DeepEqual(got, []billing.Fact{want}) {
			t.Errorf("%s: %s, %v; want %s", typ, show(got), err, show([]billing.Fact{want}))
		}
	}
}
