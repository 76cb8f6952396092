package mapping_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store/storetest"
)

// TestPaddleRenewalDoesNotPayTheOrderAgain: Paddle copies a
// subscription's custom_data (copied from the checkout's transaction) to
// every transaction it creates from the subscription: renewals, upgrades,
// one-time charges (origin subscription_*). Such a transaction is a
// payment of the subscription, not of the checkout's order: captured,
// with no order, and no order_paid_twice alert each month.
func TestPaddleRenewalDoesNotPayTheOrderAgain(t *testing.T) {
	const first, renewal = "txn_01hv8wptq8987qeep44cyrewp9", "txn_01hywqfe6yxhxcsfb4ays8mqt3"
	renewed := editFixture(t, "paddle/transaction.completed.json", func(d map[string]any) {
		if d["origin"] != "subscription_recurring" {
			t.Fatalf("fixture origin %v; want subscription_recurring", d["origin"])
		}
		d["custom_data"] = map[string]any{"order_id": "ord_p1"}
	})
	facts, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt_renewal", OccurredAt: occurred, Payload: renewed})
	if err != nil {
		t.Fatal(err)
	}
	want := []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: renewal, Amount: 950, Currency: "GBP",
		CapturedAt: rfc(t, "2024-05-27T09:53:02.174288Z")}}}
	if !reflect.DeepEqual(facts, want) {
		t.Fatalf("a renewal carrying the subscription's custom_data:\n got  %s\n want %s", show(facts), show(want))
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := storetest.Migrated(t, dbURL)
		if err := applyFixture(ctx, t, db, "paddle/transaction.paid.json"); err != nil {
			t.Fatal(err)
		}
		tx, err := billing.Begin(ctx, db, occurred)
		if err != nil {
			t.Fatal(err)
		}
		if err := billing.Apply(ctx, tx, "src", facts); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		st := readFixtureState(ctx, t, db)
		if want := map[string]string{"ord_p1": "paid by " + first}; !reflect.DeepEqual(st.Orders, want) {
			t.Errorf("orders %v; want %v", st.Orders, want)
		}
		if st.Payments[renewal] != "950 GBP refunded 0 succeeded" {
			t.Errorf("renewal %q; want captured", st.Payments[renewal])
		}
		alerts, err := billing.ListAlerts(ctx, db, billing.AlertFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			t.Errorf("alert %s %s: %s", a.Kind, a.Subject, a.Message)
		}
	})
}

// TestPaddleIntegerOrderID: Paddle's custom_data is any JSON object the
// application sets (Paddle.js customData: {order_id: 123}); an order id
// written as a JSON integer is that order, in its digits. It failed the
// transaction as malformed: a payment made and never captured.
func TestPaddleIntegerOrderID(t *testing.T) {
	const txn = "txn_01hv8wptq8987qeep44cyrewp9"
	at := rfc(t, "2024-04-12T10:18:48.294633Z")
	for _, tc := range []struct {
		id    any
		order string
	}{{123, "123"}, {int64(9007199254740993), "9007199254740993"}, {"ord_p1", "ord_p1"}} {
		payload := editFixture(t, "paddle/transaction.paid.json", func(d map[string]any) {
			d["custom_data"] = map[string]any{"order_id": tc.id}
		})
		facts, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: payload})
		if err != nil {
			t.Fatalf("order_id %v: %v", tc.id, err)
		}
		want := []billing.Fact{
			billing.Captured{Payment: billing.Payment{Ref: txn, OrderID: tc.order, Amount: 65215, Currency: "USD", CapturedAt: at}},
			billing.OrderPaid{OrderID: tc.order, PaymentRef: txn, At: at},
		}
		if !reflect.DeepEqual(facts, want) {
			t.Errorf("order_id %v:\n got  %s\n want %s", tc.id, show(facts), show(want))
		}
	}
	for _, id := range []any{1.5, true, map[string]any{"id": "x"}} {
		payload := editFixture(t, "paddle/transaction.paid.json", func(d map[string]any) {
			d["custom_data"] = map[string]any{"order_id": id}
		})
		if _, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: payload}); !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("order_id %v: %v; want malformed", id, err)
		}
	}
}

// TestPaddleProrationCreditTransaction: since March 2024 a prorated
// downgrade is a transaction of its own whose totals are negative (Paddle
// changelog "Improvements to how proration is processed"): total below
// zero, the credit in credit_to_balance, grand_total 0. It is a capture
// of nothing, not a malformed event, and pays no order.
func TestPaddleProrationCreditTransaction(t *testing.T) {
	payload := editFixture(t, "paddle/transaction.completed.json", func(d map[string]any) {
		d["origin"] = "subscription_update"
		d["custom_data"] = map[string]any{"order_id": "ord_p1"}
		totals := d["details"].(map[string]any)["totals"].(map[string]any)
		totals["subtotal"], totals["tax"], totals["total"] = "-792", "-158", "-950"
		totals["grand_total"], totals["credit_to_balance"], totals["earnings"], totals["fee"] = "0", "950", "0", "0"
	})
	facts, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	want := []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "txn_01hywqfe6yxhxcsfb4ays8mqt3", Amount: 0,
		Currency: "GBP", CapturedAt: rfc(t, "2024-05-27T09:53:02.174288Z")}}}
	if !reflect.DeepEqual(facts, want) {
		t.Fatalf("a proration credit:\n got  %s\n want %s", show(facts), show(want))
	}
}
