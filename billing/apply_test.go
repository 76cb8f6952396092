package billing_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

func pay(ref, orderID string, amount int64, currency string) billing.Payment {
	return billing.Payment{Ref: ref, OrderID: orderID, Amount: amount, Currency: currency, CapturedAt: t0.Add(-time.Hour)}
}

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

func TestOrders(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		// The checkout's order fact before the payment.
		out := apply(t, db, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_1"})
		apply(t, db, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_1"})
		apply(t, db, billing.Captured{Payment: pay("pay_1", "ord_1", 100, "USD")})
		if !slices.Equal(out.OrdersPaid, []string{"ord_1"}) || len(alerts(t, db)) != 0 {
			t.Fatalf("outcome %+v, alerts %+v", out, alerts(t, db))
		}
		// Another payment for the same order.
		out = apply(t, db, billing.Captured{Payment: pay("pay_2", "ord_1", 100, "USD")})
		apply(t, db, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_2"})
		if o := order(t, db, "ord_1"); o.Status != "paid" || o.PaidBy != "pay_1" {
			t.Fatalf("order = %+v; want paid by pay_1", o)
		}
		// Raised once for pay_2, although both its capture and its order
		// fact tried to pay the order, and not again by a replay: an
		// acknowledged alert stays acknowledged.
		as := alerts(t, db)
		if len(as) != 1 || as[0].Kind != billing.AlertOrderPaidTwice || as[0].Subject != "ord_1" || as[0].Count != 1 {
			t.Fatalf("alerts = %+v; want order_paid_twice ord_1 raised once", as)
		}
		if !slices.Equal(out.Alerts, []string{"order_paid_twice:ord_1"}) {
			t.Fatalf("outcome = %+v", out)
		}
		if err := billing.AckAlert(ctx, db, as[0].ID); err != nil {
			t.Fatal(err)
		}
		out = apply(t, db, billing.Captured{Payment: pay("pay_2", "ord_1", 100, "USD")}, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_2"})
		if as := alerts(t, db); len(out.Alerts) != 0 || as[0].Count != 1 || !as[0].Acknowledged {
			t.Fatalf("replay: outcome %+v, alerts %+v; want nothing raised", out, as)
		}
		// A third payment is new: counted.
		apply(t, db, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_9"})
		if as := alerts(t, db); as[0].Count != 2 || as[0].Acknowledged {
			t.Fatalf("third payment: alerts %+v; want count 2, unacknowledged", as)
		}
		// An order heard of but not paid stays pending.
		p := pay("pay_3", "ord_3", 100, "USD")
		apply(t, db, billing.Refunded{Payment: &p, RefundRef: "re_3", Amount: 100, Currency: "USD"})
		if o := order(t, db, "ord_3"); o.Status != "paid" {
			t.Fatalf("ord_3 = %+v", o)
		}
		os, err := billing.ListOrders(ctx, db, billing.OrderFilter{Status: "paid"})
		if err != nil || len(os) != 2 {
			t.Fatalf("ListOrders(paid) = %+v, %v", os, err)
		}
	})
}

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

func TestCrypto(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		inv1 := billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_1", Amount: 5000, Currency: "BTC", ChainRef: "tx_a", At: t0}
		inv2 := billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_2", Amount: 7000, Currency: "BTC", ChainRef: "tx_a", At: t0}
		out := apply(t, db, inv1)
		apply(t, db, inv1, inv1)
		if !slices.Equal(out.Posted, []string{"settle:inv_1"}) || !slices.Equal(out.OrdersPaid, []string{"ord_1"}) {
			t.Fatalf("outcome = %+v", out)
		}
		out = apply(t, db, inv2)
		apply(t, db, inv2)
		if len(out.Posted) != 0 || !slices.Equal(out.Alerts, []string{"crypto_reference_reused:tx_a"}) {
			t.Fatalf("reused reference outcome = %+v", out)
		}
		if p := payment(t, db, "inv_1"); p.Status != "settled" || p.ChainRef != "tx_a" || p.Kind != "crypto" {
			t.Fatalf("inv_1 = %+v", p)
		}
		if p := payment(t, db, "inv_2"); p.Status != "rejected" {
			t.Fatalf("inv_2 = %+v; want rejected", p)
		}
		if k := kept(t, db, "BTC"); k != 5000 {
			t.Fatalf("kept = %d; want one credit of 5000", k)
		}
		as := alerts(t, db)
		if len(as) != 1 || as[0].Kind != billing.AlertCryptoReferenceReused || as[0].Subject != "tx_a" || as[0].Count != 1 {
			t.Fatalf("alerts = %+v; want one crypto_reference_reused tx_a", as)
		}
		if o := order(t, db, "ord_2"); o.Status != "pending" {
			t.Fatalf("ord_2 = %+v; want pending", o)
		}

		// A second settlement for an order already paid: credited (the
		// coins are in the wallet), one alert.
		inv3 := billing.Settled{InvoiceRef: "inv_3", OrderID: "ord_1", Amount: 5000, Currency: "BTC", ChainRef: "tx_b", At: t0}
		out = apply(t, db, inv3)
		apply(t, db, inv3)
		if !slices.Equal(out.Posted, []string{"settle:inv_3"}) || !slices.Equal(out.Alerts, []string{"order_paid_twice:ord_1"}) {
			t.Fatalf("order paid twice outcome = %+v", out)
		}
		if p := payment(t, db, "inv_3"); p.Status != "settled" {
			t.Fatalf("inv_3 = %+v; want settled", p)
		}
		if o := order(t, db, "ord_1"); o.PaidBy != "inv_1" {
			t.Fatalf("ord_1 = %+v; want paid by inv_1", o)
		}
		// Its chain reference is bound now: another invoice reusing it is
		// rejected.
		out = apply(t, db, billing.Settled{InvoiceRef: "inv_5", Amount: 10, Currency: "BTC", ChainRef: "tx_b", At: t0})
		if !slices.Equal(out.Alerts, []string{"crypto_reference_reused:tx_b"}) {
			t.Fatalf("reuse of tx_b: outcome %+v", out)
		}
		apply(t, db, billing.Settled{InvoiceRef: "inv_4", Amount: 10, Currency: "BTC", ChainRef: "tx_d", At: t0})
		if k := kept(t, db, "BTC"); k != 10010 {
			t.Fatalf("kept = %d; want 10010", k)
		}
		// The same invoice with another chain reference: alert, no credit;
		// its replay raises nothing more.
		second := billing.Settled{InvoiceRef: "inv_4", Amount: 10, Currency: "BTC", ChainRef: "tx_c", At: t0}
		out = apply(t, db, second)
		if again := apply(t, db, second, second); !slices.Equal(out.Alerts, []string{"crypto_second_reference:inv_4"}) ||
			len(again.Alerts) != 0 {
			t.Fatalf("second reference: outcomes %+v then %+v; want one alert", out, again)
		}
		if k := kept(t, db, "BTC"); k != 10010 {
			t.Fatalf("kept = %d; want 10010", k)
		}
		for _, a := range alerts(t, db) {
			if a.Count != 1 {
				t.Errorf("alert %s:%s counted %d; want 1", a.Kind, a.Subject, a.Count)
			}
		}
		crypto, err := billing.ListPayments(ctx, db, billing.PaymentFilter{Kind: "crypto", Status: "rejected"})
		if err != nil || len(crypto) != 2 {
			t.Fatalf("rejected crypto payments = %+v, %v", crypto, err)
		}
		if got := postingKeys(t, db); !slices.Equal(got, []string{"settle:inv_1", "settle:inv_3", "settle:inv_4"}) {
			t.Fatalf("postings = %v", got)
		}
		// The same invoice and chain reference again, saying another amount
		// or currency: the first stands, one alert each, nothing moves.
		for _, c := range []struct {
			amount   int64
			currency string
		}{{11, "BTC"}, {10, "LTC"}} {
			other := billing.Settled{InvoiceRef: "inv_4", Amount: c.amount, Currency: c.currency, ChainRef: "tx_d", At: t0}
			out = apply(t, db, other)
			if again := apply(t, db, other); !slices.Equal(out.Alerts, []string{"payment_mismatch:inv_4"}) || len(again.Alerts) != 0 {
				t.Fatalf("settlement of %d %s: outcomes %+v then %+v; want one payment_mismatch", c.amount, c.currency, out, again)
			}
		}
		if k := kept(t, db, "BTC"); k != 10010 {
			t.Fatalf("kept = %d; want 10010", k)
		}
		if p := payment(t, db, "inv_4"); p.Amount != 10 || p.Currency != "BTC" || p.Status != "settled" {
			t.Fatalf("inv_4 = %+v; want its first settlement", p)
		}
	})
}

func TestAlertsAndReads(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		raise(t, db, billing.AlertEventFailed, "evt_1", "boom", t0)
		raise(t, db, billing.AlertEventFailed, "evt_1", "boom again", t0.Add(time.Minute))
		as := alerts(t, db)
		if len(as) != 1 || as[0].Count != 2 || as[0].Message != "boom again" || !as[0].FirstSeen.Equal(t0) ||
			!as[0].LastSeen.Equal(t0.Add(time.Minute)) || as[0].Acknowledged {
			t.Fatalf("alerts = %+v", as)
		}
		if err := billing.AckAlert(ctx, db, as[0].ID); err != nil {
			t.Fatal(err)
		}
		if un := listAlerts(t, db, billing.AlertFilter{Unacknowledged: true}); len(un) != 0 {
			t.Fatalf("unacknowledged = %+v", un)
		}
		if as := alerts(t, db); !as[0].Acknowledged {
			t.Fatalf("alert not acknowledged: %+v", as[0])
		}
		raise(t, db, billing.AlertEventFailed, "evt_1", "boom", t0.Add(2*time.Minute))
		if un := listAlerts(t, db, billing.AlertFilter{Unacknowledged: true, Kind: billing.AlertEventFailed}); len(un) != 1 || un[0].Count != 3 {
			t.Fatalf("raised again: %+v; want unacknowledged, count 3", un)
		}
		if err := billing.AckAlert(ctx, db, 999); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("AckAlert(999) = %v; want ErrNotFound", err)
		}
		if _, err := billing.GetPayment(ctx, db, src, "nope"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetPayment = %v; want ErrNotFound", err)
		}
		if _, err := billing.GetOrder(ctx, db, src, "nope"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetOrder = %v; want ErrNotFound", err)
		}
		if _, err := billing.GetSubscription(ctx, db, src, "nope"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetSubscription = %v; want ErrNotFound", err)
		}
		// Scoped by source.
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 1, "USD")})
		if _, err := billing.GetPayment(ctx, db, "other", "pay_1"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetPayment(other source) = %v; want ErrNotFound", err)
		}
	})
}

// Orders belong to their source: the same order id paid in a test source
// and in a live one is two paid orders, no alert, nothing rejected.
func TestOrdersScopedBySource(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		applySource(t, db, "stripe-test", billing.Captured{Payment: pay("pi_test", "ord_1", 100, "USD")},
			billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pi_test"})
		out := applySource(t, db, "crypto-live",
			billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_1", Amount: 500, Currency: "BTC", ChainRef: "tx_1", At: t0})
		if !slices.Equal(out.OrdersPaid, []string{"ord_1"}) || len(out.Alerts) != 0 {
			t.Fatalf("live settlement: outcome %+v; want ord_1 paid, no alert", out)
		}
		if p, err := billing.GetPayment(ctx, db, "crypto-live", "inv_1"); err != nil || p.Status != "settled" {
			t.Fatalf("inv_1 = %+v, %v; want settled", p, err)
		}
		for source, by := range map[string]string{"stripe-test": "pi_test", "crypto-live": "inv_1"} {
			o, err := billing.GetOrder(ctx, db, source, "ord_1")
			if err != nil || o.Source != source || o.Status != "paid" || o.PaidBy != by {
				t.Errorf("order ord_1 of %s = %+v, %v; want paid by %s", source, o, err, by)
			}
		}
		if _, err := billing.GetOrder(ctx, db, "other", "ord_1"); !errors.Is(err, payhook.ErrNotFound) {
			t.Errorf("GetOrder(other source) = %v; want ErrNotFound", err)
		}
		if os, err := billing.ListOrders(ctx, db, billing.OrderFilter{Source: "stripe-test"}); err != nil || len(os) != 1 ||
			os[0].Source != "stripe-test" {
			t.Errorf("ListOrders(stripe-test) = %+v, %v", os, err)
		}
		if as := alerts(t, db); len(as) != 0 {
			t.Errorf("alerts = %+v; want none", as)
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

// Every posting's amount is what its entries move on the receivable side,
// also when that is not the amount the fact names.
func TestPostingAmounts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 100, "USD")})
		apply(t, db, billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1"})
		apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 30, Currency: "USD"})
		apply(t, db, billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_1"})
		apply(t, db, billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_1"})
		apply(t, db, billing.Settled{InvoiceRef: "inv_1", Amount: 500, Currency: "BTC", ChainRef: "tx_1", At: t0})
		ps, err := billing.ListPostings(ctx, db, src, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%s %+d/%d", p.FactKey, p.Amount, p.RequestedAmount))
		}
		want := []string{"capture:pay_1 +100/100", "chargeback:dp_1 -100/100", "refund:re_1 +0/30",
			"chargeback_won:dp_1 +70/100", "refund_failed:re_1 +30/30", "settle:inv_1 +500/500"}
		if !slices.Equal(got, want) {
			t.Fatalf("postings (key amount/requested):\n got %q\nwant %q", got, want)
		}
		if p := payment(t, db, "pay_1"); p.Status != "succeeded" || p.RefundedAmount != 0 {
			t.Fatalf("payment = %+v", p)
		}
		if k := kept(t, db, "USD"); k != 100 {
			t.Fatalf("kept = %d; want 100", k)
		}
		// checkLedger (at cleanup) checks amount = entries for every posting.
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

// TestOrderPaidNeedsItsPayment: an OrderPaid naming a stored payment pays
// the order only if that payment is fiat and records no order or this
// one; else the order stays pending and order_payment_mismatch is raised
// once. An OrderPaid whose capture hit a crypto invoice is skipped.
func TestOrderPaidNeedsItsPayment(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pi_1", "ord_1", 1000, "USD")}, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pi_1", At: t0})
		apply(t, db, billing.Captured{Payment: pay("pi_2", "", 1000, "USD")})
		apply(t, db, billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_3", Amount: 5, Currency: "BTC", ChainRef: "tx_1", At: t0})
		cases := []struct {
			name   string
			facts  []billing.Fact
			order  string
			paidBy string // "" for pending
			alerts []string
		}{
			{"a payment of another order", []billing.Fact{
				billing.Captured{Payment: pay("pi_1", "ord_2", 1000, "USD")},
				billing.OrderPaid{OrderID: "ord_2", PaymentRef: "pi_1", At: t0},
			}, "ord_2", "", []string{"order_payment_mismatch:ord_2"}},
			{"an OrderPaid alone naming a payment of another order", []billing.Fact{
				billing.OrderPaid{OrderID: "ord_5", PaymentRef: "pi_1", At: t0},
			}, "ord_5", "", []string{"order_payment_mismatch:ord_5"}},
			{"a crypto invoice named by OrderPaid", []billing.Fact{
				billing.OrderPaid{OrderID: "ord_6", PaymentRef: "inv_1", At: t0},
			}, "ord_6", "", []string{"order_payment_mismatch:ord_6"}},
			{"a capture of a crypto invoice: its OrderPaid skipped", []billing.Fact{
				billing.Captured{Payment: pay("inv_1", "ord_4", 999999, "USD")},
				billing.OrderPaid{OrderID: "ord_4", PaymentRef: "inv_1", At: t0},
			}, "-", "", []string{"payment_kind_mismatch:inv_1"}},
			{"a payment stored without an order", []billing.Fact{
				billing.OrderPaid{OrderID: "ord_7", PaymentRef: "pi_2", At: t0},
			}, "ord_7", "pi_2", nil},
			{"a reference that is no stored payment", []billing.Fact{
				billing.OrderPaid{OrderID: "ord_8", PaymentRef: "cs_8", At: t0},
			}, "ord_8", "cs_8", nil},
		}
		for _, c := range cases {
			out := apply(t, db, c.facts...)
			again := apply(t, db, c.facts...)
			if !slices.Equal(out.Alerts, c.alerts) || len(again.Alerts) != 0 {
				t.Errorf("%s: alerts %v then %v; want %v once", c.name, out.Alerts, again.Alerts, c.alerts)
			}
			if c.order == "-" {
				continue // skipped: no order to look at
			}
			o := order(t, db, c.order)
			if c.paidBy == "" && (o.Status != "pending" || o.PaidBy != "") {
				t.Errorf("%s: %s = %+v; want pending", c.name, c.order, o)
			}
			if c.paidBy != "" && (o.Status != "paid" || o.PaidBy != c.paidBy) {
				t.Errorf("%s: %s = %+v; want paid by %s", c.name, c.order, o, c.paidBy)
			}
		}
		if o := order(t, db, "ord_1"); o.PaidBy != "pi_1" {
			t.Errorf("ord_1 = %+v; want paid by pi_1", o)
		}
		if o, err := billing.GetOrder(context.Background(), db, src, "ord_4"); err == nil {
			t.Errorf("ord_4 = %+v; want none (its OrderPaid skipped)", o)
		}
		if p := payment(t, db, "pi_1"); p.OrderID != "ord_1" {
			t.Errorf("pi_1 = %+v; want its first order", p)
		}
		checkLedger(t, db)
	})
}
