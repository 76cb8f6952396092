package billing_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

func TestCapturedOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		p1 := pay("pay_1", "ord_1", 10000, "USD")
		out := apply(t, db, billing.Captured{Payment: p1})
		if !slices.Equal(out.Posted, []string{"capture:pay_1"}) || !slices.Equal(out.OrdersPaid, []string{"ord_1"}) {
			t.Fatalf("first capture: outcome %+v; want capture:pay_1 posted and ord_1 paid", out)
		}
		out = apply(t, db, billing.Captured{Payment: p1}, &billing.Captured{Payment: p1})
		if len(out.Posted)+len(out.OrdersPaid)+len(out.Alerts) != 0 {
			t.Fatalf("duplicate capture: outcome %+v; want nothing", out)
		}
		p := payment(t, db, "pay_1")
		if p.Kind != "fiat" || p.Status != "succeeded" || p.Amount != 10000 || p.Currency != "USD" || p.OrderID != "ord_1" ||
			!p.CapturedAt.Equal(t0.Add(-time.Hour)) {
			t.Fatalf("payment = %+v", p)
		}
		if got := postingKeys(t, db); !slices.Equal(got, []string{"capture:pay_1"}) {
			t.Fatalf("postings = %v; want one capture", got)
		}
		if o := order(t, db, "ord_1"); o.Status != "paid" || o.PaidBy != "pay_1" {
			t.Fatalf("order = %+v; want paid by pay_1", o)
		}
		bal := balances(t, db)
		if bal["USD"][billing.AccountReceivable] != 10000 || bal["USD"][billing.AccountRevenue] != -10000 {
			t.Fatalf("balances = %v", bal)
		}
		// The same ref with another amount: the first capture decides, the
		// event is a success (never retried) and the mismatch is an alert,
		// raised once however often the event is replayed.
		other := billing.Captured{Payment: pay("pay_1", "ord_1", 999, "USD")}
		out = apply(t, db, other)
		apply(t, db, other)
		if !slices.Equal(out.Alerts, []string{"payment_mismatch:pay_1"}) || len(out.Posted) != 0 {
			t.Fatalf("capture with another amount: outcome %+v; want one payment_mismatch alert", out)
		}
		if p := payment(t, db, "pay_1"); p.Amount != 10000 || p.Currency != "USD" {
			t.Fatalf("payment = %+v; want the first capture's 10000 USD", p)
		}
		if as := alerts(t, db); len(as) != 1 || as[0].Count != 1 {
			t.Fatalf("alerts = %+v; want payment_mismatch once", as)
		}
	})
}

// A capture of zero (a 100% discount) pays its order and posts nothing;
// it used to be an error, retried, and the order never paid.
func TestZeroCapture(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		out := apply(t, db, billing.Captured{Payment: pay("txn_free", "ord_free", 0, "EUR")},
			billing.OrderPaid{OrderID: "ord_free", PaymentRef: "txn_free"})
		if !slices.Equal(out.OrdersPaid, []string{"ord_free"}) || len(out.Posted) != 0 {
			t.Fatalf("outcome = %+v; want the order paid, nothing posted", out)
		}
		if o := order(t, db, "ord_free"); o.Status != "paid" || o.PaidBy != "txn_free" {
			t.Fatalf("order = %+v", o)
		}
		if p := payment(t, db, "txn_free"); p.Status != "succeeded" || p.Amount != 0 {
			t.Fatalf("payment = %+v; want succeeded, 0", p)
		}
		if got := postingKeys(t, db); len(got) != 0 {
			t.Fatalf("postings = %v; want none", got)
		}
		// A chargeback of it moves nothing and needs no capture posting.
		apply(t, db, billing.ChargedBack{PaymentRef: "txn_free", DisputeRef: "dp_free"})
		if k := kept(t, db, "EUR"); k != 0 {
			t.Fatalf("kept = %d", k)
		}
	})
}

// A snapshot that disagrees with the stored payment (Stripe's partial
// capture: payment_intent.succeeded books amount_received, the charge in
// charge.refunded says amount) does not fail the fact: the first capture
// decides, the refund applies, one alert says so.
func TestSnapshotDisagrees(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pi_1", "ord_1", 8000, "USD")})
		charge := pay("pi_1", "ord_1", 10000, "USD")
		r := billing.Refunded{Payment: &charge, PaymentRef: "pi_1", RefundRef: "re_1", Amount: 3000, Currency: "USD"}
		out := apply(t, db, r)
		apply(t, db, r)
		if !slices.Equal(out.Posted, []string{"refund:re_1"}) || !slices.Equal(out.Alerts, []string{"payment_mismatch:pi_1"}) {
			t.Fatalf("outcome = %+v; want the refund posted and one alert", out)
		}
		if p := payment(t, db, "pi_1"); p.Amount != 8000 || p.RefundedAmount != 3000 || p.Status != "partially_refunded" {
			t.Fatalf("payment = %+v; want 8000 refunded 3000", p)
		}
		if k := kept(t, db, "USD"); k != 5000 {
			t.Fatalf("kept = %d; want 5000", k)
		}
		cb := billing.ChargedBack{Payment: &charge, PaymentRef: "pi_1", DisputeRef: "dp_1"}
		apply(t, db, cb)
		if as := alerts(t, db); len(as) != 1 || as[0].Count != 1 {
			t.Fatalf("alerts = %+v; want payment_mismatch once for the same snapshot", as)
		}
		// The snapshot first: it places the payment, and the capture that
		// disagrees later is a success that changes nothing.
		snap := pay("pi_2", "", 10000, "EUR")
		apply(t, db, billing.Refunded{Payment: &snap, PaymentRef: "pi_2", RefundRef: "re_2", Amount: 1000, Currency: "EUR"})
		apply(t, db, billing.Captured{Payment: pay("pi_2", "", 8000, "EUR")})
		if p := payment(t, db, "pi_2"); p.Amount != 10000 || p.RefundedAmount != 1000 {
			t.Fatalf("pi_2 = %+v; want the first capture's 10000", p)
		}
		// A refund in another currency than its payment stays an error.
		if _, err := applyTx(ctx, db, billing.Refunded{PaymentRef: "pi_2", RefundRef: "re_3", Amount: 1, Currency: "USD"}); err == nil ||
			errors.Is(err, billing.ErrNotSeenYet) {
			t.Fatalf("refund in another currency: %v; want an error", err)
		}
	})
}

// A payment placed by a snapshot that did not know its order gets the
// order from the first snapshot that does, and that call pays the order.
func TestOrderIDFilledLater(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		snap := pay("pi_1", "", 5000, "USD")
		apply(t, db, billing.Refunded{Payment: &snap, PaymentRef: "pi_1", RefundRef: "re_1", Amount: 500, Currency: "USD"})
		if p := payment(t, db, "pi_1"); p.OrderID != "" {
			t.Fatalf("payment = %+v; want no order yet", p)
		}
		out := apply(t, db, billing.Captured{Payment: pay("pi_1", "ord_1", 5000, "USD")})
		if !slices.Equal(out.OrdersPaid, []string{"ord_1"}) || len(out.Posted) != 0 {
			t.Fatalf("outcome = %+v; want ord_1 paid, nothing posted", out)
		}
		if p := payment(t, db, "pi_1"); p.OrderID != "ord_1" {
			t.Fatalf("payment = %+v; want order ord_1", p)
		}
		// Known: another snapshot does not change it, nor pay another order.
		out = apply(t, db, billing.Captured{Payment: pay("pi_1", "ord_2", 5000, "USD")},
			billing.Captured{Payment: pay("pi_1", "", 5000, "USD")})
		if len(out.OrdersPaid)+len(out.Posted)+len(out.Alerts) != 0 {
			t.Fatalf("outcome = %+v; want nothing", out)
		}
		if p := payment(t, db, "pi_1"); p.OrderID != "ord_1" {
			t.Fatalf("payment = %+v; want order ord_1 kept", p)
		}
		if o := order(t, db, "ord_1"); o.Status != "paid" || o.PaidBy != "pi_1" {
			t.Fatalf("order = %+v", o)
		}
	})
}

// A crypto payment is final: refunds, chargebacks, failures and captures
// about it (and a settlement of a fiat payment) succeed, change nothing,
// and raise one alert each.
func TestEventsAboutAFinalPayment(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		apply(t, db, billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_1", Amount: 500, Currency: "BTC", ChainRef: "tx_1", At: t0})
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 100, "USD")})
		snap := pay("inv_1", "ord_9", 500, "BTC")
		facts := []billing.Fact{
			billing.Refunded{PaymentRef: "inv_1", RefundRef: "re_1", Amount: 100, Currency: "BTC"},
			&billing.Refunded{Payment: &snap, RefundRef: "re_2", Amount: 100, Currency: "BTC"},
			billing.ChargedBack{PaymentRef: "inv_1", DisputeRef: "dp_1"},
			billing.RefundFailed{PaymentRef: "inv_1", RefundRef: "re_3"},
			billing.Captured{Payment: pay("inv_1", "ord_9", 500, "BTC")},
			billing.Settled{InvoiceRef: "pay_1", Amount: 100, Currency: "BTC", ChainRef: "tx_2", At: t0},
		}
		for _, f := range facts {
			apply(t, db, f)
			apply(t, db, f) // a replay: nothing more
		}
		if got := postingKeys(t, db); !slices.Equal(got, []string{"capture:pay_1", "settle:inv_1"}) {
			t.Fatalf("postings = %v; want only the capture and the settlement", got)
		}
		if p := payment(t, db, "inv_1"); p.Status != "settled" || p.OrderID != "ord_1" || p.RefundedAmount != 0 {
			t.Fatalf("inv_1 = %+v", p)
		}
		if p := payment(t, db, "pay_1"); p.Kind != "fiat" || p.Status != "succeeded" {
			t.Fatalf("pay_1 = %+v", p)
		}
		if k := kept(t, db, "BTC"); k != 500 {
			t.Fatalf("kept BTC = %d; want 500", k)
		}
		as := alerts(t, db)
		counts := map[string]int{}
		for _, a := range as {
			counts[a.Kind+":"+a.Subject] = a.Count
		}
		if len(counts) != 2 || counts["payment_kind_mismatch:inv_1"] != 5 || counts["payment_kind_mismatch:pay_1"] != 1 {
			t.Fatalf("alerts = %v; want inv_1 once per fact (5) and pay_1 once", counts)
		}
	})
}
