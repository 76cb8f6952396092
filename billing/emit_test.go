package billing_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// facts returns the outbox's facts, as "type subject id", sorted.
func facts(t *testing.T, db *store.DB) []outbox.Stored {
	t.Helper()
	fs, err := outbox.List(context.Background(), db, outbox.Filter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func resetOutbox(t *testing.T, db *store.DB) {
	t.Helper()
	reset(t, db)
	for _, table := range []string{"payhook_delivery_attempts", "payhook_deliveries", "payhook_facts"} {
		if _, err := db.SQL.ExecContext(context.Background(), `DELETE FROM `+table); err != nil {
			t.Fatal(err)
		}
	}
}

// orderFree says whether a fact is told whatever the delivery order: all
// but subscription.updated (each snapshot that replaced a lower one, which
// depends on the order), alert.raised (what was seen, in its order) and
// the refund re_5a, which the story reports refunded then failed: a
// failure that arrives first makes the success change nothing.
func orderFree(f outbox.Stored) bool {
	return f.Type != outbox.SubscriptionUpdated && f.Type != outbox.AlertRaised &&
		!(f.Type == outbox.PaymentRefunded && f.Subject == "re_5a")
}

// TestFactsOnceUnderStorm: the story delivered in random orders, each event
// up to 5 times, writes each fact exactly once, the same facts as an
// in-order delivery, and every type of fact billing emits.
func TestFactsOnceUnderStorm(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		events := story()
		resetOutbox(t, db)
		deliver(t, db, events)
		var want []string
		types := map[string]bool{}
		for _, f := range facts(t, db) {
			types[f.Type] = true
			if orderFree(f) {
				want = append(want, f.Type+" "+f.Subject+" "+f.ID)
			}
		}
		sort.Strings(want)
		for _, typ := range outbox.Types {
			if !types[typ] && typ != outbox.AlertRaised {
				t.Errorf("in order: no %s fact", typ)
			}
		}
		if !types[outbox.AlertRaised] {
			t.Errorf("in order: no %s fact", outbox.AlertRaised)
		}
		for seed := range uint64(12) {
			resetOutbox(t, db)
			rng := rand.New(rand.NewPCG(seed, 7))
			var perm [][]billing.Fact
			for _, ev := range events {
				for range 1 + rng.IntN(5) {
					perm = append(perm, ev)
				}
			}
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			deliver(t, db, perm)
			var got []string
			seen := map[string]bool{}
			for _, f := range facts(t, db) {
				if seen[f.ID] {
					t.Fatalf("seed %d: fact %s twice", seed, f.ID)
				}
				seen[f.ID] = true
				if orderFree(f) {
					got = append(got, f.Type+" "+f.Subject+" "+f.ID)
				}
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d: facts differ from in-order delivery:\n%s", seed, diffLines(got, want))
			}
		}
	})
}

// TestFactOnReplay: applying an event again writes no fact; the Outcome
// says which facts a call wrote.
func TestFactOnReplay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		capture := billing.Captured{Payment: pay("pay_r", "ord_r", 1500, "EUR")}
		out := apply(t, db, capture)
		if len(out.Facts) != 2 {
			t.Fatalf("first capture wrote facts %v; want payment.succeeded and order.paid", out.Facts)
		}
		if again := apply(t, db, capture); len(again.Facts) != 0 {
			t.Fatalf("the capture again wrote facts %v; want none", again.Facts)
		}
		fs := facts(t, db)
		if len(fs) != 2 || fs[0].Type != outbox.PaymentSucceeded || fs[1].Type != outbox.OrderPaid ||
			fs[0].Subject != "pay_r" || fs[1].Subject != "ord_r" || fs[0].Source != src {
			t.Fatalf("facts = %+v", fs)
		}
		if want := outbox.ID(outbox.PaymentSucceeded, src, "pay_r"); fs[0].ID != want {
			t.Fatalf("id = %s; want %s", fs[0].ID, want)
		}
		if string(fs[0].Data) != `{"payment":"pay_r","order_id":"ord_r","amount":1500,"currency":"EUR","captured_at":"2026-11-30T11:00:00Z"}` {
			t.Fatalf("data = %s", fs[0].Data)
		}
	})
}

// diffLines lists what only got and only want hold.
func diffLines(got, want []string) string {
	var out []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			out = append(out, "+ "+g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, "- "+w)
		}
	}
	return strings.Join(out, "\n")
}
