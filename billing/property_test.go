package billing_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// story is one business story as events, each a batch of facts applied in
// its own transaction, in the order the provider created them.
func story() [][]billing.Fact {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	p := func(ref, orderID string, amount int64, currency string) *billing.Payment {
		pp := pay(ref, orderID, amount, currency)
		return &pp
	}
	p1 := p("pay_1", "ord_1", 10000, "USD")
	p2 := p("pay_2", "ord_2", 5000, "EUR")
	p3 := p("pay_3", "ord_3", 8000, "USD")
	p4 := p("pay_4", "ord_4", 2000, "USD")
	p5 := p("pay_5", "ord_5", 6000, "EUR")
	p6 := p("pay_6", "ord_6", 9000, "USD")
	p7 := p("pay_7", "ord_7", 7000, "USD")
	p8 := p("pay_8", "ord_8", 4000, "USD")
	p8NoOrder := p("pay_8", "", 4000, "USD")
	p9 := p("pay_9", "", 1000, "USD")
	p10 := p("pay_10", "", 3000, "USD")
	p11 := p("pay_11", "ord_11z", 0, "USD")
	p12 := p("pay_12", "", 2500, "EUR")
	p13 := p("pay_13", "", 700, "EUR")
	sub := func(ref, customer, plan, status string, m int) billing.Fact {
		return billing.Subscription{Ref: ref, Customer: customer, Plan: plan, Status: status,
			CurrentPeriodEnd: at(m).Add(30 * 24 * time.Hour).Truncate(24 * time.Hour), UpdatedAt: at(m)}
	}
	refund := func(payRef, ref string, amount int64, currency string, payment *billing.Payment) billing.Fact {
		return billing.Refunded{Payment: payment, PaymentRef: payRef, RefundRef: ref, Amount: amount, Currency: currency}
	}
	return [][]billing.Fact{
		// Checkouts: the payment and its order, sometimes as two events.
		{billing.Captured{Payment: *p1}, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_1"}},
		{billing.Captured{Payment: *p2}},
		{billing.OrderPaid{OrderID: "ord_2", PaymentRef: "pay_2"}},
		{billing.Captured{Payment: *p3}, billing.OrderPaid{OrderID: "ord_3", PaymentRef: "pay_3"}},
		{billing.Captured{Payment: *p4}},
		{billing.Captured{Payment: *p5}},
		{billing.Captured{Payment: *p6}},
		// pay_1: refunded in two parts, one event carrying the payment.
		{refund("pay_1", "re_1a", 3000, "USD", nil)},
		{refund("pay_1", "re_1b", 7000, "USD", p1)},
		// pay_2: partly refunded, then charged back.
		{refund("pay_2", "re_2", 1000, "EUR", nil)},
		{billing.ChargedBack{PaymentRef: "pay_2", DisputeRef: "dp_2"}},
		// pay_3: charged back (with the payment) and won.
		{billing.ChargedBack{Payment: p3, PaymentRef: "pay_3", DisputeRef: "dp_3"}},
		{billing.ChargebackWon{PaymentRef: "pay_3", DisputeRef: "dp_3"}},
		// pay_4: a refund that failed (only the failure is reported).
		{billing.RefundFailed{PaymentRef: "pay_4", RefundRef: "re_4", At: at(5)}},
		// pay_5: a full refund reported succeeded, then failed, then a
		// partial one.
		{refund("pay_5", "re_5a", 6000, "EUR", nil)},
		{billing.RefundFailed{PaymentRef: "pay_5", RefundRef: "re_5a"}},
		{refund("pay_5", "re_5b", 2000, "EUR", p5)},
		// pay_6: refund, chargeback, won, refund again.
		{refund("pay_6", "re_6a", 500, "USD", nil)},
		{billing.ChargedBack{PaymentRef: "pay_6", DisputeRef: "dp_6"}},
		{billing.ChargebackWon{PaymentRef: "pay_6", DisputeRef: "dp_6"}},
		{refund("pay_6", "re_6b", 1000, "USD", nil)},
		// pay_7, Stripe-like on a modern API version: refund.created (no
		// payment in it) is sent before payment_intent.succeeded; it waits.
		{refund("pay_7", "re_7", 1500, "USD", nil)},
		{billing.Captured{Payment: *p7}, billing.OrderPaid{OrderID: "ord_7", PaymentRef: "pay_7"}},
		// pay_8: a refund whose payment snapshot does not know the order
		// (a charge without metadata) before the capture that does.
		{refund("pay_8", "re_8", 1000, "USD", p8NoOrder)},
		{billing.Captured{Payment: *p8}, billing.OrderPaid{OrderID: "ord_8", PaymentRef: "pay_8"}},
		// An order whose payment payhook never hears of.
		{billing.OrderPaid{OrderID: "ord_20", PaymentRef: "pay_20"}},
		// Subscriptions: created, upgraded, renewed, canceled, ended.
		{sub("sub_1", "cus_1", "basic", "active", 1)},
		{sub("sub_1", "cus_1", "pro", "active", 2)},
		{sub("sub_1", "cus_1", "pro", "active", 3)},
		{sub("sub_1", "cus_1", "pro", "canceled", 4)},
		{sub("sub_1", "cus_1", "pro", "ended", 5)},
		{sub("sub_2", "cus_2", "pro", "active", 1)},
		{sub("sub_2", "cus_2", "team", "active", 6)},
		{sub("sub_3", "cus_3", "basic", "active", 2)},
		{sub("sub_3", "cus_3", "basic", "canceled", 7)},
		// Crypto invoices settling once each.
		{billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_10", Amount: 12345, Currency: "BTC", ChainRef: "tx_1", At: at(8)}},
		{billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_11", Amount: 54321, Currency: "BTC", ChainRef: "tx_2", At: at(9)}},
		// A refund of a crypto invoice (final): a success, nothing moves, one alert.
		{refund("inv_1", "re_inv_1", 100, "BTC", nil)},
		// A won dispute of a crypto invoice: a success, one alert.
		{billing.ChargebackWon{PaymentRef: "inv_2", DisputeRef: "dp_inv_2"}},
		// pay_9: refunded 600 + 600 of 1000: at most 1000 taken, one alert.
		{billing.Captured{Payment: *p9}},
		{refund("pay_9", "re_9a", 600, "USD", nil)},
		{refund("pay_9", "re_9b", 600, "USD", nil)},
		// pay_10: a partial dispute (1000 of 3000) and a refund of 500.
		{billing.Captured{Payment: *p10}},
		{billing.ChargedBack{PaymentRef: "pay_10", DisputeRef: "dp_10", Amount: 1000}},
		{refund("pay_10", "re_10", 500, "USD", nil)},
		// pay_11: a capture of zero (100% discount) pays its order, posts nothing.
		{billing.Captured{Payment: *p11}},
		// pay_12: charged back and won, the win reported twice as Paddle
		// does: the chargeback's own record reversed, and a reversal of its own.
		{billing.Captured{Payment: *p12}},
		{billing.ChargedBack{PaymentRef: "pay_12", DisputeRef: "adj_cb_12"}},
		{billing.ChargebackWon{PaymentRef: "pay_12", DisputeRef: "adj_cb_12"}},
		{billing.ChargebackWon{PaymentRef: "pay_12", ReversalRef: "adj_rev_12"}},
		// pay_13: won by a reversal only.
		{billing.Captured{Payment: *p13}},
		{billing.ChargedBack{PaymentRef: "pay_13", DisputeRef: "adj_cb_13"}},
		{billing.ChargebackWon{PaymentRef: "pay_13", ReversalRef: "adj_rev_13"}},
		// Same-second ties (Stripe's whole seconds): an update and a delete
		// of one second, the delete with the provider's end time; two
		// updates of one second with different plans; an active and a
		// canceled snapshot of one second.
		{sub("sub_4", "cus_4", "pro", "active", 10)},
		{tie(sub("sub_4", "cus_4", "pro", "active", 11), "", time.Time{})},
		{tie(sub("sub_4", "cus_4", "pro", "ended", 11), "", at(11).Add(-time.Second))},
		{tie(sub("sub_5", "cus_5", "basic", "active", 12), "", time.Time{})},
		{tie(sub("sub_5", "cus_5", "pro", "active", 12), "", time.Time{})},
		{tie(sub("sub_6", "cus_6", "pro", "active", 13), "", time.Time{})},
		{tie(sub("sub_6", "cus_6", "pro", "canceled", 13), "", time.Time{})},
		{tie(sub("sub_6", "cus_6", "pro", "canceled", 13), "", time.Time{})},
		// Two ended snapshots of one second, alike but for the end: one
		// with the provider's end time, one falling back to its own time.
		{tie(sub("sub_8", "cus_8", "pro", "ended", 16), "", at(16).Add(-time.Minute))},
		{tie(sub("sub_8", "cus_8", "pro", "ended", 16), "", time.Time{})},
		// Two ended snapshots of one subscription: the newer one's end.
		{tie(sub("sub_7", "cus_7", "pro", "ended", 14), "", at(14))},
		{tie(sub("sub_7", "cus_7", "pro", "ended", 15), "", at(15))},
	}
}

// tie returns the subscription snapshot s with plan (when set) and the
// provider's end time endedAt.
func tie(s billing.Fact, plan string, endedAt time.Time) billing.Fact {
	sub := s.(billing.Subscription)
	if plan != "" {
		sub.Plan = plan
	}
	sub.EndedAt = endedAt
	return sub
}

// state is what the property test compares: everything but the times
// payhook chose itself.
type state struct {
	Payments      []billing.PaymentView
	Orders        []billing.OrderView
	Subscriptions []billing.SubscriptionView
	Balances      map[string]map[string]int64
	PostingKeys   []string
	// Alerts are "kind:subject xCount": a duplicate must not count again.
	Alerts []string
	// Once: how many times each downstream fact was reported by Outcome.
	Once map[string]int
}

func snapshot(t *testing.T, db *store.DB) state {
	t.Helper()
	ctx := context.Background()
	var s state
	var err error
	if s.Payments, err = billing.ListPayments(ctx, db, billing.PaymentFilter{Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	for i := range s.Payments {
		s.Payments[i].CreatedAt, s.Payments[i].UpdatedAt = time.Time{}, time.Time{}
	}
	sort.Slice(s.Payments, func(i, j int) bool {
		a, b := s.Payments[i], s.Payments[j]
		return a.Ref < b.Ref || (a.Ref == b.Ref && a.Source < b.Source)
	})
	if s.Orders, err = billing.ListOrders(ctx, db, billing.OrderFilter{Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	for i := range s.Orders {
		s.Orders[i].CreatedAt, s.Orders[i].PaidAt = time.Time{}, time.Time{}
	}
	sort.Slice(s.Orders, func(i, j int) bool {
		a, b := s.Orders[i], s.Orders[j]
		return a.OrderID < b.OrderID || (a.OrderID == b.OrderID && a.Source < b.Source)
	})
	if s.Subscriptions, err = billing.ListSubscriptions(ctx, db, billing.SubscriptionFilter{Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	for i := range s.Subscriptions {
		v := &s.Subscriptions[i]
		v.CreatedAt, v.UpdatedAt = time.Time{}, time.Time{}
		if (v.Status == "ended") != !v.EndedAt.IsZero() {
			t.Errorf("subscription %s is %s with ended_at %v", v.Ref, v.Status, v.EndedAt)
		}
	}
	sort.Slice(s.Subscriptions, func(i, j int) bool {
		a, b := s.Subscriptions[i], s.Subscriptions[j]
		return a.Ref < b.Ref || (a.Ref == b.Ref && a.Source < b.Source)
	})
	if s.Balances, err = billing.Balances(ctx, db); err != nil {
		t.Fatal(err)
	}
	s.PostingKeys = postingKeys(t, db)
	for _, a := range alerts(t, db) {
		if a.Kind+":"+a.Subject == "refund_exceeds_payment:pay_5" {
			// re_5a and re_5b exceed pay_5 only while re_5a's failure has
			// not arrived: the alert tells what was seen, in its order.
			continue
		}
		s.Alerts = append(s.Alerts, fmt.Sprintf("%s:%s x%d", a.Kind, a.Subject, a.Count))
	}
	sort.Strings(s.Alerts)
	return s
}

// deliver applies events of src in order, each in its own transaction,
// moving an event that fails with ErrNotSeenYet to the end of the queue as
// the job queue retries it later (oneByOne). It counts what Outcome
// reports.
func deliver(t *testing.T, db *store.DB, events [][]billing.Fact) map[string]int {
	t.Helper()
	evs := make([]billing.Facts, len(events))
	for i, ev := range events {
		evs[i] = billing.Facts{Source: src, Facts: ev}
	}
	once := outcomes{}
	oneByOne(t, db, nil, evs, once)
	return once
}

func reset(t *testing.T, db *store.DB) {
	t.Helper()
	for _, table := range []string{"payhook_ledger_entries", "payhook_ledger_postings", "payhook_payments",
		"payhook_subscriptions", "payhook_orders", "payhook_alerts", "payhook_alert_occurrences"} {
		if _, err := db.SQL.ExecContext(context.Background(), `DELETE FROM `+table); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeliveryOrderDoesNotMatter: random permutations of one business
// story, with random duplicates, reach the state of in-order delivery, and
// every downstream fact is reported exactly once.
func TestDeliveryOrderDoesNotMatter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		events := story()
		want := withOnce(func() state { return snapshot(t, db) }, deliver(t, db, events))
		checkLedger(t, db)
		for k, n := range want.Once {
			if n != 1 {
				t.Fatalf("in order: %s reported %d times", k, n)
			}
		}
		if !slices.Equal(want.Alerts, []string{"payment_kind_mismatch:inv_1 x1", "payment_kind_mismatch:inv_2 x1",
			"refund_exceeds_payment:pay_9 x1"}) {
			t.Fatalf("in-order alerts = %v", want.Alerts)
		}
		for _, p := range want.Payments {
			switch {
			case p.Ref == "pay_8" && p.OrderID != "ord_8":
				t.Fatalf("pay_8 = %+v; want the order its capture names", p)
			case p.Ref == "pay_9" && (p.Status != "refunded" || p.RefundedAmount != 1000):
				t.Fatalf("pay_9 = %+v; want refunded 1000", p)
			case p.Ref == "pay_10" && (p.Status != "charged_back" || p.RefundedAmount != 500):
				t.Fatalf("pay_10 = %+v; want charged_back, refunded 500", p)
			case (p.Ref == "pay_12" || p.Ref == "pay_13") && p.Status != "succeeded":
				t.Fatalf("%s = %+v; want succeeded (its dispute won)", p.Ref, p)
			}
		}
		for _, o := range want.Orders {
			if o.OrderID == "ord_11z" && (o.Status != "paid" || o.PaidBy != "pay_11") {
				t.Fatalf("ord_11z = %+v; want paid by pay_11", o)
			}
		}
		subs := map[string]billing.SubscriptionView{}
		for _, s := range want.Subscriptions {
			subs[s.Ref] = s
		}
		minute := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
		for ref, w := range map[string]string{
			"sub_1": "ended pro " + minute(5).Format(time.RFC3339),
			"sub_4": "ended pro " + minute(11).Add(-time.Second).Format(time.RFC3339),
			"sub_5": "active pro ", "sub_6": "canceled pro ",
			"sub_7": "ended pro " + minute(15).Format(time.RFC3339),
			"sub_8": "ended pro " + minute(15).Format(time.RFC3339),
		} {
			s := subs[ref]
			got := s.Status + " " + s.Plan + " "
			if !s.EndedAt.IsZero() {
				got += s.EndedAt.UTC().Format(time.RFC3339)
			}
			if got != w {
				t.Errorf("in order: %s = %q; want %q", ref, got, w)
			}
		}
		if want.Balances["USD"][billing.AccountReceivable] != 0+(8000)+(2000)+(9000-1500)+(7000-1500)+(4000-1000)+0+(3000-1000-500)+0 ||
			want.Balances["EUR"][billing.AccountReceivable] != 0+(6000-2000)+2500+700 ||
			want.Balances["BTC"][billing.AccountCryptoWallet] != 12345+54321 {
			t.Fatalf("in-order balances = %v", want.Balances)
		}
		for seed := range uint64(30) {
			reset(t, db)
			rng := rand.New(rand.NewPCG(seed, 42))
			perm := append([][]billing.Fact(nil), events...)
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			for _, ev := range events {
				if rng.IntN(10) < 3 {
					i := rng.IntN(len(perm) + 1)
					perm = append(perm[:i], append([][]billing.Fact{ev}, perm[i:]...)...)
				}
			}
			got := withOnce(func() state { return snapshot(t, db) }, deliver(t, db, perm))
			if diff := diffState(got, want); diff != "" {
				t.Fatalf("seed %d: final state differs from in-order delivery:\n%s", seed, diff)
			}
			checkLedger(t, db)
		}
	})
}

// TestChargebackReversalInAnyOrder: two chargebacks of one payment, the
// first won and reported both ways (its record reversed, and a reversal
// of its own, Paddle's chargeback_reverse), in every order: the reversal
// binds to the chargeback already won, never to the open one, and gives
// back no more than its own amount. The chargebacks themselves arrive in
// the order Paddle created them: a reversal names no chargeback, so one
// that arrives when only the second chargeback is known can only bind to
// that one.
func TestChargebackReversalInAnyOrder(t *testing.T) {
	cases := []struct {
		name   string
		facts  []billing.Fact
		kept   int64
		status string
	}{
		{"first won both ways", []billing.Fact{
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_1", Amount: 1000},
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_2", Amount: 1000},
			billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_1"},
			billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_1", Amount: 1000},
		}, 2000, "charged_back"},
		{"a reversal of part of one chargeback", []billing.Fact{
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_1", Amount: 1000},
			billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_1", Amount: 400},
		}, 2400, "charged_back"},
		// The same win reported both ways too: the chargeback's record
		// reversed (which names no amount) does not give back more than
		// the reversal does, whichever comes first.
		{"a reversal of part of one chargeback, won both ways", []billing.Fact{
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_1", Amount: 1000},
			billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_1"},
			billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_1", Amount: 400},
		}, 2400, "charged_back"},
		{"the first of two chargebacks reversed in part, won both ways", []billing.Fact{
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_1", Amount: 1000},
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_2", Amount: 500},
			billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_1"},
			billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_1", Amount: 400},
		}, 1900, "charged_back"},
		// Two chargebacks of other amounts, each won in full and reported
		// both ways, the reversals delivered after the chargeback each
		// reverses (Paddle creates it later): a reversal of the second's
		// amount binds to the second, even when the first is won already
		// by its own record, and so caps nothing of the first.
		{"two chargebacks of other amounts, each won both ways", []billing.Fact{
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_1", Amount: 1000},
			billing.ChargedBack{PaymentRef: "txn_1", DisputeRef: "adj_cb_2", Amount: 500},
			billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_1"},
			billing.ChargebackWon{PaymentRef: "txn_1", DisputeRef: "adj_cb_2"},
			billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_1", Amount: 1000},
			billing.ChargebackWon{PaymentRef: "txn_1", ReversalRef: "adj_rev_2", Amount: 500},
		}, 3000, "succeeded"},
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		for _, c := range cases {
			for i, perm := range permutations(c.facts) {
				if !inProviderOrder(perm) || !reversalsAfterTheirChargebacks(perm) {
					continue
				}
				reset(t, db)
				events := [][]billing.Fact{{billing.Captured{Payment: pay("txn_1", "", 3000, "USD")}}}
				for _, f := range perm {
					events = append(events, []billing.Fact{f})
				}
				deliver(t, db, events)
				if got := kept(t, db, "USD"); got != c.kept {
					t.Errorf("%s, order %d %v: kept %d; want %d", c.name, i, perm, got, c.kept)
				}
				if got := payment(t, db, "txn_1").Status; got != c.status {
					t.Errorf("%s, order %d: status %s; want %s", c.name, i, got, c.status)
				}
				checkLedger(t, db)
			}
		}
	})
}

// TestSubscriptionEndedTieInAnyOrder: two ended snapshots of one second
// alike in all else, one with the provider's end time and one falling
// back to its own time, in both orders: the provider's end is kept.
func TestSubscriptionEndedTieInAnyOrder(t *testing.T) {
	at := t0.Add(time.Hour)
	withEnd := billing.Subscription{Ref: "sub_1", Customer: "c", Plan: "p", Status: "ended", UpdatedAt: at, EndedAt: at.Add(-time.Minute)}
	fallback := billing.Subscription{Ref: "sub_1", Customer: "c", Plan: "p", Status: "ended", UpdatedAt: at}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		for name, seq := range map[string][]billing.Fact{"provider end first": {withEnd, fallback}, "fallback first": {fallback, withEnd}} {
			reset(t, db)
			for _, f := range seq {
				apply(t, db, f)
			}
			s, err := billing.GetSubscription(context.Background(), db, src, "sub_1")
			if err != nil {
				t.Fatal(err)
			}
			if !s.EndedAt.Equal(withEnd.EndedAt) {
				t.Errorf("%s: ended_at %v; want the provider's %v", name, s.EndedAt, withEnd.EndedAt)
			}
		}
	})
}

// TestFiatAndCryptoForOneOrderInAnyOrder: a fiat payment and a crypto
// invoice paying the same order leave the same ledger, payments and
// alerts in both orders; only who paid the order (the first) differs.
func TestFiatAndCryptoForOneOrderInAnyOrder(t *testing.T) {
	fiat := []billing.Fact{billing.Captured{Payment: pay("pay_1", "ord_1", 1000, "USD")},
		billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_1", At: t0}}
	crypto := []billing.Fact{billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_1", Amount: 5000, Currency: "BTC", ChainRef: "tx_1", At: t0}}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		var first state
		for i, events := range [][][]billing.Fact{{fiat, crypto}, {crypto, fiat}} {
			reset(t, db)
			deliver(t, db, events)
			checkLedger(t, db)
			got := snapshot(t, db)
			got.Orders = nil
			if got.Balances["BTC"][billing.AccountCryptoWallet] != 5000 || got.Balances["USD"][billing.AccountReceivable] != 1000 {
				t.Fatalf("order %d: balances %v; want both credited", i, got.Balances)
			}
			if !slices.Equal(got.Alerts, []string{"order_paid_twice:ord_1 x1"}) {
				t.Fatalf("order %d: alerts %v; want order_paid_twice once", i, got.Alerts)
			}
			if i == 0 {
				first = got
			} else if diff := diffState(got, first); diff != "" {
				t.Fatalf("crypto first differs from fiat first:\n%s", diff)
			}
		}
	})
}

// TestSubscriptionStatusTiesInAnyOrder: two snapshots of one second alike
// but for their status, every pair of statuses, in both orders: the same
// one wins (the ranking is total), and an incomplete subscription made
// active within the second is active.
func TestSubscriptionStatusTiesInAnyOrder(t *testing.T) {
	statuses := []string{"incomplete", "active", "paused", "past_due", "unpaid", "canceled", "ended"}
	at := t0.Add(time.Hour)
	snap := func(status string) billing.Subscription {
		return billing.Subscription{Ref: "sub_1", Customer: "c", Plan: "p", Status: status, UpdatedAt: at}
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		final := func(a, b string) string {
			reset(t, db)
			apply(t, db, snap(a))
			apply(t, db, snap(b))
			s, err := billing.GetSubscription(context.Background(), db, src, "sub_1")
			if err != nil {
				t.Fatal(err)
			}
			return s.Status
		}
		for i, a := range statuses {
			for _, b := range statuses[i+1:] {
				ab, ba := final(a, b), final(b, a)
				if ab != ba {
					t.Errorf("%s then %s: %s; %s then %s: %s", a, b, ab, b, a, ba)
				}
			}
		}
		if got := final("active", "incomplete"); got != "active" {
			t.Errorf("incomplete and active of one second: %s; want active", got)
		}
	})
}

// inProviderOrder reports whether the chargebacks of perm come in the
// order of their dispute refs.
func inProviderOrder(perm []billing.Fact) bool {
	last := ""
	for _, f := range perm {
		if cb, ok := f.(billing.ChargedBack); ok {
			if cb.DisputeRef < last {
				return false
			}
			last = cb.DisputeRef
		}
	}
	return true
}

// reversalsAfterTheirChargebacks reports whether, in perm, each reversal
// adj_rev_N comes after the chargeback adj_cb_N it reverses, as Paddle
// creates them (a reversal names no chargeback: one delivered before its
// own can only bind to another).
func reversalsAfterTheirChargebacks(perm []billing.Fact) bool {
	seen := map[string]bool{}
	for _, f := range perm {
		switch f := f.(type) {
		case billing.ChargedBack:
			seen[f.DisputeRef] = true
		case billing.ChargebackWon:
			if n, ok := strings.CutPrefix(f.ReversalRef, "adj_rev_"); ok && !seen["adj_cb_"+n] {
				return false
			}
		}
	}
	return true
}

// permutations returns every order of facts.
func permutations(facts []billing.Fact) [][]billing.Fact {
	if len(facts) <= 1 {
		return [][]billing.Fact{facts}
	}
	var out [][]billing.Fact
	for i := range facts {
		rest := append(append([]billing.Fact(nil), facts[:i]...), facts[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]billing.Fact{facts[i]}, p...))
		}
	}
	return out
}

// withOnce returns s with the counts of once; the delivery runs before
// the snapshot is taken.
func withOnce(snapshot func() state, once map[string]int) state {
	s := snapshot()
	s.Once = once
	return s
}

// diffState names the parts of the state that differ.
func diffState(got, want state) string {
	var b strings.Builder
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			fmt.Fprintf(&b, "%s:\n got %+v\nwant %+v\n", g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface())
		}
	}
	return b.String()
}

// TestConcurrentApply: two workers apply the same event at the same
// moment, each in its own transaction; it is applied once.
func TestConcurrentApply(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		p := pay("pay_1", "ord_1", 10000, "USD")
		p3NoOrder := pay("pay_3", "", 500, "USD")
		batches := [][]billing.Fact{
			{billing.Captured{Payment: p}, billing.OrderPaid{OrderID: "ord_1", PaymentRef: "pay_1"}},
			{billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 2500, Currency: "USD"}},
			{billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_1"}},
			{billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_2", Amount: 1000, Currency: "USD"}},
			{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1"}},
			{billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_1"}},
			{billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_2", Amount: 100, Currency: "BTC", ChainRef: "tx_1"}},
			{billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_3", Amount: 100, Currency: "BTC", ChainRef: "tx_1"}},
			{billing.Subscription{Ref: "sub_1", Status: "active", UpdatedAt: t0}},
			{billing.Subscription{Ref: "sub_1", Status: "ended", UpdatedAt: t0.Add(time.Minute)}},
			{billing.Captured{Payment: pay("pay_2", "ord_1", 10, "USD")}},
			// The order filled in by the first snapshot that knows it.
			{billing.Refunded{Payment: &p3NoOrder, RefundRef: "re_3", Amount: 100, Currency: "USD"}},
			{billing.Captured{Payment: pay("pay_3", "ord_4", 500, "USD")}},
			// A second payment of ord_4 heard of by its order fact only.
			{billing.OrderPaid{OrderID: "ord_4", PaymentRef: "pay_9"}},
			// A refund of a crypto invoice: a no-op with one alert.
			{billing.Refunded{PaymentRef: "inv_1", RefundRef: "re_inv", Amount: 1, Currency: "BTC"}},
			// Refunds beyond the payment: one alert, at most the payment taken.
			{billing.Captured{Payment: pay("pay_5", "", 1000, "EUR")}},
			{billing.Refunded{PaymentRef: "pay_5", RefundRef: "re_5a", Amount: 600, Currency: "EUR"}},
			{billing.Refunded{PaymentRef: "pay_5", RefundRef: "re_5b", Amount: 600, Currency: "EUR"}},
			// A partial dispute won by a reversal of its own (Paddle).
			{billing.Captured{Payment: pay("pay_6", "", 2000, "EUR")}},
			{billing.ChargedBack{PaymentRef: "pay_6", DisputeRef: "dp_6", Amount: 500}},
			{billing.ChargebackWon{PaymentRef: "pay_6", ReversalRef: "adj_rev_6"}},
		}
		once := map[string]int{}
		for _, batch := range batches {
			var wg sync.WaitGroup
			var mu sync.Mutex
			start := make(chan struct{})
			errs := make([]error, 2)
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					out, err := applyTx(ctx, db, batch...)
					errs[w] = err
					mu.Lock()
					defer mu.Unlock()
					for _, k := range out.Posted {
						once["posted "+k]++
					}
					for _, k := range out.OrdersPaid {
						once["paid "+k]++
					}
					for _, k := range out.EndedClaimed {
						once["ended "+k]++
					}
					for _, k := range out.Alerts {
						once["alert "+k]++
					}
				}()
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("concurrent apply of %#v: %v", batch, err)
				}
			}
		}
		for k, n := range once {
			if n != 1 {
				t.Errorf("%s happened %d times; want once", k, n)
			}
		}
		for _, k := range []string{"posted capture:pay_1", "posted refund:re_1", "posted refund_failed:re_1",
			"posted chargeback:dp_1", "posted chargeback_won:dp_1", "posted settle:inv_1", "paid ord_1", "paid ord_2",
			"ended sub_1", "alert crypto_reference_reused:tx_1", "alert order_paid_twice:ord_1",
			"paid ord_4", "alert order_paid_twice:ord_4", "alert payment_kind_mismatch:inv_1",
			"alert refund_exceeds_payment:pay_5", "posted chargeback:dp_6", "posted chargeback_won:dp_6",
			"posted chargeback_reverse:adj_rev_6"} {
			if once[k] != 1 {
				t.Errorf("%s happened %d times; want once", k, once[k])
			}
		}
		if p := payment(t, db, "pay_1"); p.Status != "partially_refunded" || p.RefundedAmount != 1000 {
			t.Fatalf("pay_1 = %+v", p)
		}
		if k := kept(t, db, "USD"); k != 9000+10+400 {
			t.Fatalf("kept USD = %d; want 9410", k)
		}
		for _, a := range alerts(t, db) {
			if a.Count != 1 {
				t.Errorf("alert %s:%s counted %d; want 1", a.Kind, a.Subject, a.Count)
			}
		}
		if k := kept(t, db, "EUR"); k != 0+2000 {
			t.Fatalf("kept EUR = %d; want 2000 (pay_5 refunded whole, pay_6's dispute won)", k)
		}
		if k := kept(t, db, "BTC"); k != 100 {
			t.Fatalf("kept BTC = %d; want 100", k)
		}
	})
}
