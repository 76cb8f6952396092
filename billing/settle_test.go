package billing_test

import (
	"context"
	"slices"
	"testing"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

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

// TestCryptoRejectedThenSettled: an invoice first reported settled with a
// chain reference another invoice holds (rejected), then with a fresh
// one, is credited by the fresh one, as it is in the other order; with a
// second taken reference it stays rejected, one more alert. The money
// does not depend on the order of the deliveries.
func TestCryptoRejectedThenSettled(t *testing.T) {
	inv1 := billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_1", Amount: 5000, Currency: "BTC", ChainRef: "tx_a", At: t0}
	inv9 := billing.Settled{InvoiceRef: "inv_9", Amount: 1, Currency: "BTC", ChainRef: "tx_b", At: t0}
	reused := billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_2", Amount: 7000, Currency: "BTC", ChainRef: "tx_a", At: t0}
	taken := billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_2", Amount: 7000, Currency: "BTC", ChainRef: "tx_b", At: t0}
	fresh := billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_2", Amount: 7000, Currency: "BTC", ChainRef: "tx_x", At: t0}
	for _, c := range []struct {
		name   string
		facts  []billing.Fact
		alerts []string
	}{
		{"fresh first", []billing.Fact{inv1, inv9, fresh, reused, taken},
			[]string{"crypto_second_reference:inv_2", "crypto_second_reference:inv_2"}},
		{"reused first", []billing.Fact{inv1, inv9, reused, fresh, taken},
			[]string{"crypto_reference_reused:tx_a", "crypto_second_reference:inv_2"}},
		{"reused, taken, fresh", []billing.Fact{inv1, inv9, reused, taken, fresh},
			[]string{"crypto_reference_reused:tx_a", "crypto_reference_reused:tx_b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				db := openDB(t, dbURL)
				var raised []string
				for _, f := range c.facts {
					out := apply(t, db, f)
					raised = append(raised, out.Alerts...)
					if again := apply(t, db, f); len(again.Posted) != 0 || len(again.Alerts) != 0 {
						t.Fatalf("%+v again: %+v; want nothing new", f, again)
					}
				}
				if !slices.Equal(raised, c.alerts) {
					t.Errorf("alerts %v; want %v", raised, c.alerts)
				}
				if k := kept(t, db, "BTC"); k != 12001 {
					t.Errorf("kept = %d; want 12001 (inv_1 by tx_a, inv_9 by tx_b, inv_2 by tx_x)", k)
				}
				if p := payment(t, db, "inv_2"); p.Status != "settled" || p.ChainRef != "tx_x" || p.Amount != 7000 {
					t.Errorf("inv_2 = %+v; want settled by tx_x", p)
				}
				if o := order(t, db, "ord_2"); o.Status != "paid" || o.PaidBy != "inv_2" {
					t.Errorf("ord_2 = %+v; want paid by inv_2", o)
				}
				if got := postingKeys(t, db); !slices.Equal(got, []string{"settle:inv_1", "settle:inv_2", "settle:inv_9"}) {
					t.Errorf("postings = %v", got)
				}
			})
		})
	}
}
