package billing_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// rowCount counts the billing rows, to see that a refused fact wrote
// nothing.
func rowCount(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRowContext(context.Background(), `SELECT
		(SELECT COUNT(*) FROM payhook_payments) + (SELECT COUNT(*) FROM payhook_ledger_postings) +
		(SELECT COUNT(*) FROM payhook_orders) + (SELECT COUNT(*) FROM payhook_subscriptions) +
		(SELECT COUNT(*) FROM payhook_alerts)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Facts that can never apply are malformed (final at once in the job
// queue), write nothing, and never reach the database: amounts beyond
// ±MaxAmount (near-int64 amounts wrapped the ledger before), references
// PostgreSQL text cannot hold, times outside payhook's bounds.
func TestMalformedFacts(t *testing.T) {
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		fact billing.Fact
	}{
		{"capture beyond MaxAmount", billing.Captured{Payment: pay("pay_1", "", payhook.MaxAmount+1, "USD")}},
		{"capture near int64", billing.Captured{Payment: pay("pay_1", "", math.MaxInt64, "USD")}},
		{"negative capture", billing.Captured{Payment: pay("pay_1", "", -1, "USD")}},
		{"capture without currency", billing.Captured{Payment: pay("pay_1", "", 1, "")}},
		{"capture ref with NUL", billing.Captured{Payment: pay("pi_x\x00y", "", 1, "USD")}},
		{"order id with U+202E", billing.Captured{Payment: pay("pay_1", "ord\u202e1", 1, "USD")}},
		{"currency with a newline", billing.Captured{Payment: pay("pay_1", "", 1, "US\nD")}},
		{"capture time out of range", billing.Captured{Payment: billing.Payment{Ref: "pay_1", Amount: 1, Currency: "USD", CapturedAt: far}}},
		{"refund of zero", billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 0, Currency: "USD"}},
		{"refund beyond MaxAmount", billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: math.MaxInt64, Currency: "USD"}},
		{"refund without ref", billing.Refunded{PaymentRef: "pay_1", Amount: 1, Currency: "USD"}},
		{"refund ref with NUL", billing.Refunded{PaymentRef: "pay_1", RefundRef: "re\x00", Amount: 1, Currency: "USD"}},
		{"refund failure ref with a control", billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re\x07"}},
		{"dispute ref with NUL", billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp\x00"}},
		{"negative dispute amount", billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1", Amount: -5}},
		{"won without dispute or reversal", billing.ChargebackWon{PaymentRef: "pay_1"}},
		{"reversal without payment", billing.ChargebackWon{ReversalRef: "adj_1"}},
		{"order paid by NUL", billing.OrderPaid{OrderID: "ord_1", PaymentRef: "p\x00"}},
		{"settlement of zero", billing.Settled{InvoiceRef: "inv_1", Amount: 0, Currency: "BTC", ChainRef: "tx_1"}},
		{"chain ref too long", billing.Settled{InvoiceRef: "inv_1", Amount: 1, Currency: "BTC", ChainRef: strings.Repeat("a", 256)}},
		{"subscription ref with NUL", billing.Subscription{Ref: "sub\x00", Status: "active", UpdatedAt: t0}},
		{"customer with NUL", billing.Subscription{Ref: "sub_1", Customer: "c\x00", Status: "active", UpdatedAt: t0}},
		{"unknown subscription status", billing.Subscription{Ref: "sub_1", Status: "trialing", UpdatedAt: t0}},
		{"subscription time out of range", billing.Subscription{Ref: "sub_1", Status: "active", UpdatedAt: far}},
		{"nil fact", nil},
		{"nil pointer", (*billing.Captured)(nil)},
	}
	for _, c := range cases {
		if err := billing.Check(c.fact); !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("Check(%s) = %v; want ErrMalformed", c.name, err)
		}
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		for _, c := range cases {
			if _, err := applyTx(ctx, db, c.fact); !errors.Is(err, payhook.ErrMalformed) {
				t.Errorf("apply %s: %v; want ErrMalformed", c.name, err)
			}
		}
		if n := rowCount(t, db); n != 0 {
			t.Fatalf("refused facts wrote %d rows", n)
		}
		// The largest amounts add up: two of them, refunded, balance.
		apply(t, db, billing.Captured{Payment: pay("pay_big1", "", payhook.MaxAmount, "USD")},
			billing.Captured{Payment: pay("pay_big2", "", payhook.MaxAmount, "USD")},
			billing.Refunded{PaymentRef: "pay_big1", RefundRef: "re_big", Amount: payhook.MaxAmount, Currency: "USD"})
		if k := kept(t, db, "USD"); k != payhook.MaxAmount {
			t.Fatalf("kept = %d; want %d", k, payhook.MaxAmount)
		}
	})
}
