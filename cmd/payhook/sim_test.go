package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/check"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// TestSimStormAgainstServe plays the storm scenario through the CLI
// against a real payhook serve, once per flavour (billete on PostgreSQL
// at full size: over 2,000 deliveries), each on its own database, and
// checks that every event the provider created is stored exactly once and
// handled exactly once (stripe's API, read for each event, refusing
// requests beyond 10 a second), with one job each at most (a batch deletes the
// jobs it applies), and that payhook's payments,
// orders, subscriptions and balances equal the provider's final state.
//
// On SQLite, whose one connection serialises every delivery and every
// job, billete plays at 0.3 (over 600 deliveries): size adds only time
// there, about 4 minutes under the race detector on a busy machine.
// PAYHOOK_FAULTS=long (make faults) plays it at full size on SQLite too.
func TestSimStormAgainstServe(t *testing.T) {
	t.Parallel()
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		for _, name := range flavour.Names() {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dbURL := dbtest.URL(t, engine)
				f, _ := flavour.ByName(name)
				secret := f.NewSecret()
				// Stripe's times are whole seconds: payhook fetches each
				// subscription from the provider's API, which the run serves.
				var api, apiArgs []string
				if name == "stripe" {
					addr := freeLoopbackAddr(t)
					api = []string{"    api_url: http://" + addr, "    api_key: sk_test_storm"}
					// The API stays up until the test has seen every event
					// processed and ends the run (payhook processes behind
					// the deliveries, slowly on SQLite under -race): no
					// linger is long enough on every machine.
					// And it takes 10 requests a second, fewer than payhook's
					// 20 (Stripe's api_rate): reads may be refused (429), and
					// their events put off.
					apiArgs = []string{"--api-addr", addr, "--api-key", "sk_test_storm", "--api-linger", "1h", "--api-rate", "10"}
				}
				// An event that comes before what it is about is retried
				// every 20 to 500 ms, not on an hour-long doubling curve
				// (whose overshoot was most of the test's time), with
				// attempts enough to wait minutes on a slow machine.
				config := filepath.Join(t.TempDir(), "payhook.yaml")
				os.WriteFile(config, fmt.Appendf(nil, "sources:\n  - name: %s\n    provider: %s\n    secrets: [\"${SECRET}\"]\n%s"+
					"processing:\n  retry_base: 20ms\n  retry_max: 500ms\n  max_attempts: 1000\n", name, f.Provider(), strings.Join(append(api, ""), "\n")), 0o600)
				env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": config, "SECRET": secret}
				s := startServer(t, env)

				size, full := "0.15", name == "billete" && (engine == "postgres" || os.Getenv("PAYHOOK_FAULTS") == "long")
				switch {
				case full:
					size = "1"
				case name == "billete":
					size = "0.3"
				}
				expect := filepath.Join(t.TempDir(), "expected.json")
				simRun := startRun(t, env, append([]string{"sim", "run", "storm", "--target", s.url + "/webhooks/" + name,
					"--secret", secret, "--flavour", name, "--seed", "5", "--time-scale", "500",
					"--size", size, "--expect", expect}, apiArgs...)...)
				// The expected state is written when the deliveries end; the
				// provider's API (stripe) keeps serving until simRun.stop.
				waitProgress(t, "sim run storm", func() (bool, string) {
					return simRun.exited() || strings.Contains(simRun.stdout.String(), "expected final state written to"), simRun.stderr.String()
				})
				if simRun.exited() {
					if code := simRun.stop(); code != 0 {
						t.Fatalf("sim run storm = %d\n%s\n%s", code, simRun.stdout, simRun.stderr)
					}
				}
				defer func() {
					if code := simRun.stop(); code != 0 {
						t.Errorf("sim run storm = %d after the test ended it\n%s", code, simRun.stderr)
					}
				}()
				raw, _ := os.ReadFile(expect)
				var res sim.Result
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatalf("expected state is not JSON: %v", err)
				}
				if want := map[bool]int{true: 2000, false: 600}[full]; name == "billete" && res.Stats.Attempts-res.Stats.Outage < want {
					t.Fatalf("storm made %d deliveries, want at least %d", res.Stats.Attempts-res.Stats.Outage, want)
				}
				// At time scale 500 the provider retries a delivery for 5
				// minutes: one it gave up on met 5 minutes of failures.
				if res.Stats.GaveUp > 0 {
					t.Fatalf("the provider gave up %d deliveries after retrying them for 5 minutes: payhook answered no 2xx (stats %+v)", res.Stats.GaveUp, res.Stats)
				}
				if res.Stats.Duplicates == 0 || res.Stats.Bursts == 0 || res.Stats.Outage == 0 {
					t.Fatalf("stats %+v lack a fault", res.Stats)
				}

				db, err := store.Open(context.Background(), dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				rep, err := waitProcessed(context.Background(), db, name, &res, processingStall)
				if err != nil {
					t.Fatal(err)
				}
				if !rep.ExactlyOnce() || rep.Stored != len(res.Expected.Events) {
					t.Fatalf("%+v for %d provider events", rep, len(res.Expected.Events))
				}
				if err := oneJobEach(db); err != nil {
					t.Fatal(err)
				}
				diffs, err := compareBilling(context.Background(), db, name, res.Expected)
				if err != nil {
					t.Fatal(err)
				}
				if len(diffs) > 0 {
					t.Fatalf("payhook's billing state differs from the provider's in %d places:\n%s", len(diffs), strings.Join(diffs[:min(len(diffs), 15)], "\n"))
				}
				// The storm's redeliveries differ at most in the members
				// that name a delivery (Paddle's notification_id, BTCPay's
				// deliveryId): none is a conflicting body.
				var conflicts int
				if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_alerts WHERE kind = $1`, store.AlertEventBodyConflict).Scan(&conflicts); err != nil {
					t.Fatal(err)
				}
				if conflicts != 0 {
					t.Errorf("%d event_body_conflict alerts after a storm of redeliveries; want none", conflicts)
				}
				if name == "stripe" {
					simRun.stop()
					out := simRun.stdout.String()
					var requests, refused int
					_, report, _ := strings.Cut(out, "provider API: ")
					if _, err := fmt.Sscanf(report, "%d requests, %d refused", &requests, &refused); err != nil {
						t.Errorf("sim run printed no count of the API's requests: %v\n%s", err, out)
					}
					// How many depends on how fast this machine processes;
					// TestRateLimitedProviderLosesNoAttempt meets refusals
					// whatever its speed.
					t.Logf("the provider's API refused %d of %d requests for --api-rate", refused, requests)
				}
			})
		}
	})
}

// running is a payhook command running in the background.
type running struct {
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan struct{}
	code           int
}

// startRun runs payhook with args in the background; stop ends it.
func startRun(t *testing.T, env map[string]string, args ...string) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan struct{})}
	m := &Main{Stdout: r.stdout, Stderr: r.stderr, Getenv: testEnv(env)}
	go func() {
		defer close(r.done)
		r.code = m.Run(ctx, args)
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stop cancels the command's context and returns its exit status.
func (r *running) stop() int {
	r.cancel()
	<-r.done
	return r.code
}

// freeLoopbackAddr returns a loopback address with a port free right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDemo runs the README's first command on a small story.
func TestDemo(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		code, out, errOut := run(t, nil, "demo", "--db", dbURL, "--size", "0.2")
		if code != 0 || !strings.Contains(out, "stored exactly once and processed exactly once: yes") {
			t.Fatalf("payhook demo = %d\n%s\n%s", code, out, errOut)
		}
		for _, want := range []string{"deduplicated", "rejected      3 forged"} {
			if !strings.Contains(out, want) {
				t.Errorf("demo summary lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestSimServe runs the provider API as a user would: keys printed, an
// endpoint created over HTTP with its secret shown once, and the page
// listing it without the secret. A restart keeps the keys and draws
// another seed, so that it never hands out an earlier run's ids.
func TestSimServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	base, key, seed, done := startSimServe(t, ctx)
	ctx2, cancel2 := context.WithCancel(context.Background())
	_, key2, seed2, done2 := startSimServe(t, ctx2)
	cancel2()
	if code := <-done2; code != 0 || key2 != key || seed2 == seed {
		t.Errorf("a second sim serve: exit %d, key %s, seed %s; want 0, the first's key %s, another seed than %s", code, key2, seed2, key, seed)
	}
	req, _ := http.NewRequest("POST", base+"/webhook_endpoints", strings.NewReader(`{"url":"http://127.0.0.1:9/hook","events":["*"]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ep struct{ ID, Secret string }
	json.NewDecoder(resp.Body).Decode(&ep)
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("create endpoint = %d %+v, want 201 with a Stripe secret", resp.StatusCode, ep)
	}
	resp, err = http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), ep.ID) || strings.Contains(string(page), ep.Secret) || strings.Contains(string(page), key) {
		t.Fatalf("page should list %s without secret or key:\n%s", ep.ID, page)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("sim serve exited %d", code)
	}
}

// startSimServe starts payhook sim serve (Stripe's flavour) until ctx
// ends, and returns what it printed: its URL, test key and seed, and the
// channel of its exit code.
func startSimServe(t *testing.T, ctx context.Context) (base, key, seed string, done chan int) {
	var stdout syncBuffer
	m := &Main{Stdout: &stdout, Stderr: &syncBuffer{}, Getenv: testEnv(nil)}
	done = make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"sim", "serve", "--addr", "127.0.0.1:0", "--flavour", "stripe"}) }()
	field := func(out, after string) string {
		if i := strings.Index(out, after); i >= 0 {
			if f := strings.Fields(out[i+len(after):]); len(f) > 0 {
				return f[0]
			}
		}
		return ""
	}
	waitFor(t, func() bool {
		out := stdout.String()
		base, key, seed = field(out, " on "), field(out, "test key: "), field(out, "seed: ")
		return base != "" && key != "" && seed != ""
	})
	return base, key, seed, done
}

// TestDemoRefusesAUsedDatabase: the summary compares the database with
// one story, so a second run on the same database is refused rather than
// reported wrong; a SQLite file other than the demo's own default (an
// inbox's payhook.db) is never removed to start afresh.
func TestDemoRefusesAUsedDatabase(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		if code, out, errOut := run(t, nil, "demo", "--db", dbURL, "--size", "0.05"); code != 0 {
			t.Fatalf("first demo = %d\n%s\n%s", code, out, errOut)
		}
		code, _, errOut := run(t, nil, "demo", "--db", dbURL, "--size", "0.05")
		if code != 1 || !strings.Contains(errOut, "already holds events") {
			t.Fatalf("second demo on the same database = %d, %q; want 1 and a refusal", code, errOut)
		}
	})
}

// TestSimCheck plays the demo's storm (the storm scenario, billete,
// against serve's demo source) through sim run --expect, then runs sim
// check on that file: no difference, exit 0; then, with one delivered
// event deleted from the database, the difference listed, exit 1, in
// lines and in JSON.
func TestSimCheck(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		secret := flavour.Billete().NewSecret()
		var logs syncBuffer
		srv, err := startInProcess(ctx, &Main{Stdout: io.Discard, Stderr: &logs, Getenv: testEnv(nil),
			demoSecret: secret}, "--db", dbURL)
		if err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		defer srv.stop()
		expect := filepath.Join(t.TempDir(), "expected.json")
		env := map[string]string{"PAYHOOK_DB": dbURL}
		if code, out, errOut := run(t, env, "sim", "run", "storm", "--target", srv.url+"/webhooks/demo", "--secret", secret,
			"--size", "0.2", "--expect", expect); code != 0 {
			t.Fatalf("sim run = %d\n%s\n%s", code, out, errOut)
		}
		raw, _ := os.ReadFile(expect)
		var res sim.Result
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if rep, err := waitProcessed(ctx, db, "demo", &res, processingStall); err != nil || !rep.ExactlyOnce() {
			t.Fatalf("processing: %+v, %v", rep, err)
		}

		code, out, errOut := run(t, env, "sim", "check", "--expect", expect)
		if code != 0 || !strings.HasPrefix(out, "no difference: source demo in ") {
			t.Fatalf("sim check after the storm = %d\n%s\n%s", code, out, errOut)
		}
		code, out, _ = run(t, env, "sim", "check", "--expect", expect, "--json", "--db", dbURL)
		var doc struct {
			Source, Scenario string
			Equal            bool
			Differences      []check.Difference
		}
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || !doc.Equal || doc.Differences == nil ||
			len(doc.Differences) != 0 || doc.Source != "demo" || doc.Scenario != "storm" {
			t.Fatalf("sim check --json after the storm = %d, %v\n%s", code, err, out)
		}

		// The database loses a delivered event (the first payment.succeeded).
		var lost sim.ExpectedEvent
		for _, e := range res.Expected.Events {
			if e.Type == "payment.succeeded" && e.Delivered {
				lost = e
				break
			}
		}
		if _, err := db.SQL.ExecContext(ctx, `DELETE FROM payhook_events WHERE source = 'demo' AND event_id = $1`, lost.StoredID); err != nil {
			t.Fatal(err)
		}
		want := check.Difference{Kind: "event", ID: lost.StoredID, Got: "missing", Want: "stored (payment.succeeded, delivered)"}
		code, out, errOut = run(t, env, "sim", "check", "--expect", expect)
		if code != 1 || out != want.String()+"\n" || !strings.Contains(errOut, "1 differences") {
			t.Fatalf("sim check without %s = %d\n%s\n%s; want 1 and the line %q", lost.StoredID, code, out, errOut, want)
		}
		code, out, _ = run(t, env, "sim", "check", "--expect", expect, "--json")
		if err := json.Unmarshal([]byte(out), &doc); code != 1 || err != nil || doc.Equal ||
			len(doc.Differences) != 1 || doc.Differences[0] != want {
			t.Fatalf("sim check --json without %s = %d, %v\n%s", lost.StoredID, code, err, out)
		}
	})
}

// TestSimCheckBadInput: each mistake gets a clear error and the status
// of its kind, and reads nothing it should not.
func TestSimCheckBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	result := func(target string) string {
		b, _ := json.Marshal(sim.Result{Scenario: "storm", Target: target, Expected: sim.Expected{Events: []sim.ExpectedEvent{}}})
		return string(b)
	}
	good := write("good.json", result("http://127.0.0.1:8080/webhooks/demo"))
	noTarget := write("notarget.json", result(""))
	otherTarget := write("other.json", result("http://127.0.0.1:8080/hooks"))
	notJSON := write("bad.json", "expected: yes\n")
	notResult := write("empty.json", "{}")
	unmigrated := "sqlite://" + filepath.Join(dir, "empty.db")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no --expect", nil, 2, "needs --expect FILE"},
		{"an argument", []string{"--expect", good, "extra"}, 2, "takes no arguments"},
		{"unknown flag", []string{"--expect", good, "--verbose"}, 2, "flag provided but not defined"},
		{"no such file", []string{"--expect", filepath.Join(dir, "nope.json")}, 1, "read expected state"},
		{"not JSON", []string{"--expect", notJSON}, 1, "is not an expected state written by sim run --expect"},
		{"not a result", []string{"--expect", notResult}, 1, "no scenario or events"},
		{"no target", []string{"--expect", noTarget}, 2, "give --source NAME"},
		{"target not a source", []string{"--expect", otherTarget}, 2, "give --source NAME"},
		{"unmigrated database", []string{"--expect", good, "--db", unmigrated}, 1, "migrate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, nil, append([]string{"sim", "check"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("sim check %v = %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "empty.db")); err == nil {
		t.Errorf("sim check created the database it was pointed at")
	}
}

// TestRefusedEverywhereFails: a sim run or a bench whose every delivery
// was refused (a wrong secret, a receiver down) exits 1 and says what to
// check, after its summary, instead of reporting success.
func TestRefusedEverywhereFails(t *testing.T) {
	t.Parallel()
	refuser := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"no signature matches"}`, http.StatusBadRequest)
	}))
	defer refuser.Close()
	for _, args := range [][]string{
		{"sim", "run", "storm", "--target", refuser.URL, "--secret", "whsec_x", "--size", "0.01", "--time-scale", "1000000"},
		{"bench", "--url", "refuser=" + refuser.URL, "--secret", "whsec_x", "--events", "5", "--duplicates", "0", "--concurrency", "1"},
	} {
		code, _, errOut := run(t, nil, args...)
		if code != 1 || !strings.Contains(errOut, "--secret") {
			t.Errorf("payhook %s = %d, %q; want 1 and a hint", strings.Join(args[:2], " "), code, errOut)
		}
	}
}

// TestSimRunUsage: sim run refuses, before it delivers anything, a
// --time-scale, --size or --burst-size that makes no sense; before, 0 and
// negative values were taken silently for the defaults (1000, 1 and 5).
func TestSimRunUsage(t *testing.T) {
	t.Parallel()
	base := []string{"sim", "run", "storm", "--target", "http://127.0.0.1:1/webhooks/demo", "--secret", "whsec_x"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--time-scale", "0"}, "--time-scale 0: want a positive number"},
		{[]string{"--time-scale", "-10"}, "--time-scale -10: want a positive number"},
		{[]string{"--time-scale", "NaN"}, "--time-scale NaN: want a positive number"},
		{[]string{"--size", "0"}, "--size 0: want a positive number"},
		{[]string{"--size", "-1"}, "--size -1: want a positive number"},
		{[]string{"--size", "+Inf"}, "--size +Inf: want a positive number"},
		{[]string{"--burst-size", "0"}, "--burst-size 0: want 1 or more"},
		{[]string{"--burst-size", "-3"}, "--burst-size -3: want 1 or more"},
		{[]string{"--api-addr", "127.0.0.1:0", "--api-rate", "-1"}, "--api-rate -1: want requests a second, 0 for no limit"},
		{[]string{"--api-addr", "127.0.0.1:0", "--api-rate", "NaN"}, "--api-rate NaN: want requests a second, 0 for no limit"},
		{[]string{"--api-rate", "5"}, "--api-rate goes with --api-addr"},
	} {
		// Refused at once; before, the run started (against no target)
		// until the deadline stopped it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var stdout, stderr syncBuffer
		code := (&Main{Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(nil)}).Run(ctx, append(slices.Clone(base), tc.args...))
		cancel()
		out, errOut := stdout.String(), stderr.String()
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("payhook sim run %v = %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestDemoSizeUsage: demo refuses a --size that makes no sense, as sim
// run does, before it opens a database; before, 0 and negative values ran
// the whole story silently.
func TestDemoSizeUsage(t *testing.T) {
	t.Parallel()
	for _, size := range []string{"0", "-1", "NaN"} {
		path := filepath.Join(t.TempDir(), "demo.db")
		code, out, errOut := run(t, nil, "demo", "--db", "sqlite://"+path, "--size", size)
		if want := "--size " + size + ": want a positive number"; code != 2 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("payhook demo --size %s = %d, stdout %q, stderr %q; want 2 and %q", size, code, out, errOut, want)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("payhook demo --size %s left a database: %v", size, err)
		}
	}
}

// TestSimServeTimeScale: sim serve refuses a --time-scale that is no
// speed (0 or less, NaN, infinite) as sim run does, before it listens;
// before, it was taken silently for 1 and the provider served. So with an
// --api-rate that is no rate.
func TestSimServeTimeScale(t *testing.T) {
	t.Parallel()
	// Cancelled: a sim serve that gets past its checks returns at once
	// (exit 0), having printed its keys.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct{ flag, value, want string }{
		{"--time-scale", "0", "want a positive number"},
		{"--time-scale", "-10", "want a positive number"},
		{"--time-scale", "NaN", "want a positive number"},
		{"--time-scale", "+Inf", "want a positive number"},
		{"--api-rate", "-1", "want requests a second, 0 for no limit"},
		{"--api-rate", "+Inf", "want requests a second, 0 for no limit"},
	} {
		var stdout, stderr syncBuffer
		code := (&Main{Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(nil)}).Run(ctx,
			[]string{"sim", "serve", "--addr", "127.0.0.1:0", tc.flag, tc.value})
		out, errOut := stdout.String(), stderr.String()
		if want := tc.flag + " " + tc.value + ": " + tc.want; code != 2 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("payhook sim serve %s %s = %d, stdout %q, stderr %q; want 2 and %q", tc.flag, tc.value, code, out, errOut, want)
		}
	}
}
