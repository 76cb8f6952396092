package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// TestScheduledBackfillNotReportedMissing: the scheduled job backfills,
// then reconciles the same window; what the backfill brought is not
// reported missing here (no reconcile_difference alert is ever raised),
// though its events are processed by the workers after the backfill.
func TestScheduledBackfillNotReportedMissing(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		f := flavour.Billete()
		d := deliver.New(deliver.Config{TimeScale: 1000})
		t.Cleanup(d.Close)
		p, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: 9, TestKey: "sk_test_sched"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 { // no endpoint: only a backfill brings them
			co, err := p.CreateCheckout(sim.EnvTest, 1000+int64(i), "EUR", fmt.Sprint("ord_", i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
				t.Fatal(err)
			}
		}
		api := httptest.NewServer(p.Handler())
		t.Cleanup(api.Close)
		dbURL := dbtest.URL(t, engine)
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": writeConfig(t, fmt.Sprintf(
			"sources:\n  - name: shop\n    provider: billete\n    secrets: [%q]\n    api_url: %s\n    api_key: sk_test_sched\n"+
				"    reconcile: {every: 1s, window: 1h}\n", f.NewSecret(), api.URL))}
		srv := startServer(t, env)
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		waitProgress(t, "two reconcile runs, the events processed", func() (bool, string) {
			runs, err := db.Runs(context.Background(), store.RunFilter{Source: "shop", Kind: store.RunReconcile, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			var done int
			db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE source = 'shop' AND status = 'processed'`).Scan(&done)
			return len(runs) >= 2 && done == 8, fmt.Sprint(len(runs), " runs, ", done, " processed")
		})
		var raised int
		db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_alerts WHERE kind = $1`, reconcile.AlertDifference).Scan(&raised)
		if raised != 0 {
			var msg string
			db.SQL.QueryRow(`SELECT message FROM payhook_alerts WHERE kind = $1`, reconcile.AlertDifference).Scan(&msg)
			t.Fatalf("%d reconcile_difference alerts raised (%s); want none: the backfill brought every event", raised, msg)
		}
		// Its events are new rows of this instance: counted as received
		// (and backfilled), as their processing is counted.
		got := scrape(t, srv.url+"/metrics")
		for _, series := range []string{`payhook_events_received_total{source="shop"}`, `payhook_events_backfilled_total{source="shop"}`} {
			if got[series] != 8 {
				t.Errorf("%s = %v, want 8", series, got[series])
			}
		}
	})
}

// TestScheduledReconcileLogsToServesLog: the retries of a scheduled
// reconcile's pages are lines of serve's own log (its stderr, key=value),
// as the scheduled backfill's are. Before, they went to slog's default
// logger: the process's stderr in another format, whatever serve's log was.
func TestScheduledReconcileLogsToServesLog(t *testing.T) {
	t.Parallel()
	f := flavour.Billete()
	d := deliver.New(deliver.Config{TimeScale: 1000})
	t.Cleanup(d.Close)
	p, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: 11, TestKey: "sk_test_schedlog"})
	if err != nil {
		t.Fatal(err)
	}
	sims := p.Handler()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/payments" { // the reconcile's first list: retried
			http.Error(w, `{"error":"down for the test"}`, http.StatusServiceUnavailable)
			return
		}
		sims.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	env := map[string]string{"PAYHOOK_DB": dbtest.URL(t, "sqlite"), "PAYHOOK_CONFIG": writeConfig(t, fmt.Sprintf(
		"sources:\n  - name: shop\n    provider: billete\n    secrets: [%q]\n    api_url: %s\n    api_key: sk_test_schedlog\n"+
			"    reconcile: {every: 1s, window: 1h}\n", f.NewSecret(), api.URL))}
	srv := startServer(t, env)
	const want = `level=WARN msg="reconcile shop payments retries a page"`
	// The first scheduled run retries its first page within seconds;
	// serve's log keeps growing meanwhile (a backfill a second), so the
	// wait has a deadline rather than a stall limit.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(srv.stderr.String(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in serve's log after 30s", want)
		}
	}
}
