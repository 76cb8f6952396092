package billing_test

import (
	"context"
	"errors"
	"math"
	"slices"
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

// A 1000 payment refunded 600 + 600 ends refunded 1000 with nothing left,
// not refunded 1200 with a receivable of -200, and says so once.
func TestRefundExceedsPayment(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 1000, "USD")})
		apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_a", Amount: 600, Currency: "USD"})
		second := billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_b", Amount: 600, Currency: "USD"}
		out := apply(t, db, second)
		apply(t, db, second)
		if !slices.Equal(out.Alerts, []string{"refund_exceeds_payment:pay_1"}) {
			t.Fatalf("outcome = %+v; want refund_exceeds_payment", out)
		}
		if p := payment(t, db, "pay_1"); p.Status != "refunded" || p.RefundedAmount != 1000 {
			t.Fatalf("payment = %+v; want refunded 1000", p)
		}
		bal := balances(t, db)
		if bal["USD"][billing.AccountReceivable] != 0 {
			t.Fatalf("receivable = %d; want 0", bal["USD"][billing.AccountReceivable])
		}
		ps := postings(t, db, src, "pay_1")
		if last := ps[len(ps)-1]; last.FactKey != "refund:re_b" || last.Amount != -400 || last.RequestedAmount != 600 {
			t.Fatalf("second refund = %+v; want -400 of 600 asked", last)
		}
		if as := alerts(t, db); len(as) != 1 || as[0].Count != 1 {
			t.Fatalf("alerts = %+v; want one, counted once", as)
		}
		// The first refund failed after all: the second one's 600 stand.
		apply(t, db, billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_a"})
		if p := payment(t, db, "pay_1"); p.Status != "partially_refunded" || p.RefundedAmount != 600 {
			t.Fatalf("after the failure: %+v; want partially_refunded 600", p)
		}
		if k := kept(t, db, "USD"); k != 400 {
			t.Fatalf("kept = %d; want 400", k)
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

// A refund in another currency than its payment is malformed: it fails
// at once instead of being retried for weeks.
func TestRefundCurrencyMismatchIsMalformed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 1000, "USD")})
		_, err := applyTx(ctx, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 100, Currency: "EUR"})
		if !errors.Is(err, payhook.ErrMalformed) || !strings.Contains(err.Error(), `currency "EUR" differs`) {
			t.Fatalf("refund in EUR of a USD payment: %v; want ErrMalformed naming the currencies", err)
		}
		if got := postingKeys(t, db); !slices.Equal(got, []string{"capture:pay_1"}) {
			t.Fatalf("postings = %v", got)
		}
	})
}

// A won dispute of a crypto payment is a success with one alert; it was
// "not seen yet" forever.
func TestCryptoChargebackWon(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		apply(t, db, billing.Settled{InvoiceRef: "inv_1", Amount: 500, Currency: "BTC", ChainRef: "tx_1", At: t0})
		apply(t, db, billing.ChargedBack{PaymentRef: "inv_1", DisputeRef: "dp_1"})
		won := billing.ChargebackWon{PaymentRef: "inv_1", DisputeRef: "dp_1"}
		out := apply(t, db, won)
		apply(t, db, won)
		if !slices.Equal(out.Alerts, []string{"payment_kind_mismatch:inv_1"}) {
			t.Fatalf("outcome = %+v; want payment_kind_mismatch", out)
		}
		if k := kept(t, db, "BTC"); k != 500 {
			t.Fatalf("kept = %d; want 500", k)
		}
		// Of a payment not seen at all it still waits.
		if _, err := applyTx(context.Background(), db, billing.ChargebackWon{PaymentRef: "pay_x", DisputeRef: "dp_x"}); !errors.Is(err, billing.ErrNotSeenYet) {
			t.Fatalf("won dispute of an unknown payment: %v; want ErrNotSeenYet", err)
		}
	})
}

// A partial dispute takes its amount, not the whole payment.
func TestPartialDispute(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pi_1", "", 3000, "USD")})
		apply(t, db, billing.ChargedBack{PaymentRef: "pi_1", DisputeRef: "dp_1", Amount: 1000})
		if p := payment(t, db, "pi_1"); p.Status != "charged_back" {
			t.Fatalf("payment = %+v", p)
		}
		if k := kept(t, db, "USD"); k != 2000 {
			t.Fatalf("kept = %d after a dispute of 1000 of 3000; want 2000", k)
		}
		// A refund of the rest: the dispute and the refund never take
		// more than the payment.
		apply(t, db, billing.Refunded{PaymentRef: "pi_1", RefundRef: "re_1", Amount: 2500, Currency: "USD"})
		if k := kept(t, db, "USD"); k != 0 {
			t.Fatalf("kept = %d; want 0", k)
		}
		apply(t, db, billing.ChargebackWon{PaymentRef: "pi_1", DisputeRef: "dp_1"})
		if k := kept(t, db, "USD"); k != 500 {
			t.Fatalf("kept = %d after the win; want 500", k)
		}
		ps := postings(t, db, src, "pi_1")
		if ps[1].FactKey != "chargeback:dp_1" || ps[1].Amount != -1000 || ps[1].RequestedAmount != 1000 {
			t.Fatalf("chargeback posting = %+v; want -1000 of 1000", ps[1])
		}
	})
}

// Paddle reports a won dispute as a chargeback_reverse adjustment of its
// own, and marks the chargeback's adjustment reversed: either, or both in
// any order, win the chargeback once.
func TestChargebackReversal(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		rev := billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_1"}
		if _, err := applyTx(ctx, db, rev); !errors.Is(err, billing.ErrNotSeenYet) {
			t.Fatalf("reversal of an unknown payment: %v; want ErrNotSeenYet", err)
		}
		apply(t, db, billing.Captured{Payment: pay("txn_1", "", 2000, "USD")})
		if _, err := applyTx(ctx, db, rev); !errors.Is(err, billing.ErrNotSeenYet) {
			t.Fatalf("reversal before its chargeback: %v; want ErrNotSeenYet", err)
		}
		apply(t, db, billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_1"})
		out := apply(t, db, rev)
		apply(t, db, rev, billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_1"})
		if !slices.Equal(out.Posted, []string{"chargeback_won:adj_cb_1", "chargeback_reverse:adj_rev_1"}) {
			t.Fatalf("outcome = %+v", out)
		}
		if p := payment(t, db, "txn_1"); p.Status != "succeeded" {
			t.Fatalf("payment = %+v; want succeeded", p)
		}
		if k := kept(t, db, "USD"); k != 2000 {
			t.Fatalf("kept = %d; want 2000", k)
		}
		// A second chargeback, won by its own record first, then the
		// reversal: once.
		apply(t, db, billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_2"})
		apply(t, db, billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_2"})
		out = apply(t, db, billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_2"})
		if !slices.Equal(out.Posted, []string{"chargeback_reverse:adj_rev_2"}) {
			t.Fatalf("outcome = %+v; want only the reversal bound", out)
		}
		if k := kept(t, db, "USD"); k != 2000 {
			t.Fatalf("kept = %d; want 2000", k)
		}
		// A third reversal has no chargeback left to win.
		if _, err := applyTx(ctx, db, billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_3"}); !errors.Is(err, billing.ErrNotSeenYet) {
			t.Fatalf("a reversal too many: %v; want ErrNotSeenYet", err)
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

// TestBalancesBeyondInt64: a ledger whose balance no longer fits an int64
// (about 9,224 captures of the largest amount) makes Balances fail on both
// engines (SQLite's SUM: integer overflow; PostgreSQL's CAST: bigint out
// of range), never a wrapped or rounded total.
func TestBalancesBeyondInt64(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", payhook.MaxAmount, "USD")})
		var posting int64
		if err := db.SQL.QueryRowContext(ctx, `SELECT id FROM payhook_ledger_postings WHERE fact_key = 'capture:pay_1'`).Scan(&posting); err != nil {
			t.Fatal(err)
		}
		// What 9,224 more such captures would add, written straight in.
		for range 10 {
			if _, err := db.SQL.ExecContext(ctx, `INSERT INTO payhook_ledger_entries (posting_id, account, currency, amount)
				VALUES ($1, 'provider_receivable', 'USD', $2), ($1, 'revenue', 'USD', $3)`,
				posting, int64(1e18), int64(-1e18)); err != nil {
				t.Fatal(err)
			}
		}
		bal, err := billing.Balances(ctx, db)
		if err == nil || !strings.Contains(err.Error(), "ledger balances") {
			t.Errorf("Balances = %v, %v; want an error", bal, err)
		}
		// Leave the ledger as billing wrote it for the cleanup's checks.
		if _, err := db.SQL.ExecContext(ctx, `DELETE FROM payhook_ledger_entries WHERE posting_id = $1 AND amount IN ($2, $3)`,
			posting, int64(1e18), int64(-1e18)); err != nil {
			t.Fatal(err)
		}
	})
}
