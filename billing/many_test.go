package billing_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// manyStory is a random run of events about few payments and orders, so
// that batches meet every case ApplyMany must apply as ApplyOutcome does:
// new payments with and without an order, of zero, captured twice in one
// batch (and once with another amount), orders paid by two payments in
// one batch or already paid, payments stored before, crypto invoices
// captured as fiat, refunds of payments not seen yet, orders paid by a
// fact of their own, refunds and chargebacks (won) whose snapshot places
// the payment, refund failures, subscriptions and their snapshots alike
// in any value; in two sources, whose orders' alerts are one.
func manyStory(rng *rand.Rand) []billing.Facts {
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
		case k < 19: // two captures of one order
			q := pay(fmt.Sprint("pay_", ref()), p.OrderID, 1500, "USD")
			events = append(events, []billing.Fact{billing.Captured{Payment: p}}, []billing.Fact{billing.Captured{Payment: q}})
		default: // what else befalls a payment, its snapshot placing it
			p.CapturedAt = [...]time.Time{{}, p.CapturedAt.Add(123456789).In(time.FixedZone("x", 3600))}[rng.IntN(2)]
			dispute := fmt.Sprint("dp_", r)
			events = append(events, [][]billing.Fact{
				{&billing.Captured{Payment: p}},
				{billing.Refunded{Payment: &p, PaymentRef: p.Ref, RefundRef: fmt.Sprint("re_", r, "_s"), Amount: max(1, p.Amount/3), Currency: "USD", At: t0}},
				{billing.RefundFailed{PaymentRef: p.Ref, RefundRef: fmt.Sprint("re_", r, "_s"), At: t0}},
				{billing.ChargedBack{Payment: &p, PaymentRef: p.Ref, DisputeRef: dispute, At: t0}},
				{billing.ChargebackWon{PaymentRef: p.Ref, DisputeRef: dispute, At: t0}},
				{billing.Captured{Payment: p}, billing.Refunded{PaymentRef: p.Ref, RefundRef: fmt.Sprint("re_", r, "_e"), Amount: max(1, p.Amount), Currency: "USD"}},
				{billing.Subscription{Ref: fmt.Sprint("sub_", r%5), Status: []string{"active", "ended", "canceled"}[rng.IntN(3)],
					UpdatedAt: t0.Add(time.Duration(rng.IntN(5)) * time.Minute)}},
				// A capture, then a refund of another payment, maybe not
				// seen yet: the capture is rolled back with it.
				{billing.Captured{Payment: p}, billing.Refunded{PaymentRef: fmt.Sprint("pay_", ref()), RefundRef: fmt.Sprint("re_", r, "_o"),
					Amount: 1, Currency: "USD", At: t0}},
			}[rng.IntN(8)])
		}
	}
	var out []billing.Facts
	placed, disputed := map[[2]string]bool{}, map[[2]string]bool{}
	for _, ev := range events {
		source := []string{src, "src2"}[rng.IntN(2)] // half in the second
		switch f := ev[0].(type) {                   // an event that places its payment by itself
		case billing.Captured:
			placed[[2]string{source, f.Payment.Ref}] = placed[[2]string{source, f.Payment.Ref}] || len(ev) == 1
		case *billing.Captured:
			placed[[2]string{source, f.Payment.Ref}] = true
		case billing.Refunded:
			placed[[2]string{source, f.PaymentRef}] = placed[[2]string{source, f.PaymentRef}] || f.Payment != nil
		case billing.ChargedBack:
			placed[[2]string{source, f.PaymentRef}] = true
			disputed[[2]string{source, f.DisputeRef}] = true
		}
		out = append(out, billing.Facts{Source: source, Facts: ev})
	}
	// Snapshots of a few subscriptions, spread over the run, alike in any
	// of their values or none (ApplyMany applies most of them together).
	someTime := func(base time.Time) time.Time {
		return [...]time.Time{{}, base, base.Add(time.Minute)}[rng.IntN(3)]
	}
	for range 40 {
		f := billing.Subscription{Ref: fmt.Sprint("sub_", rng.IntN(6)), Customer: fmt.Sprint("cus_", rng.IntN(2)),
			Plan: []string{"basic", "pro"}[rng.IntN(2)], Status: []string{"incomplete", "active", "past_due", "canceled", "ended"}[rng.IntN(5)],
			UpdatedAt: someTime(t0), CurrentPeriodEnd: someTime(t0.AddDate(0, 1, 0))}
		if f.Status == "ended" {
			f.EndedAt = someTime(t0.Add(-time.Minute))
		}
		at := rng.IntN(len(out) + 1)
		out = slices.Insert(out, at, billing.Facts{Source: []string{src, "src2"}[rng.IntN(2)], Facts: []billing.Fact{f}})
	}
	// Only what some event places: the others would wait for ever.
	return slices.DeleteFunc(out, func(ev billing.Facts) bool {
		for _, f := range ev.Facts {
			switch f := f.(type) {
			case billing.Refunded:
				if !placed[[2]string{ev.Source, f.PaymentRef}] {
					return true
				}
			case billing.RefundFailed:
				if !placed[[2]string{ev.Source, f.PaymentRef}] {
					return true
				}
			case billing.ChargebackWon:
				if !disputed[[2]string{ev.Source, f.DisputeRef}] {
					return true
				}
			}
		}
		return false
	})
}

// outcomes counts what outcomes report: postings, orders paid,
// subscriptions ended, and facts when a key "facts" is there (a fact that
// only some delivery orders write, an alert's, would count otherwise).
type outcomes map[string]int

func (o outcomes) add(out billing.Outcome) {
	for _, k := range out.Posted {
		o["posted "+k]++
	}
	for _, k := range out.OrdersPaid {
		o["paid "+k]++
	}
	for _, k := range out.EndedClaimed {
		o["ended "+k]++
	}
	if _, ok := o["facts"]; !ok {
		return
	}
	for _, k := range out.Facts {
		o["fact "+k]++
	}
}

// handedOn counts what committed tx hands on after its commit: the facts
// it left to tell, if any, and each of its deliveries, by fact and sink.
func (o outcomes) handedOn(t *testing.T, db *store.DB, tx *billing.Tx) {
	t.Helper()
	if n := len(tx.Untold()); n > 0 {
		o["untold"] += n
	}
	for _, id := range tx.Deliveries() {
		var fact, sink string
		if err := db.SQL.QueryRow(`SELECT f.fact_id, d.sink FROM payhook_deliveries d JOIN payhook_facts f ON f.id = d.fact
			WHERE d.id = $1`, id).Scan(&fact, &sink); err != nil {
			t.Fatalf("delivery %d: %v", id, err)
		}
		o["delivery "+fact+" "+sink]++
	}
}

// oneByOne applies events one by one, each with ApplyOutcome in its own
// transaction; an event whose payment is not seen yet goes to the end of
// the queue, as its retry would: of events, or of *rest when given.
func oneByOne(t *testing.T, db *store.DB, box *outbox.Outbox, events []billing.Facts, once outcomes, rest ...*[]billing.Facts) {
	t.Helper()
	ctx := context.Background()
	queue := &events
	if len(rest) > 0 {
		queue = rest[0]
	}
	for stuck := 0; len(events) > 0; {
		ev := events[0]
		events = events[1:]
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		tx.WithOutbox(box)
		out, err := billing.ApplyOutcome(ctx, tx, ev.Source, ev.Facts)
		if err != nil {
			if rerr := tx.Rollback(); rerr != nil {
				t.Fatal(rerr)
			}
			if !errors.Is(err, billing.ErrNotSeenYet) {
				t.Fatalf("apply %#v: %v", ev, err)
			}
			*queue = append(*queue, ev)
			if stuck++; stuck > len(*queue) {
				t.Fatalf("no progress: %d events wait", len(*queue))
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		stuck = 0
		once.add(out)
		once.handedOn(t, db, tx)
	}
}

// applyBatches applies events in batches of random sizes, each with
// ApplyMany in its own transaction, committed; an event that failed
// because its payment is not seen yet goes to the end of the queue (as in
// oneByOne).
func applyBatches(t *testing.T, db *store.DB, box *outbox.Outbox, rng *rand.Rand, queue []billing.Facts) outcomes {
	t.Helper()
	ctx := context.Background()
	once := outcomes{"facts": 0}
	for stuck := 0; len(queue) > 0; {
		batch := queue[:min(len(queue), 1+rng.IntN(12))]
		queue = queue[len(batch):]
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		tx.WithOutbox(box)
		outs, failed, err := billing.ApplyMany(ctx, tx, batch)
		if err != nil {
			t.Fatalf("batch of %d: %v", len(batch), errors.Join(err, tx.Rollback()))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		once.handedOn(t, db, tx)
		progress := false
		for i, out := range outs {
			switch {
			case failed[i] == nil:
				once.add(out)
				progress = true
			case errors.Is(failed[i], billing.ErrNotSeenYet):
				queue = append(queue, batch[i])
			default:
				t.Fatalf("apply %#v: %v", batch[i], failed[i])
			}
		}
		if stuck++; progress {
			stuck = 0
		} else if stuck > len(queue) {
			t.Fatalf("no progress: %d events wait", len(queue))
		}
	}
	return once
}

// factRows lists the outbox facts written, with their body, whether they
// are routed, and whether they wait to be told.
func factRows(t *testing.T, db *store.DB) []string {
	t.Helper()
	rows, err := db.SQL.Query(`SELECT f.type, f.fact_id, f.body, f.routed, u.fact IS NOT NULL,
			(SELECT count(*) FROM payhook_deliveries d WHERE d.fact = f.id AND d.status = 'pending')
		FROM payhook_facts f LEFT JOIN payhook_untold_facts u ON u.fact = f.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ, id, body string
		var routed, untold bool
		var deliveries int
		if err := rows.Scan(&typ, &id, &body, &routed, &untold, &deliveries); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %s routed=%v untold=%v deliveries=%d", typ, id, body, routed, untold, deliveries))
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
	// EmitMany writes together the facts for Unrecorded sinks alone (the
	// log sink) with their untold rows, and the others with a delivery per
	// sink.
	for _, recorded := range []bool{false, true} {
		t.Run(map[bool]string{false: "log sink", true: "log and recorded sinks"}[recorded], func(t *testing.T) {
			applyManyAsOneByOne(t, recorded)
		})
	}
}

func applyManyAsOneByOne(t *testing.T, recorded bool) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		box := logOutbox(t, db)
		if recorded {
			if err := box.AddFunc("hook", []string{"payment.*", "order.*"}, func(context.Context, outbox.Fact) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		for seed := range uint64(20) { // seed 9 meets two sources' alerts of one order
			events := manyStory(rand.New(rand.NewPCG(seed, 7)))
			resetAll(t, db)
			once := outcomes{"facts": 0}
			oneByOne(t, db, box, events, once)
			want := withOnce(func() state { return snapshot(t, db) }, once)
			wantFacts := factRows(t, db)
			checkLedger(t, db)
			resetAll(t, db)
			got := withOnce(func() state { return snapshot(t, db) },
				applyBatches(t, db, box, rand.New(rand.NewPCG(seed, 8)), events))
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
	for _, table := range []string{"payhook_untold", "payhook_untold_batches", "payhook_deliveries", "payhook_facts"} {
		if _, err := db.SQL.Exec(`DELETE FROM ` + table); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApplyManySnapshotsOverStored: a new snapshot (a quarter of them
// ended) of each of 300 subscriptions, stored before as ended, not ended
// or not at all, applied
// in batches of 100 with ApplyMany, leaves what the same snapshots applied
// one by one do. Values come from tiny sets, so that ties on every field
// of the ranking, NULL times and times a nanosecond apart abound.
func TestApplyManySnapshotsOverStored(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	someTime := func(base time.Time) time.Time {
		return [...]time.Time{{}, base, base.Add(500 * time.Nanosecond), base.Add(time.Microsecond),
			base.Add(time.Second).In(time.FixedZone("x", 3600))}[rng.IntN(5)]
	}
	made := func(ref string, ended bool) billing.Subscription {
		f := billing.Subscription{Ref: ref, Customer: []string{"", "c", "C"}[rng.IntN(3)], Plan: []string{"", "p", "P"}[rng.IntN(3)],
			Status:    []string{"incomplete", "active", "canceled", "past_due"}[rng.IntN(4)],
			UpdatedAt: someTime(t0), CurrentPeriodEnd: someTime(t0.AddDate(0, 1, 0))}
		if ended {
			f.Status = "ended"
		}
		if rng.IntN(3) == 0 {
			f.EndedAt = someTime(t0.Add(-time.Minute))
		}
		return f
	}
	var stored, wave []billing.Facts
	for i := range 300 {
		ref, source := fmt.Sprint("sub_", i), []string{src, "src2"}[rng.IntN(2)]
		if k := rng.IntN(6); k > 0 {
			stored = append(stored, billing.Facts{Source: source, Facts: []billing.Fact{made(ref, k == 1)}})
		}
		wave = append(wave, billing.Facts{Source: source, Facts: []billing.Fact{made(ref, rng.IntN(4) == 0)}})
	}
	batchesAsOneByOne(t, stored, wave, 100)
}

// inBatches applies events in batches of n with ApplyMany, each committed,
// and fails the test if one of them fails.
func inBatches(t *testing.T, db *store.DB, box *outbox.Outbox, events []billing.Facts, n int) outcomes {
	t.Helper()
	once := outcomes{"facts": 0}
	for batch := range slices.Chunk(events, n) {
		tx, err := billing.Begin(context.Background(), db, t0)
		if err != nil {
			t.Fatal(err)
		}
		tx.WithOutbox(box)
		outs, failed, err := billing.ApplyMany(context.Background(), tx, batch)
		if err != nil || slices.ContainsFunc(failed, func(err error) bool { return err != nil }) {
			t.Fatalf("batch: %v %v", errors.Join(err, tx.Rollback()), failed)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, out := range outs {
			once.add(out)
		}
		once.handedOn(t, db, tx)
	}
	return once
}

// TestApplyManyRecaptures: captures of payments stored before, in one
// batch, leave what they leave one by one: those that change nothing
// (ApplyMany reads them together) and those that do: an order paid by
// another payment (raised again), another amount, an order not recorded
// yet, a crypto invoice.
func TestApplyManyRecaptures(t *testing.T) {
	capture := func(p billing.Payment, paid bool) billing.Facts {
		facts := []billing.Fact{billing.Captured{Payment: p}}
		if paid {
			facts = append(facts, billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.Ref, At: t0})
		}
		return billing.Facts{Source: src, Facts: facts}
	}
	before := []billing.Facts{
		capture(pay("pay_1", "ord_1", 1000, "USD"), true),
		capture(pay("pay_2", "ord_1", 1000, "USD"), true), // ord_1 is paid by pay_1
		capture(pay("pay_3", "", 1000, "USD"), false),
		capture(pay("pay_4", "ord_4", 0, "USD"), true),
		capture(pay("pay_5", "ord_5", 1000, "USD"), false),
		{Source: src, Facts: []billing.Fact{billing.Settled{InvoiceRef: "inv_6", Amount: 500, Currency: "BTC", ChainRef: "tx_6", At: t0}}},
		capture(pay("pay_8", "ord_8", 1000, "USD"), true),
		capture(pay("pay_10", "ord_10", 1000, "USD"), true),
		capture(pay("pay_11", "", 1000, "USD"), false),
		capture(pay("pay_12", "ord_12", 1000, "USD"), true),
	}
	// Each first to name its payment and order in the batch but the last
	// six: two recaptures after a new capture in the batch, a recapture
	// after a new capture of the same order by another payment, and three
	// that wait for their turn.
	again := []billing.Facts{
		capture(pay("pay_2", "ord_1", 1000, "USD"), true),   // ord_1 is paid by pay_1: raised again
		capture(pay("pay_3", "ord_3", 1000, "USD"), true),   // records ord_3 and pays it
		capture(pay("pay_4", "ord_4", 0, "USD"), true),      // nothing
		capture(pay("pay_5", "ord_5", 1200, "USD"), false),  // another amount
		capture(pay("inv_6", "", 500, "BTC"), false),        // a crypto invoice
		capture(pay("pay_7", "ord_7", 1000, "USD"), true),   // new
		capture(pay("pay_8", "ord_8", 1000, "EUR"), true),   // another currency
		capture(pay("pay_10", "ord_10", 1000, "USD"), true), // nothing
		capture(pay("pay_11", "", 1000, "USD"), false),      // nothing
		capture(pay("pay_12", "ord_99", 1000, "USD"), true), // recorded for another order
		capture(pay("pay_20", "ord_20", 1000, "USD"), true), // new
		capture(pay("pay_21", "", 0, "USD"), false),         // new, of zero
		capture(pay("pay_22", "ord_20", 1000, "USD"), true), // new: ord_20 is paid by pay_20
		capture(pay("pay_20", "ord_20", 1000, "USD"), true), // after its capture: nothing
		capture(pay("pay_21", "", 0, "USD"), false),         // after its capture: nothing
		capture(pay("pay_22", "ord_20", 1000, "USD"), true), // after pay_22's: paid by pay_20, waits behind it
		capture(pay("pay_1", "ord_1", 1000, "USD"), true),   // waits; nothing
		capture(pay("pay_5", "ord_5", 1000, "USD"), true),   // waits; nothing
		capture(pay("pay_20", "ord_20", 1000, "USD"), true), // waits; nothing
	}
	batchesAsOneByOne(t, before, again, len(again))
}

// batchesAsOneByOne applies events, after before (one by one), one by one
// and then again, after before alone, in batches of n with ApplyMany, on
// each engine, and fails the test unless both leave the same state,
// outcomes and outbox facts.
func batchesAsOneByOne(t *testing.T, before, events []billing.Facts, n int) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		box := logOutbox(t, db)
		once := outcomes{"facts": 0}
		oneByOne(t, db, box, before, outcomes{})
		oneByOne(t, db, box, events, once)
		want := withOnce(func() state { return snapshot(t, db) }, once)
		wantFacts := factRows(t, db)
		resetAll(t, db)
		oneByOne(t, db, box, before, outcomes{})
		got := withOnce(func() state { return snapshot(t, db) }, inBatches(t, db, box, events, n))
		if diff := diffState(got, want); diff != "" {
			t.Fatalf("in batches the state differs from one by one:\n%s", diff)
		}
		if got := factRows(t, db); !slices.Equal(got, wantFacts) {
			t.Fatalf("in batches the facts differ from one by one:\n got %v\nwant %v", got, wantFacts)
		}
	})
}

// logOutbox returns an outbox of db with a log sink for every fact.
func logOutbox(t *testing.T, db *store.DB) *outbox.Outbox {
	t.Helper()
	box, err := outbox.New(outbox.Config{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Add("log", nil, outbox.Log{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	return box
}
