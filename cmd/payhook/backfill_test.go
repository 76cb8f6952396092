package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// TestBackfillAfterOutage plays the outage scenario (5% of the events
// dropped for good) against serve, then runs payhook backfill: every
// event the provider created is then stored exactly once and processed,
// the dropped ones as backfilled, and sim check finds no difference; a
// second backfill adds nothing. On both engines, as billete and as Stripe.
func TestBackfillAfterOutage(t *testing.T) {
	t.Parallel()
	for _, f := range []flavour.Flavour{flavour.Billete(), flavour.Stripe()} {
		t.Run(f.Name(), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				// The provider's API, answering once the run has made it.
				var handler atomic.Pointer[http.Handler]
				api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if h := handler.Load(); h != nil {
						(*h).ServeHTTP(w, r)
						return
					}
					http.Error(w, "not yet", http.StatusServiceUnavailable)
				}))
				defer api.Close()
				secret, key := f.NewSecret(), "sk_test_backfill"
				// An event whose payment was dropped fails processing (not
				// seen yet) until the backfill brings the payment. Retries
				// spaced at most 500ms apart, never given up here: with the
				// default backoff (1s, doubling) the next try after the
				// backfill could be minutes away on a loaded machine, and
				// the wait for processing below would see nothing move.
				cfgPath := writeConfig(t, fmt.Sprintf("sources:\n  - name: b\n    provider: %s\n    secrets: [%q]\n"+
					"    environment: test\n    api_url: %s\n    api_key: %s\n"+
					"processing:\n  retry_base: 20ms\n  retry_max: 500ms\n  max_attempts: 10000\n", f.Provider(), secret, api.URL, key))
				env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": cfgPath}
				var logs syncBuffer
				srv, err := startInProcess(ctx, &Main{Stdout: io.Discard, Stderr: &logs, Getenv: testEnv(env)})
				if err != nil {
					t.Fatalf("%v\n%s", err, logs.String())
				}
				defer srv.stop()
				res, _, err := sim.Run(ctx, "outage", sim.RunConfig{Target: srv.url + "/webhooks/b", Secret: secret, Flavour: f,
					Seed: 9, TimeScale: 20000, APIKey: key, Logger: slog.New(slog.DiscardHandler),
					Started: func(p *sim.Provider) { h := p.Handler(); handler.Store(&h) }})
				if err != nil {
					t.Fatal(err)
				}
				lost := res.Expected.Undelivered()
				if len(lost) == 0 {
					t.Fatal("the outage dropped nothing: nothing to backfill")
				}
				db, err := store.Open(ctx, dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()

				t.Logf("%d events created, %d dropped for good", len(res.Expected.Events), len(lost))
				// Some events the sim counts undelivered may be stored all the
				// same (answered after the sim gave up waiting): count them.
				var before int
				if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE source = 'b'`).Scan(&before); err != nil {
					t.Fatal(err)
				}
				total := len(res.Expected.Events)
				code, out, errOut := run(t, env, "backfill", "--source", "b", "--json")
				var first struct {
					OK                          bool
					Listed, New, Known, Refused int
				}
				if err := json.Unmarshal([]byte(out), &first); code != 0 || err != nil || !first.OK || first.Listed != total ||
					first.New+first.Known != total || first.Refused != 0 || first.New > total-before {
					t.Fatalf("backfill = %d, %v\n%s\n%s; want ok, %d listed, at most %d new, none refused", code, err, out, errOut, total, total-before)
				}
				if !strings.Contains(errOut, "backfill b: page 1: listed") {
					t.Errorf("backfill's progress (not a terminal) = %q; want a plain line per page", errOut)
				}
				if err := awaitProgress("the backfilled events processed", stallLimit, 50*time.Millisecond, func() (bool, string) {
					var waiting int
					db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE source = 'b' AND status = 'received'`).Scan(&waiting)
					return waiting == 0, fmt.Sprint(waiting)
				}); err != nil {
					// Say what holds the events that wait.
					waiting, _ := db.ListEvents(ctx, store.Filter{Source: "b", Status: payhook.StatusReceived, Limit: 10})
					for _, ev := range waiting {
						t.Logf("waiting: %s %s via %s, %d attempts, last error %q; its jobs: %s", ev.EventID, ev.Type, ev.ReceivedVia, ev.Attempts, ev.LastError, jobsOf(db, ev.ID))
					}
					t.Fatal(err)
				}
				evs, err := db.ListEvents(ctx, store.Filter{Source: "b", Limit: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				byID := map[string]*payhook.Event{}
				for _, ev := range evs {
					if byID[ev.EventID] != nil {
						t.Fatalf("event %s stored twice", ev.EventID)
					}
					byID[ev.EventID] = ev
				}
				var backfilled []string
				for _, ev := range evs {
					if ev.ReceivedVia == payhook.ViaBackfill {
						backfilled = append(backfilled, ev.EventID)
					}
				}
				if len(backfilled) != first.New || first.New == 0 {
					t.Fatalf("%d events received via backfill; the backfill said %d new (want some)", len(backfilled), first.New)
				}
				if len(evs) != len(res.Expected.Events) {
					t.Fatalf("%d events stored; the provider created %d", len(evs), len(res.Expected.Events))
				}
				for _, e := range res.Expected.Events {
					ev := byID[e.StoredID]
					switch {
					case ev == nil:
						t.Fatalf("event %s (%s) not stored", e.StoredID, e.Type)
					case ev.Status != payhook.StatusProcessed && ev.Status != payhook.StatusIgnored:
						t.Fatalf("event %s is %s (%s); want handled", e.StoredID, ev.Status, ev.LastError)
					case e.Delivered && ev.ReceivedVia != payhook.ViaWebhook:
						t.Fatalf("delivered event %s came %s; want webhook", e.StoredID, ev.ReceivedVia)
					}
				}
				expect := filepath.Join(t.TempDir(), "expected.json")
				raw, _ := json.Marshal(res)
				if err := os.WriteFile(expect, raw, 0o600); err != nil {
					t.Fatal(err)
				}
				if code, out, errOut := run(t, env, "sim", "check", "--expect", expect, "--source", "b"); code != 0 {
					t.Fatalf("sim check after the backfill = %d\n%s\n%s", code, out, errOut)
				}

				code, out, errOut = run(t, env, "backfill", "--source", "b", "--json")
				var doc struct {
					OK         bool
					New, Known int
					Runs       []int64
					Refusals   []any
				}
				if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || !doc.OK || doc.New != 0 ||
					doc.Known != len(res.Expected.Events) || len(doc.Runs) != 1 || doc.Refusals == nil {
					t.Fatalf("second backfill --json = %d, %v\n%s\n%s; want ok, nothing new, all known", code, err, out, errOut)
				}
				if code, out, _ := run(t, env, "events", "show", backfilled[0], "--source", "b"); code != 0 ||
					!strings.Contains(out, "received_via") || !strings.Contains(out, "backfill") {
					t.Fatalf("events show of a backfilled event = %d\n%s; want received_via backfill", code, out)
				}
			})
		})
	}
}

// TestBackfillUsage: what backfill refuses, before reading the provider.
func TestBackfillUsage(t *testing.T) {
	t.Parallel()
	noAPI := writeConfig(t, "sources:\n  - name: b\n    provider: billete\n    secrets: [whsec_eA==]\n")
	// An API that is never called: each case is refused before.
	withAPI := writeConfig(t, "sources:\n  - name: b\n    provider: billete\n    secrets: [whsec_eA==]\n"+
		"    api_url: http://127.0.0.1:1\n    api_key: sk_test_x\n")
	dbURL := "sqlite://" + filepath.Join(t.TempDir(), "payhook.db")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no source", []string{"backfill"}, 2, "--source is required"},
		{"a negative since", []string{"backfill", "--source", "b", "--since", "-1h"}, 2, "--since must be a positive duration"},
		{"a since neither duration nor time", []string{"backfill", "--source", "b", "--since", "yesterday"}, 2, "want a duration such as 3h or an RFC 3339 time"},
		{"a since time, as reconcile's fixes print it", []string{"backfill", "--source", "b", "--since", "2026-12-01T05:00:00Z", "--config", noAPI}, 1, `source "b" has no api_url and api_key`},
		{"a bad until", []string{"backfill", "--source", "b", "--until", "yesterday"}, 2, "--until \"yesterday\" is not an RFC 3339 time"},
		{"an until before since", []string{"backfill", "--source", "b", "--since", "2026-12-01T06:00:00Z", "--until", "2026-12-01T05:00:00Z", "--config", withAPI}, 2, "is not after --since"},
		{"an argument", []string{"backfill", "--source", "b", "extra"}, 2, "takes no argument"},
		{"no config", []string{"backfill", "--source", "b"}, 2, "no config file"},
		{"an unknown source", []string{"backfill", "--source", "x", "--config", noAPI}, 1, `no source "x" (sources: b)`},
		{"a source without api_url", []string{"backfill", "--source", "b", "--config", noAPI}, 1, `source "b" has no api_url and api_key`},
		// A mistyped --db: not a new database holding what was listed,
		// where no serve processes it, and "stored N new" said all the same.
		{"a database that does not exist", []string{"backfill", "--source", "b", "--config", withAPI}, 1, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := run(t, map[string]string{"PAYHOOK_DB": dbURL}, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("%v = %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
			}
		})
	}
	if _, err := os.Stat(strings.TrimPrefix(dbURL, "sqlite://")); err == nil {
		t.Error("a refused backfill created the database")
	}
}

// jobEvent is the expression of a processing job's event id in SQL.
func jobEvent(db *store.DB) string {
	if db.Engine == store.SQLite {
		return `json_extract(args, '$.event_id')`
	}
	return `CAST(args->>'event_id' AS BIGINT)`
}

// oneJobEach checks that no event of db has more than one processing
// job: a batch deletes the jobs of the events it applies besides its
// own, so each event has one job or none.
func oneJobEach(db *store.DB) error {
	var jobs, events int
	if err := db.SQL.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT `+jobEvent(db)+`)
		FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&jobs, &events); err != nil {
		return fmt.Errorf("count processing jobs: %w", err)
	}
	if jobs != events {
		return fmt.Errorf("%d processing jobs for %d events; want one each at most", jobs, events)
	}
	return nil
}

// jobsOf describes River's jobs of event id (state, attempt, when due),
// for a test that says what holds an event that waits.
func jobsOf(db *store.DB, id int64) string {
	rows, err := db.SQL.Query(`SELECT id, state, attempt, max_attempts, CAST(scheduled_at AS TEXT), CAST(finalized_at AS TEXT)
		FROM river_job WHERE kind = 'payhook_process_event' AND `+jobEvent(db)+` = $1 ORDER BY id`, id)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var job, attempt, maxAttempts int64
		var state, scheduled string
		var finalized sql.NullString
		if err := rows.Scan(&job, &state, &attempt, &maxAttempts, &scheduled, &finalized); err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("job %d %s attempt %d/%d scheduled %s finalized %s", job, state, attempt, maxAttempts, scheduled, finalized.String))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// TestBackfillCLIProviderClockAhead: payhook backfill with no
// --until lists up to 5 minutes past now (reconcile.OpenEndSkew): an
// event the provider dates two minutes ahead of payhook's clock is
// stored, not skipped as outside the window (it was while the command
// passed its own now as the window's end).
func TestBackfillCLIProviderClockAhead(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		f := flavour.Billete()
		d := deliver.New(deliver.Config{TimeScale: 1000})
		t.Cleanup(d.Close)
		ahead := func() time.Time { return time.Now().Add(2 * time.Minute) }
		p, err := sim.New(sim.Config{Flavour: f, Sender: d, Seed: 9, TestKey: "sk_test_ahead", Now: ahead})
		if err != nil {
			t.Fatal(err)
		}
		co, err := p.CreateCheckout(sim.EnvTest, 1000, "EUR", "ord_ahead")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
			t.Fatal(err)
		}
		evs, _ := p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
		api := httptest.NewServer(p.Handler())
		t.Cleanup(api.Close)
		env := map[string]string{"PAYHOOK_DB": dbtest.URL(t, engine), "PAYHOOK_CONFIG": writeConfig(t, fmt.Sprintf(
			"sources:\n  - name: s\n    provider: billete\n    secrets: [%q]\n    environment: test\n    api_url: %s\n    api_key: sk_test_ahead\n",
			f.NewSecret(), api.URL))}
		if code, _, errOut := run(t, env, "migrate"); code != 0 {
			t.Fatalf("migrate = %d: %s", code, errOut)
		}
		code, out, errOut := run(t, env, "backfill", "--source", "s", "--json")
		var doc struct {
			OK          bool
			Listed, New int
			Until       time.Time
		}
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || !doc.OK || doc.New != len(evs) {
			t.Fatalf("backfill = %d, %v\n%s\n%s; want all %d events (dated 2 minutes ahead) stored, the window ending 5 minutes past now",
				code, err, out, errOut, len(evs))
		}
	})
}
