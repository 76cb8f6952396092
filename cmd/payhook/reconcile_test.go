package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// reconcileWorld is a payhook serve and a simulated provider whose
// endpoint points at it, with the provider's API on a loopback port.
type reconcileWorld struct {
	t        *testing.T
	f        flavour.Flavour
	p        *sim.Provider
	secret   string
	hook     string // payhook's webhook URL of the source
	env      map[string]string
	db       *store.DB
	source   string
	endpoint string
	mu       sync.Mutex
	asked    []string // the API version each request to the API pinned
}

func newReconcileWorld(t *testing.T, engine, name string, events []string, extra ...string) *reconcileWorld {
	t.Helper()
	f, err := flavour.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	d := deliver.New(deliver.Config{TimeScale: 1000})
	t.Cleanup(d.Close)
	p, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: 9, TestKey: "sk_test_reconcile"})
	if err != nil {
		t.Fatal(err)
	}
	w := &reconcileWorld{t: t, f: f, p: p, secret: f.NewSecret(), source: "shop"}
	h := p.Handler()
	api := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.asked = append(w.asked, r.Header.Get("Billete-Version")+r.Header.Get("Stripe-Version"))
		w.mu.Unlock()
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(api.Close)

	dbURL := dbtest.URL(t, engine)
	config := filepath.Join(t.TempDir(), "payhook.yaml")
	os.WriteFile(config, fmt.Appendf(nil, "sources:\n  - name: shop\n    provider: %s\n    secrets: [\"${SECRET}\"]\n"+
		"    api_url: %s\n    api_key: sk_test_reconcile\n%s"+
		"processing:\n  retry_base: 20ms\n  retry_max: 200ms\n  max_attempts: 1000\n", f.Provider(), api.URL, strings.Join(extra, "")), 0o600)
	w.env = map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": config, "SECRET": w.secret}
	s := startServer(t, w.env)
	w.hook = s.url + "/webhooks/shop"
	ep, err := p.CreateEndpointWithSecret(sim.EnvTest, w.hook, events, "", w.secret)
	if err != nil {
		t.Fatal(err)
	}
	w.endpoint = ep.ID
	w.db, err = store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.db.Close() })
	return w
}

// waitProcessed waits until payhook has processed n events of the source.
func (w *reconcileWorld) waitProcessed(n int) {
	w.t.Helper()
	waitProgress(w.t, fmt.Sprintf("%d events processed", n), func() (bool, string) {
		var done, all int
		w.db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE source = 'shop' AND status IN ('processed', 'ignored')`).Scan(&done)
		w.db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE source = 'shop'`).Scan(&all)
		return done >= n, fmt.Sprint(done, "/", all)
	})
}

// reconcile runs payhook reconcile --json and returns its exit status and
// report.
func (w *reconcileWorld) reconcile() (int, reconcile.Report, string) {
	w.t.Helper()
	code, out, errOut := run(w.t, w.env, "reconcile", "--source", "shop", "--since", "1h", "--json")
	var rep reconcile.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		w.t.Fatalf("reconcile = %d, stdout %q, stderr %q: %v", code, out, errOut, err)
	}
	return code, rep, errOut
}

// alerts returns the count of each reconcile_difference alert.
func (w *reconcileWorld) alerts() []int {
	rows, err := w.db.SQL.Query(`SELECT count FROM payhook_alerts WHERE kind = $1 ORDER BY id`, reconcile.AlertDifference)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	out := []int{}
	for rows.Next() {
		var n int
		rows.Scan(&n)
		out = append(out, n)
	}
	return out
}

// TestReconcileDroppedRefund: a refund made at the provider whose webhook
// was dropped is reported (exit 1) with one alert, however often
// reconcile runs; once a backfill brings its event through the normal path,
// reconcile reports nothing (exit 0). Per flavour with an object list
// (billete, Stripe, Paddle), on both engines.
func TestReconcileDroppedRefund(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		for _, name := range []string{"billete", "stripe", "paddle"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// The endpoint hears of everything but refunds: the
				// refund's webhook is dropped.
				events := slices.DeleteFunc(slices.Clone(sim.EventTypes), func(s string) bool { return s == "payment.refunded" })
				w := newReconcileWorld(t, engine, name, events)
				co, err := w.p.CreateCheckout(sim.EnvTest, 2500, "EUR", "ord_1")
				if err != nil {
					t.Fatal(err)
				}
				pay, err := w.p.CompleteCheckout(sim.EnvTest, co.ID)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.p.CreateSubscription(sim.EnvTest, "cus_1", "basic"); err != nil {
					t.Fatal(err)
				}
				w.waitProcessed(3) // checkout.completed, payment.succeeded, subscription.created

				if code, rep, errOut := w.reconcile(); code != 0 || len(rep.Differences) != 0 {
					t.Fatalf("reconcile before the refund = %d, %+v, %s; want 0 and no differences", code, rep.Differences, errOut)
				}
				ref, err := w.p.Refund(sim.EnvTest, pay.ID, 1000, "", false)
				if err != nil {
					t.Fatal(err)
				}
				for run := 1; run <= 2; run++ {
					code, rep, errOut := w.reconcile()
					if code != 1 || len(rep.Differences) != 1 {
						t.Fatalf("reconcile #%d after the dropped refund = %d, %+v, %s; want 1 and one difference", run, code, rep.Differences, errOut)
					}
					d := rep.Differences[0]
					if d.Ref != pay.ID || d.What != reconcile.Different || !strings.Contains(d.Fix, ref.ID) || d.Alerted != (run == 1) {
						t.Errorf("reconcile #%d: difference %+v; want payment %s different, fixed by refund %s, alerted the first time only", run, d, pay.ID, ref.ID)
					}
					if !strings.Contains(errOut, "1 difference") {
						t.Errorf("reconcile #%d stderr %q; want it to say 1 difference", run, errOut)
					}
					// An amount says its currency: 1000 is ten euros, or a
					// thousand yen. Before, the report read "refunded_amount 0
					// → 1000" and the alert likewise.
					var text strings.Builder
					if err := printReport(&text, &rep, ""); err != nil || !strings.Contains(text.String(), "refunded_amount EUR 0 → EUR 1000") {
						t.Errorf("reconcile #%d report: %v\n%s\nwant refunded_amount EUR 0 → EUR 1000", run, err, text.String())
					}
					var msg string
					w.db.SQL.QueryRow(`SELECT message FROM payhook_alerts WHERE kind = $1`, reconcile.AlertDifference).Scan(&msg)
					if !strings.Contains(msg, `refunded_amount "EUR 0" here, "EUR 1000" at the provider`) {
						t.Errorf("reconcile #%d alert message %q; want the refunded amounts with their currency", run, msg)
					}
				}
				if got := w.alerts(); !slices.Equal(got, []int{1}) {
					t.Errorf("reconcile_difference alerts %v; want one, raised once", got)
				}
				// A backfill brings the dropped event through the normal path.
				if code, out, errOut := run(t, w.env, "backfill", "--source", "shop"); code != 0 || !strings.Contains(out, "1 new") {
					t.Fatalf("backfill = %d, %q, %q; want 0 and the refund's event new", code, out, errOut)
				}
				w.waitProcessed(4)
				if code, rep, errOut := w.reconcile(); code != 0 || len(rep.Differences) != 0 {
					t.Fatalf("reconcile after the refund came in = %d, %+v, %s; want 0", code, rep.Differences, errOut)
				}
				// Each run is recorded, newest first.
				code, out, errOut := run(t, w.env, "reconcile", "runs", "--kind", "reconcile", "--json")
				var runs []store.Run
				if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil {
					t.Fatalf("reconcile runs = %d, %q, %q", code, out, errOut)
				}
				var diffs []int64
				for _, r := range runs {
					if r.Kind != store.RunReconcile || r.Source != "shop" || !r.Finished() || r.Failed() || r.Listed == 0 {
						t.Errorf("run %+v; want a finished reconcile of shop that listed objects", r)
					}
					diffs = append(diffs, r.Differences)
				}
				if !slices.Equal(diffs, []int64{0, 1, 1, 0}) {
					t.Errorf("runs' differences, newest first, %v; want [0 1 1 0]", diffs)
				}
			})
		}
	})
}

// TestScheduledReconcileOncePerInterval: with reconcile: {every: 1s} on
// its source, two payhook serve sharing one PostgreSQL database (one on
// SQLite) reconcile once per interval between them, each run recorded.
// The test waits for runs to accumulate, not for a number of seconds.
func TestScheduledReconcileOncePerInterval(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		w := newReconcileWorld(t, engine, "billete", []string{"*"}, "    reconcile: {every: 1s, window: 1h}\n")
		if engine == "postgres" {
			startServer(t, w.env) // a second instance on the same database
		}
		const want = 4
		var runs []*store.Run
		waitProgress(t, fmt.Sprintf("%d scheduled runs", want), func() (bool, string) {
			var err error
			runs, err = w.db.Runs(context.Background(), store.RunFilter{Source: "shop", Kind: store.RunReconcile})
			if err != nil {
				t.Fatal(err)
			}
			return len(runs) >= want, fmt.Sprint(len(runs))
		})
		periods := map[time.Time]int{}
		for _, r := range runs {
			periods[r.From]++
			if r.Until.Sub(r.From) < time.Hour {
				t.Errorf("run %d covers %s to %s; want the 1h window", r.ID, r.From, r.Until)
			}
		}
		for from, n := range periods {
			if n != 1 {
				t.Errorf("the period of the window from %s ran %d times; want once", from.Format(time.RFC3339Nano), n)
			}
		}
	})
}

// TestReconcileErrors: each mistake in the command line or the source's
// config is a clear error (usage: 2; config: 1) and runs nothing.
func TestReconcileErrors(t *testing.T) {
	t.Parallel()
	const base = "sources:\n  - name: shop\n    provider: billete\n    secrets: [whsec_x]\n"
	withAPI := base + "    api_url: http://127.0.0.1:1\n    api_key: sk_test_x\n"
	for _, tc := range []struct {
		name, config string
		args         []string
		code         int
		want         string
	}{
		{"no source flag", withAPI, nil, 2, "--source is required"},
		{"negative since", withAPI, []string{"--source", "shop", "--since", "-1h"}, 2, "positive duration"},
		{"stray argument", withAPI, []string{"--source", "shop", "extra"}, 2, "extra"},
		{"unknown source", withAPI, []string{"--source", "shoop"}, 1, `no source "shoop" (sources: shop)`},
		{"no api", base, []string{"--source", "shop"}, 1, "has no api_url and api_key"},
		{"schedule without api", base + "    reconcile: {every: 1h}\n", []string{"--source", "shop"}, 1, "needs api_url and api_key"},
		{"bad every", withAPI + "    reconcile: {every: soon}\n", []string{"--source", "shop"}, 1, `every "soon" is not a duration`},
		{"every too short", withAPI + "    reconcile: {every: 1ms}\n", []string{"--source", "shop"}, 1, "at least 1s"},
		{"bad window", withAPI + "    reconcile: {every: 1h, window: -3h}\n", []string{"--source", "shop"}, 1, `window "-3h"`},
		{"bad silence", withAPI + "    silence: quiet\n", []string{"--source", "shop"}, 1, `silence "quiet" is not a duration`},
		{"unknown schedule key", withAPI + "    reconcile: {every: 1h, windows: 3h}\n", []string{"--source", "shop"}, 1, "windows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{"PAYHOOK_CONFIG": writeConfig(t, tc.config), "PAYHOOK_DB": "sqlite://" + filepath.Join(t.TempDir(), "none.db")}
			code, out, errOut := run(t, e, append([]string{"reconcile"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("reconcile %v = %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
			}
		})
	}
	// Without a config file at all.
	code, _, errOut := run(t, nil, "reconcile", "--source", "shop")
	if code != 2 || !strings.Contains(errOut, "--config or PAYHOOK_CONFIG") {
		t.Errorf("reconcile without a config = %d, %q", code, errOut)
	}
}

// TestAPIVersionPinned: a source that pins api_version sends it with
// every request to the provider's API; events and listed objects of
// another version are stored and processed all the same, and raise one
// api_version_drift alert per version seen.
func TestAPIVersionPinned(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		for _, name := range []string{"billete", "stripe"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// The endpoint and the account are on sim.DefaultAPIVersion.
				w := newReconcileWorld(t, engine, name, []string{"*"}, "    api_version: 2024-06-01\n")
				for i := range 3 {
					co, err := w.p.CreateCheckout(sim.EnvTest, 1000+int64(i), "EUR", fmt.Sprint("ord_", i))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := w.p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
						t.Fatal(err)
					}
				}
				w.waitProcessed(6)
				if code, rep, errOut := w.reconcile(); code != 0 {
					t.Fatalf("reconcile = %d, %+v, %s; want 0: the drift is no difference", code, rep.Differences, errOut)
				}
				var kinds, subjects []string
				var counts []int
				rows, err := w.db.SQL.Query(`SELECT kind, subject, count FROM payhook_alerts ORDER BY id`)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var k, s string
					var n int
					rows.Scan(&k, &s, &n)
					kinds, subjects, counts = append(kinds, k), append(subjects, s), append(counts, n)
				}
				rows.Close()
				if !slices.Equal(kinds, []string{reconcile.AlertAPIVersionDrift}) || subjects[0] != "shop" || counts[0] != 1 {
					t.Errorf("alerts %v %v %v; want one api_version_drift of shop, raised once", kinds, subjects, counts)
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				if len(w.asked) == 0 || slices.ContainsFunc(w.asked, func(v string) bool { return v != "2024-06-01" }) {
					t.Errorf("requests pinned %v; want 2024-06-01 on every one", w.asked)
				}
			})
		}
	})
}

// TestSilenceAlert: with silence: 2s on its source, serve raises
// source_silent once nothing came in for 2s, and clears it when an event
// comes in again.
func TestSilenceAlert(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		w := newReconcileWorld(t, engine, "billete", []string{"*"}, "    silence: 2s\n")
		co, err := w.p.CreateCheckout(sim.EnvTest, 1000, "EUR", "ord_1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
			t.Fatal(err)
		}
		state := func() (int, bool) {
			var n int
			var acked bool
			w.db.SQL.QueryRow(`SELECT count, acknowledged FROM payhook_alerts WHERE kind = $1 AND subject = 'shop'`, reconcile.AlertSilence).Scan(&n, &acked)
			return n, acked
		}
		waitProgress(t, "source_silent raised", func() (bool, string) {
			n, acked := state()
			return n == 1 && !acked, fmt.Sprint(n, acked)
		})
		co, err = w.p.CreateCheckout(sim.EnvTest, 2000, "EUR", "ord_2")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "source_silent cleared", func() (bool, string) {
			n, acked := state()
			return acked || n > 1, fmt.Sprint(n, acked)
		})
		// Cleared; or, on a machine so loaded that the next check came
		// more than 2s after the second event, raised again for the new
		// spell (the one after it), never twice for the first.
		n, acked := state()
		var spells []string
		rows, err := w.db.SQL.Query(`SELECT occurrence FROM payhook_alert_occurrences WHERE kind = $1 ORDER BY id`, reconcile.AlertSilence)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var o string
			rows.Scan(&o)
			spells = append(spells, o)
		}
		rows.Close()
		if !(n == 1 && acked) && !(n == 2 && !acked && len(spells) == 2 && spells[0] != spells[1]) {
			t.Fatalf("source_silent count %d, acknowledged %v, spells %v; want raised once, then cleared (or raised for the next spell)", n, acked, spells)
		}
	})
}

// TestReconcileSaysEventsWait: with no serve running, a backfilled
// payment's events wait unprocessed; reconcile reports the payment
// missing and says that the source's events are still waiting, which a
// backfill cannot fix. Before the backfill there is nothing waiting and
// no such note.
func TestReconcileSaysEventsWait(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		d := deliver.New(deliver.Config{TimeScale: 1000})
		t.Cleanup(d.Close)
		p, err := sim.New(sim.Config{Flavour: flavour.Billete(), Sender: d, Seed: 3, TestKey: "sk_test_wait"})
		if err != nil {
			t.Fatal(err)
		}
		api := httptest.NewServer(p.Handler())
		t.Cleanup(api.Close)
		co, err := p.CreateCheckout(sim.EnvTest, 1200, "EUR", "ord_w")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"PAYHOOK_DB": dbtest.URL(t, engine), "PAYHOOK_CONFIG": writeConfig(t,
			"sources:\n  - name: shop\n    provider: billete\n    secrets: [whsec_eA==]\n    api_url: "+api.URL+"\n    api_key: sk_test_wait\n")}
		if code, _, errOut := run(t, env, "migrate"); code != 0 {
			t.Fatalf("migrate = %d, %s", code, errOut)
		}
		const note = "events of source shop are still waiting to be processed"
		if code, _, errOut := run(t, env, "reconcile", "--source", "shop"); code != 1 || strings.Contains(errOut, note) {
			t.Fatalf("reconcile before the backfill = %d, %q; want 1 and no note of waiting events", code, errOut)
		}
		// Given --config and --db, the backfill its fix names reads them.
		flags := " --config " + env["PAYHOOK_CONFIG"] + " --db " + store.Redact(env["PAYHOOK_DB"])
		fix := regexp.MustCompile(`payhook backfill --source shop --since \S+` + regexp.QuoteMeta(flags) + `\n`)
		if code, out, errOut := run(t, env, "reconcile", "--source", "shop", "--config", env["PAYHOOK_CONFIG"], "--db", env["PAYHOOK_DB"]); code != 1 || !fix.MatchString(out) {
			t.Fatalf("reconcile --config --db before the backfill = %d, %q, %q; want 1 and a fix matching %s", code, out, errOut, fix)
		}
		if code, out, errOut := run(t, env, "backfill", "--source", "shop"); code != 0 || !strings.Contains(out, "2 new") {
			t.Fatalf("backfill = %d, %q, %q; want 0 and 2 new", code, out, errOut)
		}
		if code, _, errOut := run(t, env, "reconcile", "--source", "shop"); code != 1 || !strings.Contains(errOut, note) {
			t.Fatalf("reconcile with the events unprocessed = %d, %q; want 1 and %q", code, errOut, note)
		}
		// Given --db, the command the note names lists that database.
		withDB := "payhook events list --source shop --status received --db " + store.Redact(env["PAYHOOK_DB"]) + ")"
		if code, _, errOut := run(t, env, "reconcile", "--source", "shop", "--db", env["PAYHOOK_DB"]); code != 1 || !strings.Contains(errOut, withDB) {
			t.Fatalf("reconcile --db with the events unprocessed = %d, %q; want 1 and %q", code, errOut, withDB)
		}
	})
}

// TestReconcileRunsLimit: reconcile runs takes --limit within the bounds
// of every other list (1 to api.MaxLimit): 0 or a negative number was
// taken as 100, and any larger number as is.
func TestReconcileRunsLimit(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PAYHOOK_DB": "sqlite://" + filepath.Join(t.TempDir(), "none.db")}
	for _, limit := range []string{"0", "-3", "100000"} {
		code, out, errOut := run(t, env, "reconcile", "runs", "--limit", limit)
		if code != 2 || !strings.Contains(errOut, "--limit "+limit+": want 1 to") || out != "" {
			t.Errorf("reconcile runs --limit %s = %d, stdout %q, stderr %q; want a usage error", limit, code, out, errOut)
		}
	}
}

// The report says how many objects a run left unchecked past its cap of
// retrieves, by kind, and says nothing of it when there are none.
func TestPrintReportUnchecked(t *testing.T) {
	t.Parallel()
	rep := &reconcile.Report{Source: "s", Listed: map[string]int{}, Unchecked: map[string]int{adapter.KindPayment: 2, adapter.KindSubscription: 1}}
	var text strings.Builder
	if err := printReport(&text, rep, ""); err != nil || !strings.Contains(text.String(), "unchecked: 2 payments, 1 subscription payhook stored") {
		t.Fatalf("report %q, %v; want the unchecked objects counted", text.String(), err)
	}
	rep.Unchecked = nil
	text.Reset()
	if err := printReport(&text, rep, ""); err != nil || strings.Contains(text.String(), "unchecked") {
		t.Fatalf("report %q, %v; want no unchecked line", text.String(), err)
	}
}
