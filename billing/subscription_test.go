package billing_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

func TestSubscriptions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		snap := func(status, plan string, at int) billing.Subscription {
			return billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: plan, Status: status,
				CurrentPeriodEnd: t0.Add(time.Duration(at) * 24 * time.Hour), UpdatedAt: t0.Add(time.Duration(at) * time.Minute)}
		}
		apply(t, db, snap("active", "pro", 2))
		apply(t, db, snap("active", "basic", 1)) // older: ignored
		got := subscription(t, db, "sub_1")
		if got.Plan != "pro" || !got.ProviderUpdatedAt.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("subscription = %+v; want the newer snapshot", got)
		}
		out := apply(t, db, snap("ended", "pro", 4))
		if !slices.Equal(out.EndedClaimed, []string{"sub_1"}) {
			t.Fatalf("outcome = %+v; want the end claimed", out)
		}
		for _, s := range []billing.Subscription{snap("ended", "pro", 4), snap("canceled", "pro", 3), snap("ended", "pro", 5)} {
			if out := apply(t, db, s); len(out.EndedClaimed) != 0 {
				t.Fatalf("end claimed again by %+v", s)
			}
		}
		got = subscription(t, db, "sub_1")
		if got.Status != "ended" || got.EndedAt.IsZero() || !got.ProviderUpdatedAt.Equal(t0.Add(5*time.Minute)) {
			t.Fatalf("subscription = %+v", got)
		}
		// An ended snapshot arriving first is claimed too, and older ones
		// do not bring the subscription back.
		out = apply(t, db, billing.Subscription{Ref: "sub_2", Status: "ended", UpdatedAt: t0.Add(time.Hour)})
		apply(t, db, billing.Subscription{Ref: "sub_2", Status: "active", UpdatedAt: t0})
		if !slices.Equal(out.EndedClaimed, []string{"sub_2"}) {
			t.Fatalf("outcome = %+v", out)
		}
		list, err := billing.ListSubscriptions(ctx, db, billing.SubscriptionFilter{Status: "ended"})
		if err != nil || len(list) != 2 {
			t.Fatalf("ListSubscriptions(ended) = %+v, %v", list, err)
		}
	})
}

// An update and a delete of one second (Stripe's whole seconds) reach
// the same state in either order, and status and ended_at always agree;
// ended_at is the provider's end, not when payhook heard of it.
func TestSubscriptionTies(t *testing.T) {
	at := t0.Add(time.Hour)
	ended := at.Add(-30 * time.Second)
	update := billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active", UpdatedAt: at}
	deleted := billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "ended", UpdatedAt: at, EndedAt: ended}
	canceled := billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "canceled", UpdatedAt: at}
	later := billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active", UpdatedAt: at.Add(time.Hour)}
	orders := [][]billing.Fact{
		{update, deleted}, {deleted, update}, {canceled, deleted, update}, {update, canceled, deleted},
		{deleted, later}, {later, deleted},
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		for _, facts := range orders {
			reset(t, db)
			claimed := 0
			for _, f := range facts {
				out := apply(t, db, f)
				claimed += len(out.EndedClaimed)
				s, err := billing.GetSubscription(ctx, db, src, "sub_1")
				if err != nil {
					t.Fatal(err)
				}
				if (s.Status == "ended") != !s.EndedAt.IsZero() {
					t.Fatalf("%v: after %+v: status %s with ended_at %v", facts, f, s.Status, s.EndedAt)
				}
			}
			s := subscription(t, db, "sub_1")
			if s.Status != "ended" || !s.EndedAt.Equal(ended) || claimed != 1 {
				t.Errorf("order %d: %s ended_at %v, claimed %d times; want ended at %v, claimed once",
					slices.IndexFunc(orders, func(o []billing.Fact) bool { return &o[0] == &facts[0] }), s.Status, s.EndedAt, claimed, ended)
			}
		}
	})
}
