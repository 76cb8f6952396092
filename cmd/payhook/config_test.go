package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/providertest"
)

// issueExample is the config of the issue.
const issueExample = `sources:
  - name: stripe-live          # the {source} in the URL
    provider: stripe           # stripe | paddle | standard | billete | crypto | hmac
    secrets: ["${STRIPE_WEBHOOK_SECRET}", "whsec_old"]   # ${VAR} expanded
    environment: live          # optional; events of another env are ignored
    tolerance: 5m
`

// writeConfig writes text to a config file in a temporary directory.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payhook.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// env returns a getenv stub reading vars.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestConfigLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		env  map[string]string
		want fileConfig
	}{{
		name: "issue example",
		text: issueExample,
		env:  map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_new"},
		want: fileConfig{Sources: []sourceConfig{{
			Name: "stripe-live", Provider: "stripe",
			Secrets:     []string{"whsec_new", "whsec_old"},
			Environment: "live", Tolerance: "5m",
		}}},
	}, {
		name: "YAML-special characters in a variable stay literal",
		text: issueExample,
		env:  map[string]string{"STRIPE_WEBHOOK_SECRET": `": [x]`},
		want: fileConfig{Sources: []sourceConfig{{
			Name: "stripe-live", Provider: "stripe",
			Secrets:     []string{`": [x]`, "whsec_old"},
			Environment: "live", Tolerance: "5m",
		}}},
	}, {
		name: "expanded values are not expanded again, other $ forms are kept",
		text: "sources:\n  - name: a\n    provider: crypto\n    secrets: [\"${A}x${B}\", $HOME, 'a$b', \"${B}\"]\n",
		env:  map[string]string{"A": "${B}", "B": "$$b{}"},
		want: fileConfig{Sources: []sourceConfig{{
			Name: "a", Provider: "crypto",
			Secrets: []string{"${B}x$$b{}", "$HOME", "a$b", "$$b{}"},
		}}},
	}, {
		name: "variables in any value, comments ignored",
		text: "# ${NOT_SET} in a comment\nsources:\n  - name: ${NAME}\n    provider: ${PROVIDER}\n    secrets:\n      - ${SECRET}\n    environment: ${ENV}\n    tolerance: ${TOL}\n",
		env:  map[string]string{"NAME": "Shop.1", "PROVIDER": "stripe", "SECRET": "true", "ENV": "test", "TOL": "90s"},
		want: fileConfig{Sources: []sourceConfig{{
			Name: "Shop.1", Provider: "stripe", Secrets: []string{"true"},
			Environment: "test", Tolerance: "90s",
		}}},
	}, {
		name: "hmac source with its options, defaults left to the provider",
		text: `sources:
  - name: acme
    provider: hmac
    secrets: [k1]
    header: X-Acme-Signature
    prefix: "sha256="
    encoding: base64
    timestamp_header: X-Acme-Time
    template: "{timestamp}.{body}"
    id_field: event_id
    type_field: kind
    time_field: at
  - name: acme-test
    provider: hmac
    secrets: [k2]
    header: X-Sig
    id_header: X-Id
    template: "{header:X-Id}:{body}"
`,
		want: fileConfig{Sources: []sourceConfig{{
			Name: "acme", Provider: "hmac", Secrets: []string{"k1"},
			Header: "X-Acme-Signature", Prefix: "sha256=", Encoding: "base64",
			TimestampHeader: "X-Acme-Time", Template: "{timestamp}.{body}",
			IDField: "event_id", TypeField: "kind", TimeField: "at",
		}, {
			Name: "acme-test", Provider: "hmac", Secrets: []string{"k2"},
			Header: "X-Sig", IDHeader: "X-Id", Template: "{header:X-Id}:{body}",
		}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := loadConfig(writeConfig(t, tt.text), env(tt.env))
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			if got, want := len(c.Sources), len(tt.want.Sources); got != want {
				t.Fatalf("got %d sources %+v; want %d", got, c.Sources, want)
			}
			for i := range c.Sources {
				got, want := c.Sources[i], tt.want.Sources[i]
				if !reflect.DeepEqual(got, want) {
					t.Errorf("source %d = %+v; want %+v", i, got, want)
				}
			}
			if _, err := c.sources(); err != nil {
				t.Errorf("sources: %v", err)
			}
		})
	}
}

// loadSources is what serve does with a config file: load it, then build
// its sources.
func loadSources(path string, getenv func(string) string) ([]payhook.Source, error) {
	c, err := loadConfig(path, getenv)
	if err != nil {
		return nil, err
	}
	return c.sources()
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	// source returns a config of one source with the given extra lines.
	source := func(lines ...string) string {
		return "sources:\n  - name: shop\n" + strings.Join(lines, "\n") + "\n"
	}
	stripe := "    provider: stripe\n    secrets: [whsec_x]"
	tests := []struct {
		name string
		text string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"unset variable", issueExample, nil,
			[]string{`source "stripe-live": secret 1: environment variable STRIPE_WEBHOOK_SECRET is unset or empty`}},
		{"empty variable", issueExample, map[string]string{"STRIPE_WEBHOOK_SECRET": ""},
			[]string{"STRIPE_WEBHOOK_SECRET", `source "stripe-live"`}},
		{"every unset variable", source("    provider: ${P}", `    secrets: ["${S}"]`), nil,
			[]string{`source "shop": provider: environment variable P is unset or empty`,
				`source "shop": secret 1: environment variable S is unset or empty`}},
		{"unset variable in the name", source(stripe, "  - name: ${NAME}", stripe), nil,
			[]string{`source "${NAME}": name: environment variable NAME is unset or empty`}},
		{"unset variable in an hmac option", source("    provider: hmac", "    secrets: [k]", "    header: ${SIG_HEADER}"), nil,
			[]string{`source "shop": header: environment variable SIG_HEADER`}},
		{"unclosed reference", source(stripe, "    environment: ${ENV"), nil,
			[]string{`source "shop": environment: malformed variable reference "${ENV"`}},
		{"unsupported reference form", source(stripe, "    environment: ${ENV:-live}"), nil,
			[]string{"malformed variable reference", "only ${NAME}"}},
		{"unknown top-level key", "sources: []\nlisten: :8080\n", nil,
			[]string{`payhook.yaml:2: unknown key "listen"`}},
		{"unknown source key", source(stripe, "    secret: whsec_y"), nil,
			[]string{`payhook.yaml:5: unknown key "secret" in source "shop"; did you mean "secrets"?`}},
		{"the issue's example", strings.Repeat("# a comment\n", 7) + "sources:\n  - name: stripe\n" + stripe + "\n    secrt: whsec_y\n", nil,
			[]string{`config `, `payhook.yaml:12: unknown key "secrt" in source "stripe"; did you mean "secrets"?`}},
		{"unknown key in an unnamed source", "sources:\n  - provider: stripe\n    secrets: [x]\n    tolerence: 1m\n", nil,
			[]string{`payhook.yaml:4: unknown key "tolerence" in source #1; did you mean "tolerance"?`}},
		{"unknown processing key", "sources: []\nprocessing:\n  retry: 1s\n", nil,
			[]string{`payhook.yaml:3: unknown key "retry" in processing; did you mean "retry_base" or "retry_max"?`}},
		{"misspelt key next to an unset variable", source("    provider: ${P}", "    secrets: [x]", "    envirnment: live"), nil,
			[]string{`payhook.yaml:5: unknown key "envirnment" in source "shop"`}},
		{"a list for the file", "- a\n- b\n", nil, []string{"payhook.yaml:1: the file is a list; want keys and values"}},
		{"sources not a list", "sources:\n  name: shop\n", nil,
			[]string{`payhook.yaml:2: "sources" is a mapping (key: value); want a list`}},
		{"a source not a mapping", "sources:\n  - shop\n", nil,
			[]string{`payhook.yaml:2: source #1 is a single value; want keys and values`}},
		{"a list for a string", source("    provider: [stripe]", "    secrets: [x]"), nil,
			[]string{`payhook.yaml:3: "provider" in source "shop" is a list; want a single value`}},
		{"workers not a number", "sources: []\nprocessing:\n  workers: many\n", nil,
			[]string{`payhook.yaml:3: "workers" in processing is "many"; want a whole number`}},
		{"empty file", "", nil, []string{"no sources"}},
		{"no sources", "sources: []\n", nil, []string{"no sources"}},
		{"not YAML", "sources: [\n", nil, []string{"payhook.yaml:1: did not find expected node content"}},
		{"two documents", issueExample + "---\n" + issueExample, map[string]string{"STRIPE_WEBHOOK_SECRET": "s"},
			[]string{"single YAML document"}},
		{"duplicate key", source(stripe, "    provider: paddle"), nil,
			[]string{`payhook.yaml:5: key "provider" given twice in source "shop" (first at line 3)`}},
		{"missing name", "sources:\n  - provider: stripe\n    secrets: [x]\n", nil,
			[]string{"source #1: name is required"}},
		{"name not URL-safe", "sources:\n  - name: a/b\n" + stripe + "\n", nil,
			[]string{`"a/b"`, "name"}},
		{"name starting with a dot", "sources:\n  - name: .hidden\n" + stripe + "\n", nil,
			[]string{`".hidden"`, "name"}},
		{"duplicate names, in another case", source(stripe, "  - name: other", stripe, "  - name: Shop", stripe), nil,
			[]string{`source "Shop": name "Shop" is already used by source #1`}},
		{"missing provider", source("    secrets: [x]"), nil, []string{`source "shop"`, "unknown provider"}},
		{"bad provider", source("    provider: strip", "    secrets: [x]"), nil,
			[]string{`source "shop"`, `provider "strip"`, "stripe"}},
		{"no secrets", source("    provider: stripe"), nil, []string{`source "shop"`, "no secret"}},
		{"empty secret", source("    provider: stripe", `    secrets: [whsec_x, ""]`), nil,
			[]string{`source "shop"`, "secret 2 is empty"}},
		{"api_url without api_key", source("    provider: billete", "    secrets: [whsec_eA==]", "    api_url: http://127.0.0.1:8090"), nil,
			[]string{`source "shop"`, "api_url and api_key go together"}},
		{"api_url on crypto", source("    provider: crypto", "    secrets: [x]", "    api_url: http://127.0.0.1:8090", "    api_key: sk_test_x"), nil,
			[]string{`source "shop": api_url: payhook reads the API of providers billete and paddle and stripe only, not crypto`}},
		{"api_key without api_url on stripe", source(stripe, "    api_key: sk_test_x"), nil,
			[]string{"api_url and api_key go together"}},
		{"fetch without api_url", source(stripe, "    fetch: true"), nil,
			[]string{`source "shop": fetch: reading each event's resource needs api_url and api_key`}},
		{"fetch not a boolean", source(stripe, "    fetch: sometimes"), nil,
			[]string{`payhook.yaml:5: "fetch" in source "shop" is neither true nor false`}},
		{"api_rate without api_url", source(stripe, "    api_rate: 5"), nil,
			[]string{`source "shop": api_rate: bounds the reads of api_url, which is not set`}},
		{"api_rate with fetch false", source(stripe, "    api_url: http://127.0.0.1:8090", "    api_key: sk_test_x", "    fetch: false", "    api_rate: 5"), nil,
			[]string{`source "shop": api_rate: bounds processing's reads of each event's resource, which fetch: false turns off`}},
		{"api_rate of 0", source(stripe, "    api_url: http://127.0.0.1:8090", "    api_key: sk_test_x", "    api_rate: 0"), nil,
			[]string{`source "shop": api_rate "0" is neither a number of requests a second above 0, such as 20, nor off`}},
		{"api_rate not a number", source(stripe, "    api_url: http://127.0.0.1:8090", "    api_key: sk_test_x", "    api_rate: fast"), nil,
			[]string{`api_rate "fast" is neither`}},
		{"fetch a list", source(stripe, "    fetch: [true]"), nil,
			[]string{`"fetch" in source "shop" is a list; want true or false`}},
		{"bad environment", source(stripe, "    environment: prod"), nil,
			[]string{`source "shop"`, `environment "prod" is neither test nor live`}},
		{"environment on a provider that does not say it", source("    provider: paddle", "    secrets: [x]", "    environment: live"), nil,
			[]string{`source "shop": provider paddle does not say an event's environment; remove environment`}},
		{"environment on hmac", source("    provider: hmac", "    secrets: [x]", "    header: X-Sig", "    environment: test"), nil,
			[]string{"provider hmac does not say an event's environment"}},
		{"bad duration", source(stripe, "    tolerance: 5 minutes"), nil,
			[]string{`source "shop": tolerance "5 minutes" is not a duration`}},
		{"duration without unit", source(stripe, "    tolerance: 300"), nil, []string{`tolerance "300" is not a duration`}},
		{"negative tolerance", source(stripe, "    tolerance: -1s"), nil,
			[]string{`source "shop"`, "negative tolerance -1s"}},
		{"hmac option on a stripe source", source(stripe, "    header: X-Sig"), nil,
			[]string{`source "shop": header is only allowed with provider hmac, not stripe`}},
		{"hmac option on a crypto source", source("    provider: crypto", "    secrets: [x]", "    id_field: uid"), nil,
			[]string{"id_field is only allowed with provider hmac"}},
		{"hmac without a header", source("    provider: hmac", "    secrets: [x]"), nil,
			[]string{`source "shop": hmac: no signature header configured (Header; header in payhook.yaml)`}},
		{"hmac timestamp header not signed", source("    provider: hmac", "    secrets: [x]", "    header: X-Sig", "    timestamp_header: X-Ts"), nil,
			[]string{`source "shop": hmac: timestamp header X-Ts is set (TimestampHeader; timestamp_header in payhook.yaml) but template "{body}" does not sign {timestamp}`}},
		{"secrets not a list", source("    provider: stripe", "    secrets: whsec_x"), nil,
			[]string{`payhook.yaml:4: "secrets" in source "shop" is a single value; want a list (- item, or [a, b])`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tt.text)
			srcs, err := loadSources(path, env(tt.env))
			if err == nil {
				t.Fatalf("config gave %+v; want an error", srcs)
			}
			if !errors.Is(err, payhook.ErrConfig) {
				t.Errorf("error %q does not wrap payhook.ErrConfig", err)
			}
			if strings.Contains(err.Error(), "main.") || strings.Contains(err.Error(), "unmarshal") {
				t.Errorf("error %q speaks Go, not YAML", err)
			}
			for _, want := range append(tt.want, path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestConfigErrorsHideSecrets: a secret that is not a valid reference is
// not repeated in the error.
func TestConfigErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	text := "sources:\n  - name: shop\n    provider: stripe\n    secrets: [\"hunter2${oops-hunter2\"]\n"
	_, err := loadConfig(writeConfig(t, text), env(nil))
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "secret 1: malformed variable reference") {
		t.Errorf("loadConfig = %v; want an error about secret 1 without its value", err)
	}
}

func TestConfigMissingFile(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(filepath.Join(t.TempDir(), "nope.yaml"), env(nil))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("loadConfig(missing) = %v; want os.ErrNotExist", err)
	}
}

func TestConfigSources(t *testing.T) {
	t.Parallel()
	text := issueExample + `  - name: acme
    provider: hmac
    secrets: ["${ACME_SECRET}"]
    header: X-Acme-Signature
    prefix: "sha256="
  - name: broken-hmac
    provider: hmac
    secrets: [k]
`
	vars := map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_new", "ACME_SECRET": "acme$key"}
	c, err := loadConfig(writeConfig(t, text), env(vars))
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	// Without a header the hmac provider refuses; the error names the source.
	if _, err := c.sources(); err == nil || !errors.Is(err, payhook.ErrConfig) ||
		!strings.Contains(err.Error(), `source "broken-hmac"`) {
		t.Errorf("sources with a header-less hmac source = %v; want ErrConfig naming it", err)
	}
	c.Sources = c.Sources[:2]
	sources, err := c.sources()
	if err != nil {
		t.Fatalf("sources: %v", err)
	}
	if len(sources) != 2 {
		t.Fatalf("got %d sources; want 2", len(sources))
	}
	for i, want := range []payhook.Source{
		{Name: "stripe-live", Provider: "stripe", Environment: "live"},
		{Name: "acme", Provider: "hmac"},
	} {
		got := sources[i]
		if got.Name != want.Name || got.Provider != want.Provider || got.Environment != want.Environment || got.Verifier == nil {
			t.Errorf("source %d = %+v; want %+v with a verifier", i, got, want)
		}
	}

	now := time.Now()
	t.Run("stripe verifies with the expanded and the literal secret", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"id":"evt_1","type":"charge.succeeded","created":1700000000,"livemode":true}`)
		ts := strconv.FormatInt(now.Unix(), 10)
		for _, secret := range []string{"whsec_new", "whsec_old"} {
			h := http.Header{}
			h.Set("Stripe-Signature", "t="+ts+",v1="+providertest.HMACHex([]byte(secret), ts+"."+string(body)))
			got, err := sources[0].Verifier.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: now})
			if err != nil {
				t.Fatalf("Verify with %s: %v", secret, err)
			}
			if got.EventID != "evt_1" || got.Environment != "live" {
				t.Errorf("Verify with %s = %+v", secret, got)
			}
		}
		h := http.Header{}
		h.Set("Stripe-Signature", "t="+ts+",v1="+providertest.HMACHex([]byte("whsec_other"), ts+"."+string(body)))
		if _, err := sources[0].Verifier.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: now}); !errors.Is(err, payhook.ErrSignature) {
			t.Errorf("Verify with another secret = %v; want ErrSignature", err)
		}
		// The 5m tolerance is applied.
		h.Set("Stripe-Signature", "t="+ts+",v1="+providertest.HMACHex([]byte("whsec_new"), ts+"."+string(body)))
		late := payhook.Delivery{Header: h, Body: body, ReceivedAt: now.Add(6 * time.Minute)}
		if _, err := sources[0].Verifier.Verify(late); !errors.Is(err, payhook.ErrSignature) {
			t.Errorf("Verify 6m late = %v; want ErrSignature", err)
		}
	})
	t.Run("hmac uses its options and the secret with a $ literally", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"id":"evt_2","type":"paid"}`)
		h := http.Header{}
		h.Set("X-Acme-Signature", "sha256="+providertest.HMACHex([]byte("acme$key"), string(body)))
		got, err := sources[1].Verifier.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: now})
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if got.EventID != "evt_2" || got.Type != "paid" {
			t.Errorf("Verify = %+v", got)
		}
	})
}

// TestConfigAPIClients: api_url and api_key give billete and stripe
// sources the Fetch of their provider's API client, unless fetch is
// false; other sources none.
func TestConfigAPIClients(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(`{"id":"sub_1"}`))
	}))
	defer api.Close()
	text := "sources:\n" +
		"  - name: b\n    provider: billete\n    secrets: [whsec_eA==]\n    api_url: ${API}\n    api_key: sk_test_b\n" +
		"  - name: s\n    provider: stripe\n    secrets: [whsec_x]\n    api_url: ${API}/\n    api_key: sk_test_s\n" +
		"  - name: plain\n    provider: stripe\n    secrets: [whsec_x]\n" +
		"  - name: nofetch\n    provider: stripe\n    secrets: [whsec_x]\n    api_url: ${API}\n    api_key: sk_test_n\n    fetch: false\n" +
		"  - name: unbounded\n    provider: stripe\n    secrets: [whsec_x]\n    api_url: ${API}\n    api_key: sk_test_u\n    api_rate: off\n" +
		"  - name: slow\n    provider: paddle\n    secrets: [pdl_x]\n    api_url: ${API}\n    api_key: pdl_k\n    api_rate: 1.5\n"
	srcs, err := loadSources(writeConfig(t, text), env(map[string]string{"API": api.URL}))
	if err != nil {
		t.Fatal(err)
	}
	if srcs[2].Fetch != nil {
		t.Error("a source without api_url fetches")
	}
	if srcs[3].Fetch != nil {
		t.Error("a source with fetch: false fetches")
	}
	// Reads are bounded by the provider's rate (billete states none), or
	// api_rate.
	for i, want := range map[int]float64{0: 0, 1: 20, 4: 0, 5: 1.5} {
		if srcs[i].FetchRate != want {
			t.Errorf("source %s reads at most %g a second; want %g", srcs[i].Name, srcs[i].FetchRate, want)
		}
	}
	for _, f := range []struct {
		src          payhook.Source
		typ, payload string
	}{
		{srcs[0], "subscription.updated", `{"data":{"id":"sub_1"}}`},
		{srcs[1], "customer.subscription.updated", `{"data":{"object":{"id":"sub_1"}}}`},
	} {
		if f.src.Fetch == nil {
			t.Fatalf("source %s has api_url but no Fetch", f.src.Name)
		}
		if b, err := f.src.Fetch(context.Background(), &payhook.Event{Type: f.typ, Payload: []byte(f.payload)}); err != nil || b == nil {
			t.Fatalf("source %s: Fetch = %s, %v", f.src.Name, b, err)
		}
	}
	want := []string{"GET /subscriptions/sub_1 Bearer sk_test_b", "GET /v1/subscriptions/sub_1 Bearer sk_test_s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("API requests %q, want %q", got, want)
	}
}

func TestConfigSourcesValidates(t *testing.T) {
	t.Parallel()
	ok := sourceConfig{Name: "x", Provider: "stripe", Secrets: []string{"s"}}
	dup := ok
	dup.Name = "X"
	c := &fileConfig{Sources: []sourceConfig{ok, dup}}
	if _, err := c.sources(); !errors.Is(err, payhook.ErrConfig) || !strings.Contains(err.Error(), `source "X": name "X" is already used`) {
		t.Errorf("sources with a duplicate name = %v; want ErrConfig naming it", err)
	}
}

func TestProcessingLags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pause, most         string
		wantPause, wantMost time.Duration
		bad                 bool
	}{
		{"", "", 0, 0, false}, // jobs.Config's defaults
		{"off", "", -1, 0, false},
		{"250ms", "5s", 250 * time.Millisecond, 5 * time.Second, false},
		{"0s", "", 0, 0, true}, // off is said "off"
		{"soon", "", 0, 0, true},
		{"-1s", "", 0, 0, true},
		{"", "0s", 0, 0, true},
		{"", "off", 0, 0, true},
		{"", "30s", 0, 30 * time.Second, false},
		{"", "31s", 0, 0, true}, // more than half of an attempt's JobTimeout
	} {
		pause, most, err := processingConfig{PauseLag: tc.pause, MaxLag: tc.most}.lags()
		if tc.bad {
			if !errors.Is(err, payhook.ErrConfig) {
				t.Errorf("pause_lag %q, max_lag %q: %v, want ErrConfig", tc.pause, tc.most, err)
			}
			continue
		}
		if err != nil || pause != tc.wantPause || most != tc.wantMost {
			t.Errorf("pause_lag %q, max_lag %q: %v, %v, %v; want %v, %v", tc.pause, tc.most, pause, most, err, tc.wantPause, tc.wantMost)
		}
	}
}

// TestREADMEProcessing: the README's processing block loads, with every
// value its comment says is the default.
func TestREADMEProcessing(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```yaml\nprocessing:\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || block == "" {
		t.Fatal("no processing block in the README")
	}
	path := filepath.Join(t.TempDir(), "payhook.yaml")
	text := "sources:\n  - name: shop\n    provider: stripe\n    secrets: [whsec_x]\nprocessing:\n" + block
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, func(string) string { return "" })
	if err != nil {
		t.Fatalf("the README's processing block: %v", err)
	}
	pause, most, err := cfg.Processing.lags()
	if _, berr := cfg.Processing.backoff(); err != nil || berr != nil || pause != 3*time.Second || most != 10*time.Second ||
		cfg.Processing.Workers != 8 || cfg.Processing.MaxAttempts != 25 || cfg.Processing.Batch != 512 {
		t.Errorf("the README's processing block reads %+v (lags %v, %v, %v)", cfg.Processing, pause, most, err)
	}
}

func TestProcessingBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		batch, want int
		ok          bool
	}{{0, 0, true}, {1, 1, true}, {512, 512, true}, {-1, 0, false}} {
		got, err := processingConfig{Batch: tc.batch}.batch()
		if got != tc.want || (err == nil) != tc.ok || (err != nil && !errors.Is(err, payhook.ErrConfig)) {
			t.Errorf("batch %d: %d, %v; want %d, ok %v", tc.batch, got, err, tc.want, tc.ok)
		}
	}
}

func TestProcessingBackoff(t *testing.T) {
	t.Parallel()
	b, err := processingConfig{RetryBase: "100ms"}.backoff()
	if err != nil {
		t.Fatal(err)
	}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 40: time.Hour, 200: time.Hour} {
		if got := b(attempt); got != want {
			t.Errorf("backoff(%d) = %v, want %v", attempt, got, want)
		}
	}
	if d, _ := (processingConfig{}).backoff(); d(1) != time.Second {
		t.Errorf("default first retry = %v, want 1s", d(1))
	}
	for _, bad := range []string{"soon", "-1s", "0s"} {
		if _, err := (processingConfig{RetryBase: bad}).backoff(); !errors.Is(err, payhook.ErrConfig) {
			t.Errorf("retry_base %q: %v, want ErrConfig", bad, err)
		}
	}
	capped, err := processingConfig{RetryBase: "100ms", RetryMax: "300ms"}.backoff()
	if err != nil {
		t.Fatal(err)
	}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 300 * time.Millisecond, 40: 300 * time.Millisecond} {
		if got := capped(attempt); got != want {
			t.Errorf("retry_max 300ms: backoff(%d) = %v, want %v", attempt, got, want)
		}
	}
	for _, bad := range []string{"soon", "-1s", "50ms"} {
		if _, err := (processingConfig{RetryBase: "100ms", RetryMax: bad}).backoff(); !errors.Is(err, payhook.ErrConfig) {
			t.Errorf("retry_max %q: %v, want ErrConfig", bad, err)
		}
	}
}
