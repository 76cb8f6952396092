package billing_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

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
