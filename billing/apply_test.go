package billing_test

import (
	"context"
	"slices"
	"testing"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

// Facts are applied the same whether passed as values or pointers; a nil
// pointer is an error.
func TestFactPointers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		p := pay("pay_1", "ord_1", 100, "USD")
		out := apply(t, db, &billing.Captured{Payment: p}, &billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_1"},
			&billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 10, Currency: "USD"},
			&billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_1"},
			&billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1"},
			&billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_1"},
			&billing.Settled{InvoiceRef: "inv_1", Amount: 5, Currency: "BTC", ChainRef: "tx_1", At: t0},
			&billing.Subscription{Ref: "sub_1", Status: "ended", UpdatedAt: t0})
		want := []string{"capture:pay_1", "refund:re_1", "refund_failed:re_1", "chargeback:dp_1", "chargeback_won:dp_1", "settle:inv_1"}
		if !slices.Equal(out.Posted, want) || !slices.Equal(out.OrdersPaid, []string{"ord_1"}) ||
			!slices.Equal(out.EndedClaimed, []string{"sub_1"}) {
			t.Fatalf("outcome = %+v", out)
		}
		if _, err := applyTx(context.Background(), db, (*billing.Captured)(nil)); err == nil {
			t.Fatal("nil *Captured: no error")
		}
	})
}
