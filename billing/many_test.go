package billing_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// manyStory is a random run of events about few payments and orders, so
// that batches meet every case ApplyMany must apply as ApplyOutcome does:
// new payments with and without an order, of zero, captured twice in one
// batch (and once with another amount), orders paid by two payments in
// one batch or already paid, payments stored before, crypto invoices
// captured as fiat, refunds of payments not seen yet, orders paid by a
// fact of their own.
func manyStory(rng *rand.Rand) [][]billing.Fact {
	amount := func(ref int) int64 { return int64(ref%4) * 1000 } // a quarter of zero
	ref := func() int { return rng.IntN(30) }
	order := func() string {
		if rng.IntN(4) == 0 {
			return ""
		}
		return fmt.Sprint("ord_", rng.IntN(20))
	}
	var events [][]billing.Fact
	for range 80 {
		r := ref()
		p := pay(fmt.Sprint("pay_", r), order(), amount(r), "USD")
		switch k := rng.IntN(20); {
		case k < 12: // what a mapping makes of a payment that succeeded
			ev := []billing.Fact{billing.Captured{Payment: p}}
			if p.OrderID != "" && k < 10 {
				ev = append(ev, billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.Ref, At: t0})
			}
			events = append(events, ev)
		case k < 13: // another amount: AlertPaymentMismatch, whichever comes second
			p.Amount++
			events = append(events, []billing.Fact{billing.Captured{Payment: p}})
		case k < 15:
			if p.Amount > 0 {
				events = append(events, []billing.Fact{billing.Refunded{PaymentRef: p.Ref,
					RefundRef: fmt.Sprint("re_", r, "_", k), Amount: p.Amount / 2, Currency: "USD", At: t0}})
			}
		case k < 17:
			if p.OrderID != "" {
				events = append(events, []billing.Fact{billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.Ref, At: t0}})
			}
		case k < 18: // a crypto invoice, then a capture of its ref
			inv := fmt.Sprint("inv_", r)
			events = append(events, []billing.Fact{billing.Settled{InvoiceRef: inv, OrderID: order(), Amount: 500,
				Currency: "BTC", ChainRef: "tx_" + inv, At: t0}})
			p.Ref = inv
			events = append(events, []billing.Fact{billing.Captured{Payment: p}})
		default: // two captures of one order
			q := pay(fmt.Sprint("pay_", ref()), p.OrderID, 1500, "USD")
			events = append(events, []billing.Fact{billing.Captured{Payment: p}}, []billing.Fact{billing.Captured{Payment: q}})
		}
	}
	captured := map[string]bool{}
	for _, ev := range events {
		if c, ok := ev[0].(billing.Captured); ok {
			captured[c.Payment.Ref] = true
		}
	}
	// Only refunds of payments some event captures: the others would wait
	// for ever.
	return slices.DeleteFunc(events, func(ev []billing.Fact) bool {
		r, ok := ev[0].(billing.Refunded)
		return ok && !captured[r.PaymentRef]
	})
}

// applyBatches applies events in batches of random sizes, each with
// ApplyMany in its own transaction. A batch that fails is rolled back and
// its events applied one by one, as the job queue does; an event whose
// payment is not seen yet goes to the end of the queue, as its retry
// would.
func applyBatches(t *testing.T, db *store.DB, rng *rand.Rand, events [][]billing.Fact) map[string]int {
	t.Helper()
	ctx := context.Background()
	once := map[string]int{}
	count := func(out billing.Outcome) {
		for _, k := range out.Posted {
			once["posted "+k]++
		}
		for _, k := range out.OrdersPaid {
			once["paid "+k]++
		}
	}
	queue := slices.Clone(events)
	for len(queue) > 0 {
		n := min(len(queue), 1+rng.IntN(12))
		batch := queue[:n]
		queue = queue[n:]
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		many := make([]billing.Facts, len(batch))
		for i, ev := range batch {
			many[i] = billing.Facts{Source: src, Facts: ev}
		}
		outs, err := billing.ApplyMany(ctx, tx, many)
		if err == nil {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			for _, out := range outs {
				count(out)
			}
			continue
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(err, billing.ErrNotSeenYet) {
			t.Fatalf("batch of %d: %v", len(batch), err)
		}
		for _, ev := range batch {
			out, err := applyTx(ctx, db, ev...)
			switch {
			case errors.Is(err, billing.ErrNotSeenYet):
				queue = append(queue, ev)
			case err != nil:
				t.Fatalf("apply %#v: %v", ev, err)
			default:
				count(out)
			}
		}
	}
	return once
}

// factRows lists the outbox facts written, as "type id body".
func factRows(t *testing.T, db *store.DB) []string {
	t.Helper()
	rows, err := db.SQL.Query(`SELECT type, fact_id, body FROM payhook_facts`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ, id, body string
		if err := rows.Scan(&typ, &id, &body); err != nil {
			t.Fatal(err)
		}
		out = append(out, typ+" "+id+" "+body)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestApplyManyAsOneByOne: random runs of events applied in batches with
// ApplyMany reach the state, outbox facts and outcomes of the same events
// applied one by one with ApplyOutcome, although ApplyMany applies the
// captures of new payments before the other events of their batch (on
// PostgreSQL).
func TestApplyManyAsOneByOne(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		seeds := uint64(12)
		if testing.Short() {
			seeds = 4
		}
		for seed := range seeds {
			events := manyStory(rand.New(rand.NewPCG(seed, 7)))
			resetAll(t, db)
			want := withOnce(func() state { return snapshot(t, db) }, deliver(t, db, events))
			wantFacts := factRows(t, db)
			checkLedger(t, db)
			resetAll(t, db)
			got := withOnce(func() state { return snapshot(t, db) },
				applyBatches(t, db, rand.New(rand.NewPCG(seed, 8)), events))
			gotFacts := factRows(t, db)
			checkLedger(t, db)
			if diff := diffState(got, want); diff != "" {
				t.Fatalf("seed %d: in batches the state differs from one by one:\n%s", seed, diff)
			}
			if !slices.Equal(gotFacts, wantFacts) {
				t.Fatalf("seed %d: in batches the facts differ from one by one:\n got %v\nwant %v", seed, gotFacts, wantFacts)
			}
		}
	})
}

// resetAll is reset with the outbox's facts.
func resetAll(t *testing.T, db *store.DB) {
	t.Helper()
	reset(t, db)
	if _, err := db.SQL.Exec(`DELETE FROM payhook_facts`); err != nil {
		t.Fatal(err)
	}
}
