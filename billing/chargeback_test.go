package billing_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

func TestChargeback(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 9000, "USD")})
		apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 1000, Currency: "USD"})
		won := billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_1"}
		if _, err := applyTx(ctx, db, won); !errors.Is(err, billing.ErrNotSeenYet) {
			t.Fatalf("won before its chargeback: %v; want ErrNotSeenYet", err)
		}
		cb := billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1"}
		apply(t, db, cb)
		apply(t, db, cb)
		if p := payment(t, db, "pay_1"); p.Status != "charged_back" || p.RefundedAmount != 1000 {
			t.Fatalf("after the chargeback: %+v", p)
		}
		if k := kept(t, db, "USD"); k != 0 {
			t.Fatalf("kept = %d after the chargeback; want 0", k)
		}
		ps := postings(t, db, src, "pay_1")
		if last := ps[len(ps)-1]; last.FactKey != "chargeback:dp_1" || last.Amount != -8000 || last.RequestedAmount != 9000 ||
			last.ReversesID != ps[0].ID {
			t.Fatalf("chargeback posting = %+v; want -8000 (of 9000) reversing the capture", last)
		}

		// A refund made before the dispute, reported after it: a success,
		// and the money stays at zero.
		apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_2", Amount: 500, Currency: "USD"})
		if p := payment(t, db, "pay_1"); p.Status != "charged_back" || p.RefundedAmount != 1500 {
			t.Fatalf("after a late refund: %+v", p)
		}
		if k := kept(t, db, "USD"); k != 0 {
			t.Fatalf("kept = %d after a late refund; want 0", k)
		}
		ps = postings(t, db, src, "pay_1")
		if last := ps[len(ps)-1]; last.FactKey != "refund:re_2" || last.Amount != 0 || last.RequestedAmount != 500 ||
			len(last.Entries) != 0 {
			t.Fatalf("late refund posting = %+v; want amount 0 (nothing moves), requested 500", last)
		}

		out := apply(t, db, won)
		apply(t, db, won)
		if !slices.Equal(out.Posted, []string{"chargeback_won:dp_1"}) {
			t.Fatalf("outcome = %+v", out)
		}
		if p := payment(t, db, "pay_1"); p.Status != "partially_refunded" {
			t.Fatalf("after the won chargeback: %+v; want partially_refunded", p)
		}
		if k := kept(t, db, "USD"); k != 7500 {
			t.Fatalf("kept = %d after the won chargeback; want 7500", k)
		}
		ps = postings(t, db, src, "pay_1")
		if last := ps[len(ps)-1]; last.ReversesID != ps[2].ID || last.Amount != 7500 {
			t.Fatalf("won posting = %+v; want +7500 reversing the chargeback %d", last, ps[2].ID)
		}

		// Charged back with the payment in the payload places it.
		p2 := pay("pay_2", "", 300, "USD")
		apply(t, db, billing.ChargedBack{Payment: &p2, DisputeRef: "dp_2"})
		if p := payment(t, db, "pay_2"); p.Status != "charged_back" {
			t.Fatalf("pay_2 = %+v", p)
		}
		// Final: a refund after everything is a success with no money moved.
		apply(t, db, billing.ChargedBack{PaymentRef: "pay_2", DisputeRef: "dp_2"})
		if k := kept(t, db, "USD"); k != 7500 {
			t.Fatalf("kept = %d; want 7500", k)
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

// TestAmbiguousChargebackReversal: two chargebacks of one payment for the
// same amount, the second won and reported both ways (its own record
// reversed, and a reversal that names no chargeback). Its own record
// first, the reversal binds to it and one chargeback stands. The reversal
// first, it cannot tell them apart and wins the oldest; the second's own
// record then wins that one too. payhook cannot know which one Paddle
// won, so it says so: chargeback_reversal_ambiguous, once, there only.
func TestAmbiguousChargebackReversal(t *testing.T) {
	cb1 := billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_1", Amount: 1000}
	cb2 := billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_2", Amount: 1000}
	won2 := billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_2"}
	rev2 := billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_2", Amount: 1000}
	for _, c := range []struct {
		name      string
		facts     []billing.Fact
		ambiguous bool
	}{
		{"own record first", []billing.Fact{cb1, cb2, won2, rev2}, false},
		{"reversal first", []billing.Fact{cb1, cb2, rev2, won2}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				db := openDB(t, dbURL)
				events := [][]billing.Fact{{billing.Captured{Payment: pay("txn_1", "", 3000, "USD")}}}
				for _, f := range c.facts {
					events = append(events, []billing.Fact{f}, []billing.Fact{f}) // each told twice
				}
				deliver(t, db, events)
				checkLedger(t, db)
				if got := kept(t, db, "USD"); !c.ambiguous && got != 2000 {
					t.Errorf("kept %d; want 2000 (adj_cb_1 stands, adj_cb_2 won)", got)
				}
				var raised []string
				for _, a := range alerts(t, db) {
					if a.Kind == billing.AlertChargebackReversalAmbiguous {
						raised = append(raised, fmt.Sprintf("%s %d", a.Subject, a.Count))
					}
				}
				if want := map[bool][]string{true: {"txn_1 1"}}[c.ambiguous]; !slices.Equal(raised, want) {
					t.Errorf("chargeback_reversal_ambiguous alerts %q; want %q", raised, want)
				}
			})
		})
	}
}
