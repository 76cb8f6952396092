package mapping_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store/storetest"
)

// editFixture reads fixture file, lets edit change its data.object
// (Stripe) or data (Paddle), and returns the payload.
func editFixture(t *testing.T, file string, edit func(obj map[string]any)) []byte {
	t.Helper()
	root, d := fixtureData(t, file)
	if o, ok := d["object"].(map[string]any); ok {
		d = o
	}
	edit(d)
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fixtureData decodes fixture file, and returns it and its data.
func fixtureData(t *testing.T, file string) (root, data map[string]any) {
	t.Helper()
	_, b := readFixture(t, file)
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	return root, root["data"].(map[string]any)
}

// uncapturedChargeRefunded is Stripe's charge.refunded for a Charges-API
// charge authorized for 100 (capture=false) and never captured: Stripe
// released the authorization itself after 7 days, by a refund it makes
// (reason expired_uncaptured_charge, stripe-go's
// RefundReasonExpiredUncapturedCharge); cancelling a PaymentIntent in
// requires_capture does the same. The charge says captured false,
// amount_captured 0. The order in its metadata was never paid.
func uncapturedChargeRefunded(t *testing.T) []byte {
	return editFixture(t, "stripe/charge.refunded.charges_api.json", func(o map[string]any) {
		o["captured"] = false
		o["amount_captured"] = 0
		o["metadata"] = map[string]any{"order_id": "ord_uncaptured"}
		refunds := o["refunds"].(map[string]any)["data"].([]any)
		refunds[0].(map[string]any)["reason"] = "expired_uncaptured_charge"
	})
}

// TestUncapturedChargeRefundedMovesNothing: the refunds of a charge never
// captured release an authorization and map to nothing (its snapshot fell
// back to the authorized amount: a captured payment of 100 and its order
// paid, for money never taken).
func TestUncapturedChargeRefundedMovesNothing(t *testing.T) {
	facts, err := mapping.Facts("stripe", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: uncapturedChargeRefunded(t)})
	if err != nil {
		t.Fatal(err)
	}
	if facts != nil {
		t.Fatalf("an authorization released uncaptured moves no money; got facts %s", show(facts))
	}
}

// paddleAdjustmentOf returns the data of fixture file with its
// transaction_id and status set.
func paddleAdjustmentOf(t *testing.T, file, txn, status string) map[string]any {
	t.Helper()
	_, d := fixtureData(t, file)
	d["transaction_id"] = txn
	d["status"] = status
	return d
}

// TestPaddleFetchedTransactionAdjustmentOrder: a Paddle transaction
// fetched after its chargeback was won lists the chargeback (marked
// reversed) and its chargeback_reverse adjustment, in either order; with
// the reversal first, the event failed as not seen yet on every attempt,
// its capture with it.
func TestPaddleFetchedTransactionAdjustmentOrder(t *testing.T) {
	const txn = "txn_01hywqfe6yxhxcsfb4ays8mqt3"
	for _, order := range []string{"oldest first", "newest first"} {
		t.Run(order, func(t *testing.T) {
			cb := paddleAdjustmentOf(t, "paddle/adjustment.created.chargeback.json", txn, "reversed")
			rev := paddleAdjustmentOf(t, "paddle/adjustment.created.chargeback_reverse.json", txn, "approved")
			list := []any{cb, rev}
			if order == "newest first" {
				list = []any{rev, cb}
			}
			payload := editFixture(t, "paddle/transaction.completed.json", func(d map[string]any) { d["adjustments"] = list })
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := storetest.Migrated(t, dbURL)
				facts, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: payload})
				if err != nil {
					t.Fatal(err)
				}
				tx, err := billing.Begin(ctx, db, occurred)
				if err != nil {
					t.Fatal(err)
				}
				if err := billing.Apply(ctx, tx, "src", facts); err != nil {
					tx.Rollback()
					t.Fatalf("apply %s: %v", show(facts), err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				st := readFixtureState(ctx, t, db)
				if st.Receivable["GBP"] != 950 {
					t.Errorf("receivable %v, want GBP 950 (captured, charged back, won)", st.Receivable)
				}
			})
		})
	}
}

// TestExpiredUncapturedRefundIsIgnored: the refund Stripe makes to release
// an authorization that expired uncaptured moves no money: ignored, not
// retried as a refund of a payment not seen yet until it failed for good.
func TestExpiredUncapturedRefundIsIgnored(t *testing.T) {
	payload := editFixture(t, "stripe/refund.created.json", func(o map[string]any) {
		o["reason"] = "expired_uncaptured_charge"
	})
	r, err := mapping.Read("stripe", &payhook.Event{EventID: "evt_1", OccurredAt: occurred, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if r.Facts != nil {
		t.Fatalf("a released authorization moves no money; got %s", show(r.Facts))
	}
}
