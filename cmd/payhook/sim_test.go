package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// TestSimStormAgainstServe plays the storm scenario through the CLI
// against a real payhook serve, once per flavour (billete at full size:
// over 2,000 deliveries), each on its own database, and checks that every
// event the provider created is stored exactly once and handled exactly
// once, with one job each, and that payhook's payments, orders,
// subscriptions and balances equal the provider's final state.
func TestSimStormAgainstServe(t *testing.T) {
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
					// Linger long enough that payhook, processing behind the
					// deliveries (slowly on SQLite under -race), can still fetch.
					apiArgs = []string{"--api-addr", addr, "--api-key", "sk_test_storm", "--api-linger", "15s"}
				}
				config := filepath.Join(t.TempDir(), "payhook.yaml")
				os.WriteFile(config, fmt.Appendf(nil, "sources:\n  - name: %s\n    provider: %s\n    secrets: [\"${SECRET}\"]\n%s"+
					"processing:\n  retry_base: 20ms\n", name, f.Provider(), strings.Join(append(api, ""), "\n")), 0o600)
				env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": config, "SECRET": secret}
				s := startServer(t, env)

				size := "0.15"
				if name == "billete" {
					size = "1"
				}
				expect := filepath.Join(t.TempDir(), "expected.json")
				code, out, errOut := run(t, env, append([]string{"sim", "run", "storm", "--target", s.url + "/webhooks/" + name,
					"--secret", secret, "--flavour", name, "--seed", "5", "--time-scale", "2000",
					"--size", size, "--expect", expect}, apiArgs...)...)
				if code != 0 {
					t.Fatalf("sim run storm = %d\n%s\n%s", code, out, errOut)
				}
				raw, _ := os.ReadFile(expect)
				var res sim.Result
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatalf("expected state is not JSON: %v", err)
				}
				if name == "billete" && res.Stats.Attempts-res.Stats.Outage < 2000 {
					t.Fatalf("storm made %d deliveries, want at least 2,000", res.Stats.Attempts-res.Stats.Outage)
				}
				if res.Stats.Duplicates == 0 || res.Stats.Bursts == 0 || res.Stats.Outage == 0 {
					t.Fatalf("stats %+v lack a fault", res.Stats)
				}

				db, err := store.Open(context.Background(), dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				rep, err := waitProcessed(context.Background(), db, name, &res, 60*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if !rep.ExactlyOnce() || rep.Stored != len(res.Expected.Events) {
					t.Fatalf("%+v for %d provider events", rep, len(res.Expected.Events))
				}
				var jobs int
				db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&jobs)
				if jobs != rep.Stored {
					t.Fatalf("%d processing jobs for %d events, want one each", jobs, rep.Stored)
				}
				diffs, err := compareBilling(context.Background(), db, name, res.Expected)
				if err != nil {
					t.Fatal(err)
				}
				if len(diffs) > 0 {
					t.Fatalf("payhook's billing state differs from the provider's in %d places:\n%s", len(diffs), strings.Join(diffs[:min(len(diffs), 15)], "\n"))
				}
			})
		}
	})
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
// listing it without the secret.
func TestSimServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncBuffer
	m := &Main{Stdout: &stdout, Stderr: &syncBuffer{}, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"sim", "serve", "--addr", "127.0.0.1:0", "--flavour", "stripe"}) }()
	var base, key string
	waitFor(t, func() bool {
		out := stdout.String()
		if i := strings.Index(out, " on http://"); i >= 0 {
			base = strings.Fields(out[i+4:])[0]
		}
		if i := strings.Index(out, "test key: "); i >= 0 {
			key = strings.Fields(out[i+len("test key: "):])[0]
		}
		return base != "" && key != ""
	})
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

// TestDemoRefusesAUsedDatabase: the summary compares the database with
// one story, so a second run on the same (non-SQLite-file) database is
// refused rather than reported wrong.
func TestDemoRefusesAUsedDatabase(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		if code, out, errOut := run(t, nil, "demo", "--db", dbURL, "--size", "0.05"); code != 0 {
			t.Fatalf("first demo = %d\n%s\n%s", code, out, errOut)
		}
		if strings.HasPrefix(dbURL, "sqlite://") {
			return // the demo starts a SQLite file afresh: nothing to refuse
		}
		code, _, errOut := run(t, nil, "demo", "--db", dbURL, "--size", "0.05")
		if code != 1 || !strings.Contains(errOut, "already holds events") {
			t.Fatalf("second demo on the same database = %d, %q; want 1 and a refusal", code, errOut)
		}
	})
}
