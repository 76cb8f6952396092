package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// over 2,000 deliveries), and checks that every event the provider
// created is stored exactly once and processed exactly once.
func TestSimStormAgainstServe(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"PAYHOOK_DB": dbURL}
		var cfg strings.Builder
		cfg.WriteString("sources:\n")
		secrets := map[string]string{}
		for _, name := range flavour.Names() {
			f, _ := flavour.ByName(name)
			secrets[name] = f.NewSecret()
			env["SECRET_"+strings.ToUpper(name)] = secrets[name]
			fmt.Fprintf(&cfg, "  - name: %s\n    provider: %s\n    secrets: [\"${SECRET_%s}\"]\n", name, f.Provider(), strings.ToUpper(name))
		}
		env["PAYHOOK_CONFIG"] = filepath.Join(dir, "payhook.yaml")
		os.WriteFile(env["PAYHOOK_CONFIG"], []byte(cfg.String()), 0o600)
		s := startServer(t, env)
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()

		for _, name := range flavour.Names() {
			size := "0.15"
			if name == "billete" {
				size = "1"
			}
			expect := filepath.Join(dir, name+".json")
			code, out, errOut := run(t, env, "sim", "run", "storm", "--target", s.url+"/webhooks/"+name,
				"--secret", secrets[name], "--flavour", name, "--seed", "5", "--time-scale", "2000",
				"--size", size, "--expect", expect)
			if code != 0 {
				t.Fatalf("sim run storm --flavour %s = %d\n%s\n%s", name, code, out, errOut)
			}
			raw, _ := os.ReadFile(expect)
			var res sim.Result
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("%s: expected state is not JSON: %v", name, err)
			}
			if name == "billete" && res.Stats.Attempts-res.Stats.Outage < 2000 {
				t.Fatalf("storm made %d deliveries, want at least 2,000", res.Stats.Attempts-res.Stats.Outage)
			}
			if res.Stats.Duplicates == 0 || res.Stats.Bursts == 0 || res.Stats.Outage == 0 {
				t.Fatalf("%s: stats %+v lack a fault", name, res.Stats)
			}
			rep, err := waitProcessed(context.Background(), db, name, &res, 60*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.ExactlyOnce() || rep.Stored != len(res.Expected.Events) {
				t.Fatalf("%s: %+v for %d provider events", name, rep, len(res.Expected.Events))
			}
		}
		// One processing job per stored event, none doubled.
		var jobs, events int
		db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&jobs)
		db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events`).Scan(&events)
		if jobs != events {
			t.Fatalf("%d processing jobs for %d events, want one each", jobs, events)
		}
	})
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
