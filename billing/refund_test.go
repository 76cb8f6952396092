package billing_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

func TestRefunds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 10000, "USD")})
		r1 := billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 3000, Currency: "USD", At: t0}
		apply(t, db, r1)
		apply(t, db, r1, r1)
		if p := payment(t, db, "pay_1"); p.Status != "partially_refunded" || p.RefundedAmount != 3000 {
			t.Fatalf("after a partial refund applied 3 times: %+v; want partially_refunded 3000", p)
		}
		if k := kept(t, db, "USD"); k != 7000 {
			t.Fatalf("kept = %d; want 7000", k)
		}
		// Mismatches are errors, not "not seen yet".
		for _, f := range []billing.Refunded{
			{PaymentRef: "pay_1", RefundRef: "re_x", Amount: 100, Currency: "EUR"},
			{PaymentRef: "pay_1", RefundRef: "re_x", Amount: 0, Currency: "USD"},
			{Payment: &billing.Payment{Ref: "pay_1", Amount: 10000, Currency: "EUR"}, RefundRef: "re_x", Amount: 1, Currency: "EUR"},
		} {
			if _, err := applyTx(ctx, db, f); err == nil || errors.Is(err, billing.ErrNotSeenYet) {
				t.Errorf("refund %+v: %v; want an error that is not ErrNotSeenYet", f, err)
			}
		}
		out := apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_2", Amount: 7000, Currency: "USD"})
		if !slices.Equal(out.Posted, []string{"refund:re_2"}) {
			t.Fatalf("outcome = %+v", out)
		}
		if p := payment(t, db, "pay_1"); p.Status != "refunded" || p.RefundedAmount != 10000 {
			t.Fatalf("after the full refund: %+v; want refunded 10000", p)
		}
		// A payment in its final state: the same refund again is a success
		// with no change.
		before := postingKeys(t, db)
		out = apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_2", Amount: 7000, Currency: "USD"})
		if len(out.Posted) != 0 || !slices.Equal(postingKeys(t, db), before) {
			t.Fatalf("refund of a refunded payment changed something: %+v", out)
		}
		if k := kept(t, db, "USD"); k != 0 {
			t.Fatalf("kept = %d; want 0", k)
		}
		// Each refund reverses the capture.
		ps := postings(t, db, src, "pay_1")
		for _, p := range ps[1:] {
			if p.ReversesID != ps[0].ID {
				t.Errorf("posting %s reverses %d; want the capture %d", p.FactKey, p.ReversesID, ps[0].ID)
			}
		}
	})
}

func TestRefundNotSeenYet(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		r := billing.Refunded{PaymentRef: "pay_9", RefundRef: "re_9", Amount: 100, Currency: "USD"}
		cb := billing.ChargedBack{PaymentRef: "pay_9", DisputeRef: "dp_9"}
		for _, f := range []billing.Fact{r, cb, billing.ChargebackWon{PaymentRef: "pay_9", DisputeRef: "dp_9"}} {
			// Commit whatever Apply wrote, to see that it wrote nothing.
			tx, err := billing.Begin(ctx, db, t0)
			if err != nil {
				t.Fatal(err)
			}
			err = billing.Apply(ctx, tx, src, []billing.Fact{f})
			if !errors.Is(err, billing.ErrNotSeenYet) {
				t.Errorf("%T of an unknown payment: %v; want ErrNotSeenYet", f, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := db.SQL.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM payhook_payments) + (SELECT COUNT(*) FROM payhook_ledger_postings)
			+ (SELECT COUNT(*) FROM payhook_orders)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("facts not seen yet wrote %d rows", n)
		}
		// With the payment in the payload it is placed (and captured).
		p := pay("pay_9", "ord_9", 500, "USD")
		r.Payment = &p
		apply(t, db, r)
		if got := payment(t, db, "pay_9"); got.Status != "partially_refunded" || got.RefundedAmount != 100 {
			t.Fatalf("payment = %+v", got)
		}
		if o := order(t, db, "ord_9"); o.Status != "paid" {
			t.Fatalf("order = %+v", o)
		}
		if got := postingKeys(t, db); !slices.Equal(got, []string{"capture:pay_9", "refund:re_9"}) {
			t.Fatalf("postings = %v", got)
		}
	})
}

func TestRefundFailed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 10000, "EUR")})

		// Reported succeeded, then failed: the failure reverses it, once.
		apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 4000, Currency: "EUR"})
		fail := billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_1"}
		out := apply(t, db, fail)
		if !slices.Equal(out.Posted, []string{"refund_failed:re_1"}) {
			t.Fatalf("outcome = %+v", out)
		}
		apply(t, db, fail, fail)
		if p := payment(t, db, "pay_1"); p.Status != "succeeded" || p.RefundedAmount != 0 {
			t.Fatalf("after the failed refund: %+v; want succeeded 0", p)
		}
		if k := kept(t, db, "EUR"); k != 10000 {
			t.Fatalf("kept = %d; want 10000", k)
		}
		ps := postings(t, db, src, "pay_1")
		if len(ps) != 3 || ps[2].ReversesID != ps[1].ID || ps[2].Amount != 4000 ||
			fmt.Sprint(ps[2].Entries) != "[{provider_receivable EUR 4000} {revenue EUR -4000}]" {
			t.Fatalf("postings = %+v; want the failure reversing the refund exactly", ps)
		}

		// Failed first: the success reported afterwards moves nothing.
		apply(t, db, billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_2"})
		apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_2", Amount: 2000, Currency: "EUR"})
		if p := payment(t, db, "pay_1"); p.Status != "succeeded" || p.RefundedAmount != 0 {
			t.Fatalf("after a failure reported before its refund: %+v; want succeeded 0", p)
		}

		// A payment never seen: success, no money moves.
		apply(t, db, billing.RefundFailed{PaymentRef: "pay_unknown", RefundRef: "re_3"})
		if k := kept(t, db, "EUR"); k != 10000 {
			t.Fatalf("kept = %d; want 10000", k)
		}
		// A refund of another payment is a contradiction.
		if _, err := applyTx(ctx, db, billing.RefundFailed{PaymentRef: "pay_other", RefundRef: "re_1"}); err == nil {
			t.Fatal("failure of a refund of another payment: no error")
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
