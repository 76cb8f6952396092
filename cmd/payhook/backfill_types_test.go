package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sort"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// TestBackfillSeveralTypes: backfill --type A --type B against the
// simulator's Stripe (GET /v1/events with types[]) stores the events of
// those two types only, each once.
func TestBackfillSeveralTypes(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		f := flavour.Stripe()
		d := deliver.New(deliver.Config{TimeScale: 1000})
		t.Cleanup(d.Close)
		p, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: 9, TestKey: "sk_test_types"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			co, err := p.CreateCheckout(sim.EnvTest, 1000+int64(i), "EUR", fmt.Sprint("ord_", i))
			if err != nil {
				t.Fatal(err)
			}
			pay, err := p.CompleteCheckout(sim.EnvTest, co.ID)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				if _, err := p.Refund(sim.EnvTest, pay.ID, 500, "", false); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := map[string]int{}
		evs, _ := p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
		all := 0
		for _, ev := range evs {
			var b struct{ Type string }
			body, _ := f.Body(ev, "")
			json.Unmarshal(body, &b)
			if b.Type == "checkout.session.completed" || b.Type == "charge.refunded" {
				want[b.Type]++
			}
			all++
		}
		if want["checkout.session.completed"] != 2 || want["charge.refunded"] != 1 || all <= 3 {
			t.Fatalf("the provider's events: %v of %d; want 2 checkouts and 1 refund among others", want, all)
		}
		api := httptest.NewServer(p.Handler())
		t.Cleanup(api.Close)
		dbURL := dbtest.URL(t, engine)
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": writeConfig(t, fmt.Sprintf(
			"sources:\n  - name: s\n    provider: stripe\n    secrets: [%q]\n    api_url: %s\n    api_key: sk_test_types\n", f.NewSecret(), api.URL))}
		if code, _, errOut := run(t, env, "migrate"); code != 0 {
			t.Fatalf("migrate = %d: %s", code, errOut)
		}
		for try := 1; try <= 2; try++ {
			code, out, errOut := run(t, env, "backfill", "--source", "s", "--type", "checkout.session.completed", "--type", "charge.refunded", "--json")
			var doc struct {
				OK                 bool
				Listed, New, Known int
			}
			if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || !doc.OK || doc.Listed != 3 ||
				(try == 1 && doc.New != 3) || (try == 2 && doc.Known != 3) {
				t.Fatalf("backfill #%d --type A --type B = %d, %v\n%s\n%s; want the 3 events of the two types, new the first time", try, code, err, out, errOut)
			}
		}
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		stored, err := db.ListEvents(context.Background(), store.Filter{Source: "s", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range stored {
			types = append(types, ev.Type)
		}
		sort.Strings(types)
		if fmt.Sprint(types) != "[charge.refunded checkout.session.completed checkout.session.completed]" {
			t.Fatalf("stored types %v; want the two checkouts and the refund only", types)
		}
	})
}
