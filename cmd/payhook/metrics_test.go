package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// TestMetricsAfterStorm plays a small storm against serve and scrapes
// /metrics: the counters of events received, processed, ignored and
// failed, and the gauges read from the database, equal the store's counts;
// duplicates and group commits were counted.
func TestMetricsAfterStorm(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		const name = "billete"
		dbURL := dbtest.URL(t, engine)
		f, _ := flavour.ByName(name)
		secret := f.NewSecret()
		config := filepath.Join(t.TempDir(), "payhook.yaml")
		os.WriteFile(config, fmt.Appendf(nil, "sources:\n  - name: %s\n    provider: %s\n    secrets: [\"${SECRET}\"]\n"+
			"processing:\n  retry_base: 20ms\n  retry_max: 500ms\n  max_attempts: 1000\n", name, f.Provider()), 0o600)
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": config, "SECRET": secret}
		s := startServer(t, env)
		expect := filepath.Join(t.TempDir(), "expected.json")
		simRun := startRun(t, env, "sim", "run", "storm", "--target", s.url+"/webhooks/"+name,
			"--secret", secret, "--flavour", name, "--seed", "7", "--time-scale", "500", "--size", "0.1", "--expect", expect)
		waitProgress(t, "sim run storm", func() (bool, string) {
			return simRun.exited(), simRun.stderr.String()
		})
		if code := simRun.stop(); code != 0 {
			t.Fatalf("sim run storm = %d\n%s\n%s", code, simRun.stdout, simRun.stderr)
		}
		// Refused deliveries, counted by reason: a wrong signature, then a
		// body signed right that is no JSON object (both answered 400),
		// then an unknown source.
		for _, d := range []struct {
			body string
			sign bool
			path string
			code int
		}{
			{`{"id":"evt_1"}`, false, name, http.StatusBadRequest},
			{`[1]`, true, name, http.StatusBadRequest},
			{`{}`, false, "nowhere", http.StatusNotFound},
		} {
			req, _ := http.NewRequest(http.MethodPost, s.url+"/webhooks/"+d.path, strings.NewReader(d.body))
			h, _ := f.Sign([]string{"whsec_" + strings.Repeat("A", 32)}, flavour.Event{ID: "evt_refused"}, "", []byte(d.body), time.Now())
			if d.sign {
				h, _ = f.Sign([]string{secret}, flavour.Event{ID: "evt_refused"}, "", []byte(d.body), time.Now())
			}
			for k, v := range h {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != d.code {
				t.Fatalf("POST %s (signed %v) = %d, want %d", d.body, d.sign, resp.StatusCode, d.code)
			}
		}
		raw, _ := os.ReadFile(expect)
		var res sim.Result
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("expected state is not JSON: %v", err)
		}
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := waitProcessed(context.Background(), db, name, &res, processingStall); err != nil {
			t.Fatal(err)
		}
		// The hooks run just after each commit: wait for the last ones.
		var scraped samples
		var counts map[payhook.Status]int
		waitProgress(t, "metrics equal to the store's counts", func() (bool, string) {
			if counts, err = db.CountByStatus(context.Background()); err != nil {
				t.Fatal(err)
			}
			scraped = scrape(t, s.url+"/metrics")
			total := counts[payhook.StatusReceived] + counts[payhook.StatusProcessed] + counts[payhook.StatusIgnored] + counts[payhook.StatusFailed]
			// A scrape whose database reads timed out on a busy machine
			// lacks its gauges: scrape again.
			ok := scraped.sum("payhook_metrics_scrape_errors") == 0 &&
				scraped.sum("payhook_events_received_total") == float64(total) &&
				scraped.sum("payhook_events_processed_total") == float64(counts[payhook.StatusProcessed]) &&
				scraped.sum("payhook_events_ignored_total") == float64(counts[payhook.StatusIgnored]) &&
				scraped.sum("payhook_events_failed_total") == float64(counts[payhook.StatusFailed])
			return ok, fmt.Sprintf("store %v, scrape errors %v, scraped received %v processed %v ignored %v failed %v", counts,
				scraped.sum("payhook_metrics_scrape_errors"), scraped.sum("payhook_events_received_total"), scraped.sum("payhook_events_processed_total"),
				scraped.sum("payhook_events_ignored_total"), scraped.sum("payhook_events_failed_total"))
		})
		for _, st := range []payhook.Status{payhook.StatusReceived, payhook.StatusProcessed, payhook.StatusIgnored, payhook.StatusFailed} {
			if got := scraped.sum(`payhook_events{status="` + string(st) + `"}`); got != float64(counts[st]) {
				t.Errorf("payhook_events{status=%q} = %v, store has %d", st, got, counts[st])
			}
		}
		for _, c := range []struct {
			metric string
			want   func(float64) bool
			say    string
		}{
			{"payhook_queue_depth", func(v float64) bool { return v == 0 }, "0 (all processed)"},
			{"payhook_queue_oldest_age_seconds", func(v float64) bool { return v == 0 }, "0 (none waiting)"},
			{"payhook_events_duplicates_total", func(v float64) bool { return v > 0 }, "> 0 (the storm redelivers)"},
			{"payhook_groupcommit_batch_events_sum", func(v float64) bool {
				return v == float64(scraped.sum("payhook_events_received_total")+scraped.sum("payhook_events_duplicates_total"))
			}, "the deliveries stored or found duplicate"},
			{"payhook_groupcommit_commit_duration_seconds_count", func(v float64) bool {
				return v >= scraped.sum("payhook_groupcommit_batch_events_count")
			}, "one at least per group commit"},
			{"payhook_ack_duration_seconds_count", func(v float64) bool { return v > 0 }, "> 0"},
			{"payhook_end_to_end_duration_seconds_count", func(v float64) bool {
				return v == scraped.sum("payhook_events_processed_total")+scraped.sum(`payhook_events_ignored_total{source="billete",stage="process"}`)+scraped.sum("payhook_events_failed_total")
			}, "one per processing that ended"},
			{"payhook_metrics_scrape_errors", func(v float64) bool { return v == 0 }, "0"},
			{`payhook_deliveries_rejected_total{reason="signature",source="billete"}`, func(v float64) bool { return v == 1 }, "1"},
			{`payhook_deliveries_rejected_total{reason="malformed",source="billete"}`, func(v float64) bool { return v == 1 }, "1"},
			{`payhook_deliveries_rejected_total{reason="unknown_source",source=""}`, func(v float64) bool { return v == 1 }, "1"},
		} {
			if got := scraped.sum(c.metric); !c.want(got) {
				t.Errorf("%s = %v, want %s", c.metric, got, c.say)
			}
		}
		for series := range scraped {
			if strings.Contains(series, "event_id") {
				t.Errorf("series %s has an event id label", series)
			}
		}
	})
}

// samples are the values of a scrape by series ("name{labels}").
type samples map[string]float64

// sum adds the series whose text starts with prefix: a metric name (all
// its series), or a name with its labels in Prometheus's order.
func (s samples) sum(prefix string) float64 {
	var n float64
	for k, v := range s {
		if k == prefix || strings.HasPrefix(k, prefix+"{") || (strings.Contains(prefix, "{") && strings.HasPrefix(k, prefix)) {
			n += v
		}
	}
	return n
}

func scrape(t *testing.T, url string) samples {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics = %d: %s", resp.StatusCode, b)
	}
	out := samples{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}
