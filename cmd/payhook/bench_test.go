package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payhook/payhook/bench"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestBench runs payhook bench in-process on each engine, for every
// provider, against the floor and a payhook it starts itself, in both
// loops. It checks counts only, never timing: every delivery answered (a
// 503 is allowed, the answer of a store that took longer than the
// receiver waits, on a busy machine), every acked event stored once,
// duplicates adding no rows, the drain complete.
func TestBench(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		for _, provider := range bench.Providers() {
			t.Run(provider, func(t *testing.T) {
				t.Parallel()
				dbURL := dbtest.URL(t, engine)
				svg := filepath.Join(t.TempDir(), "bench.svg")
				var out, errs bytes.Buffer
				m := &Main{Stdout: &out, Stderr: &errs, Getenv: testEnv(nil)}
				args := []string{"bench", "--floor", "--db", dbURL, "--provider", provider, "--events", "40", "--duplicates", "10",
					"--concurrency", "4", "--rate", "50", "--json", "--svg", svg,
					"--stall", "5m"} // a busy machine under -race can pause processing for a minute
				if code := m.Run(context.Background(), args); code != 0 {
					t.Fatalf("payhook %s = %d\n%s", strings.Join(args, " "), code, errs.String())
				}
				var rep benchReport
				if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
					t.Fatalf("JSON output: %v\n%s", err, out.String())
				}
				if len(rep.Results) != 4 {
					t.Fatalf("%d results; want 4 (floor and %s, two loads)", len(rep.Results), engine)
				}
				timeouts := 0
				for _, r := range rep.Results {
					timeouts += r.Errors["503"]
					answered := r.Acked
					for status, n := range r.Errors {
						if status != "503" {
							t.Errorf("%s %s: %d deliveries answered %s", r.Target, r.Load(), n, status)
						}
						answered += n
					}
					if r.Sent != 50 || answered != 50 {
						t.Errorf("%s %s: %d sent, %d answered; want 50, 50", r.Target, r.Load(), r.Sent, answered)
					}
					if r.Target == "floor" {
						continue
					}
					if r.VsFloor == nil || r.Drain <= 0 {
						t.Errorf("%s %s: vs floor %v, drain %v; want ratios and a drain", r.Target, r.Load(), r.VsFloor, r.Drain)
					}
					// Read from the in-process payhook's /metrics.
					if !(r.InCommits > 0) || math.IsInf(r.InCommits, 0) {
						t.Errorf("%s %s: %v s in commits a second; want a positive time", r.Target, r.Load(), r.InCommits)
					}
					// Acked events are stored; no event twice; a duplicate adds nothing.
					if r.Stored < r.AckedEvents || r.Stored > r.Events {
						t.Errorf("%s %s: %d events stored, %d acked; want between %d and %d", r.Target, r.Load(), r.Stored, r.AckedEvents, r.AckedEvents, r.Events)
					}
				}
				if timeouts > 0 {
					// A delivery answered 503 may still be committed after
					// its answer: the database holds a count no one can tell.
					t.Logf("%d deliveries answered 503 (a busy machine): not counting the database's rows", timeouts)
					return
				}
				db, err := store.Open(context.Background(), dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var rows, waiting, failed int
				if err := db.SQL.QueryRow(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'received' THEN 1 ELSE 0 END), 0),
					COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0) FROM payhook_events`).Scan(&rows, &waiting, &failed); err != nil {
					t.Fatal(err)
				}
				if want := rep.Results[1].Stored + rep.Results[3].Stored; rows != want || waiting != 0 || failed != 0 {
					t.Errorf("database holds %d events, %d waiting, %d failed; want %d, 0, 0", rows, waiting, failed, want)
				}
				if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<polyline")) {
					t.Errorf("svg: %v, %d bytes without a line", err, len(b))
				}
			})
		}
	})
}

// TestBenchHold: with --hold, the in-process payhook stores every
// delivery of the load and processes none of them until it is answered;
// then processing alone works them all off, on each engine.
func TestBenchHold(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		var out, errs bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errs, Getenv: testEnv(nil)}
		// A slow load, over which processing would otherwise keep up.
		args := []string{"bench", "--db", dbtest.URL(t, engine), "--hold", "--events", "30", "--duplicates", "5",
			"--rate", "20", "--json", "--stall", "5m"}
		if code := m.Run(context.Background(), args); code != 0 {
			t.Fatalf("payhook %s = %d\n%s", strings.Join(args, " "), code, errs.String())
		}
		var rep benchReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("JSON output: %v\n%s", err, out.String())
		}
		if len(rep.Results) != 1 {
			t.Fatalf("%d results; want 1", len(rep.Results))
		}
		r := rep.Results[0]
		// Every stored event was still waiting when the load ended, and
		// the drain found none waiting after.
		if r.Stored < r.AckedEvents || r.HeldWaiting != int64(r.Stored) || !(r.ProcessedAlone > 0) || r.Drain <= 0 {
			t.Errorf("%d stored, %d acked, %d waiting at the release, %v processed/s alone, drain %v; want all stored waiting, then processed",
				r.Stored, r.AckedEvents, r.HeldWaiting, r.ProcessedAlone, r.Drain)
		}
	})
}

// TestBenchRefusesAnInbox: bench --db refuses a database holding events
// of another source (an inbox's), which its load would fill with its own,
// before its serve starts there and works the inbox's queue.
func TestBenchRefusesAnInbox(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t, "sqlite")
	seedEvents(t, dbURL, [2]string{"stripe", "evt_real"})
	untouched := seedWaiting(t, dbURL, "stripe")
	code, _, errOut := run(t, nil, "bench", "--db", dbURL, "--events", "5", "--duplicates", "0", "--concurrency", "1")
	if code != 2 || !strings.Contains(errOut, `holds events of source "stripe"`) {
		t.Errorf("bench on an inbox's database = %d, %s; want 2 and a refusal", code, errOut)
	}
	untouched()
}

// TestBenchUsage checks that bad command lines are refused before any
// target starts.
func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"--url", "http://127.0.0.1:1/webhooks/x"},
		{"--floor", "--provider", "nope"},
		{"--floor", "--events", "0"},
		{"--floor", "--duplicates", "-1"},
		{"--floor", "--concurrency", "0"},
		{"--floor", "--concurrency", "x"},
		{"--floor", "--concurrency", "", "--rate", ""},
		{"--floor", "--url-db", "sqlite://x.db"},
		{"--url", "a=http://127.0.0.1:1/webhooks/a", "--url", "b=http://127.0.0.1:2/webhooks/b", "--secret", "whsec_x",
			"--url-db", "sqlite://a.db", "--url-db", "sqlite://b.db", "--url-db", "sqlite://c.db"},
		{"--url", "two=http://127.0.0.1:1/webhooks/a,http://127.0.0.1:2/webhooks/b", "--secret", "whsec_x"},
		{"--url", "two=http://127.0.0.1:1/webhooks/a,127.0.0.1:2/webhooks/a", "--secret", "whsec_x"},
		{"--floor", "--event", "refund.failed"},
		{"--floor", "--stall", "0s"},
		{"--url", "peer=ftp://127.0.0.1:1/x", "--secret", "whsec_x"},
		{"--url", "127.0.0.1:1/x", "--secret", "whsec_x"},
		{"--url", "floor=http://127.0.0.1:1/x", "--secret", "whsec_x"},
		{"--floor", "--hold", "--concurrency", "4"},
		{"--db", "sqlite://x.db", "--hold"}, // two loads: c=16 and c=64
		{"--db", "sqlite://x.db", "--hold", "--concurrency", "4", "--rate", "10"},
	} {
		var errs bytes.Buffer
		m := &Main{Stdout: &bytes.Buffer{}, Stderr: &errs, Getenv: testEnv(nil)}
		if code := m.Run(context.Background(), append([]string{"bench"}, args...)); code != 2 {
			t.Errorf("payhook bench %v = %d; want 2\n%s", args, code, errs.String())
		}
	}
}

// TestBenchNamedURL measures receivers given by URL under the names the
// command line gives them, as make bench names stripe-sync-engine "peer":
// here floor servers started by the test stand for them, one for "peer",
// two for "pair", which shares the deliveries among them.
func TestBenchNamedURL(t *testing.T) {
	t.Parallel()
	var fs [2]*bench.Floor
	for i := range fs {
		f, err := bench.StartFloor()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fs[i] = f
	}
	var out, errs bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errs, Getenv: testEnv(nil)}
	args := []string{"bench", "--floor", "--url", "peer=" + fs[0].URL, "--url", "pair=" + fs[0].URL + "," + fs[1].URL,
		"--secret", "whsec_x", "--event", "payment.succeeded", "--events", "10", "--duplicates", "2", "--concurrency", "2", "--json"}
	if code := m.Run(context.Background(), args); code != 0 {
		t.Fatalf("payhook %s = %d\n%s", strings.Join(args, " "), code, errs.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.String())
	}
	if len(rep.Results) != 3 {
		t.Fatalf("%d results; want 3", len(rep.Results))
	}
	for i, name := range []string{"peer", "pair"} {
		if r := rep.Results[i+1]; r.Target != name || r.Kind != "payment.succeeded" || r.Acked != 12 || r.VsFloor == nil {
			t.Errorf("result %d: target %q, kind %q, %d acked, vs floor %v; want %s, payment.succeeded, 12, ratios", i+1, r.Target, r.Kind, r.Acked, r.VsFloor, name)
		}
	}
}

// TestBenchRateAlone: --rate without --concurrency runs the rate loads
// only, not the default closed loops besides.
func TestBenchRateAlone(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errs, Getenv: testEnv(nil)}
	args := []string{"bench", "--floor", "--rate", "200", "--events", "10", "--duplicates", "0", "--json"}
	if code := m.Run(context.Background(), args); code != 0 {
		t.Fatalf("payhook %s = %d\n%s", strings.Join(args, " "), code, errs.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.String())
	}
	if len(rep.Results) != 1 || rep.Results[0].Load() != "rate=200/s" {
		var loads []string
		for _, r := range rep.Results {
			loads = append(loads, r.Target+" "+r.Load())
		}
		t.Fatalf("loads %v; want the floor at rate=200/s only", loads)
	}
}

// TestHeadBuffer: an in-process payhook's log keeps its first bytes only,
// however much is written after, and every write reports success.
func TestHeadBuffer(t *testing.T) {
	h := &headBuffer{max: 10}
	for _, w := range []string{"startup ", "failed: ", "and a log line per fact after that"} {
		if n, err := h.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
		}
	}
	if got := h.String(); got != "startup fa" {
		t.Errorf("kept %q; want the first 10 bytes", got)
	}
}
