package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// TestScheduledBackfillResumes: the scheduled backfill of a source
// (reconcile: {every: 1s}) whose listing fails on its second page is
// recorded failed at the cursor after its first page, and a later
// period's run resumes it from there; every event is stored once.
func TestScheduledBackfillResumes(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		f := flavour.Billete()
		d := deliver.New(deliver.Config{TimeScale: 1000})
		t.Cleanup(d.Close)
		p, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: 9, TestKey: "sk_test_resume"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 { // 8 events, no endpoint: only a backfill brings them
			co, err := p.CreateCheckout(sim.EnvTest, 1000+int64(i), "EUR", fmt.Sprint("ord_", i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
				t.Fatal(err)
			}
		}
		// The events list in pages of 3; the first request for a second
		// page gets a malformed answer.
		var mu sync.Mutex
		failed := false
		h := p.Handler()
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/events") {
				q := r.URL.Query()
				q.Set("limit", "3")
				r.URL.RawQuery = q.Encode()
				mu.Lock()
				fail := q.Get("cursor") != "" && !failed
				failed = failed || fail
				mu.Unlock()
				if fail {
					fmt.Fprint(w, "<html>bad gateway</html>")
					return
				}
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(api.Close)
		dbURL := dbtest.URL(t, engine)
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": writeConfig(t, fmt.Sprintf(
			"sources:\n  - name: shop\n    provider: billete\n    secrets: [%q]\n    api_url: %s\n    api_key: sk_test_resume\n"+
				"    reconcile: {every: 1s, window: 1h}\n", f.NewSecret(), api.URL))}
		startServer(t, env)
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var runs []*store.Run
		waitProgress(t, "a scheduled backfill resuming the failed one", func() (bool, string) {
			runs, err = db.Runs(context.Background(), store.RunFilter{Source: "shop", Kind: store.RunBackfill, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range runs {
				if r.Resumes != 0 && r.Finished() {
					return true, ""
				}
			}
			return false, fmt.Sprint(len(runs))
		})
		var cut, resumed *store.Run
		for _, r := range runs {
			switch {
			case r.Failed():
				if cut != nil {
					t.Fatalf("runs %+v and %+v failed; want one", cut, r)
				}
				cut = r
			case r.Resumes != 0:
				resumed = r
			}
		}
		if cut == nil || cut.Cursor == "" || cut.New != 3 || !strings.Contains(cut.Error, "page 2") {
			t.Fatalf("failed run %+v; want it failed on page 2, at the cursor after the first page's 3 events", cut)
		}
		// The 5 left, from the cursor; new, or known when a run of another
		// period (periods overlap on a loaded machine) stored them first.
		if resumed.Resumes != cut.ID || resumed.Failed() || resumed.Listed != 5 || resumed.New+resumed.Known != 5 {
			t.Fatalf("resuming run %+v; want it to resume run %d from its cursor: the 5 events left", resumed, cut.ID)
		}
		var events int
		db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE source = 'shop'`).Scan(&events)
		if events != 8 {
			t.Fatalf("%d events stored; want the 8, once each", events)
		}
	})
}
