package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer = dbtest.Buffer

// run runs payhook with args and returns its exit status and output.
func run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(env)}
	code := m.Run(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

// server is a payhook serve running in-process on a loopback port.
type server struct {
	*inProcess
	stdout *syncBuffer
	stderr *syncBuffer // its log
}

func startServer(t *testing.T, env map[string]string, args ...string) *server {
	t.Helper()
	s := &server{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	stderr := s.stderr
	m := &Main{Stdout: s.stdout, Stderr: stderr, Getenv: testEnv(env)}
	p, err := startInProcess(context.Background(), m, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	s.inProcess = p
	t.Cleanup(func() {
		s.stop()
		if t.Failed() { // what the server said, the last of it
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			t.Logf("log of payhook serve:\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	return s
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage:"},
		{[]string{"help"}, 0, "payhook serve"},
		{[]string{"bogus"}, 2, `unknown command "bogus"; run "payhook help" for the list`},
		{[]string{"sevre"}, 2, `unknown command "sevre"; did you mean "serve"?`},
		{[]string{"Events", "list"}, 2, `unknown command "Events"; did you mean "events"?`},
		{[]string{"pay", "list"}, 2, `did you mean "payments"?`},
		{[]string{"help", "sevre"}, 2, `did you mean "serve"?`},
		{[]string{"events", "lsit"}, 2, `unknown events subcommand "lsit"; did you mean "list"?`},
		{[]string{"ledger", "balance"}, 2, `did you mean "balances"?`},
		{[]string{"alerts", "zzz"}, 2, `unknown alerts subcommand "zzz"; want list or ack`},
		{[]string{"ledger"}, 2, "ledger needs a subcommand: balances"},
		{[]string{"serve", "--help"}, 0, "Examples:"},
		{[]string{"serve", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"events", "list", "--limt", "3"}, 2, `flag provided but not defined: -limt (did you mean "--limit"?; see payhook events list --help)`},
		{[]string{"serve", "--cnfig", "x"}, 2, `(did you mean "--config"?; see payhook serve --help)`},
		{[]string{"events"}, 2, "events needs a subcommand: list, show or replay"},
		{[]string{"events", "frob"}, 2, "unknown events subcommand"},
		{[]string{"events", "replay"}, 2, "events replay takes one ID|EVENT_ID"},
		{[]string{"events", "list", "--status", "weird"}, 2, "--status"},
		{[]string{"send"}, 2, "--secret"},
		{[]string{"send", "--secret", "wrong"}, 2, "send: --secret: standard: signing secret must be whsec_<base64>"},
		{[]string{"send", "--secret", "whsec_eA==", "--url", "http://127.0.0.1:1/webhooks/demo"}, 1, "is payhook serve running?"},
		{[]string{"migrate", "--db", "mysql://x"}, 1, "unsupported scheme"},
		{[]string{"sim"}, 2, "sim needs a subcommand: run, serve or check"},
		{[]string{"sim", "run", "--help"}, 0, "Scenarios: outage, storm"},
		{[]string{"sim", "run", "nope", "--target", "http://127.0.0.1:1/"}, 2, `unknown scenario "nope"`},
		{[]string{"sim", "run", "storm"}, 2, "--target"},
		{[]string{"sim", "run", "storm", "--target", "http://127.0.0.1:1/", "--flavour", "adyen"}, 2, "--flavour"},
		{[]string{"sim", "run", "storm", "--target", "http://127.0.0.1:1/", "--outage", "soon"}, 2, "--outage"},
		{[]string{"sim", "run", "storm", "--target", "http://127.0.0.1:1/", "--duplicate", "2"}, 2, "between 0 and 1"},
		{[]string{"demo", "--size", "x"}, 2, "invalid value"},
	} {
		code, stdout, stderr := run(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("payhook %v = %d, %q; want %d and output with %q", tc.args, code, stdout+stderr, tc.code, tc.want)
		}
	}
}

// TestHelp: every way of asking for help prints it on stdout, nothing on
// stderr, and exits 0, for payhook itself and for each command and
// subcommand of the command table.
func TestHelp(t *testing.T) {
	t.Parallel()
	type ask struct {
		args []string
		want string
	}
	asks := []ask{
		{[]string{"help"}, "Usage:"}, {[]string{"-h"}, "Usage:"}, {[]string{"--help"}, "Usage:"},
		{[]string{"help", "help"}, "Usage:"},
		{[]string{"help", "events", "show"}, "payhook events show"},
	}
	for _, c := range commands() {
		if c.run == nil {
			continue
		}
		want := "Usage: payhook " + c.name
		asks = append(asks, ask{[]string{"help", c.name}, want}, ask{[]string{c.name, "--help"}, want},
			ask{[]string{c.name, "-h"}, want})
		for _, sub := range c.subs {
			asks = append(asks, ask{[]string{c.name, sub, "--help"}, want}, ask{[]string{"help", c.name, sub}, want},
				ask{[]string{c.name, "help"}, want})
		}
	}
	for _, a := range asks {
		code, stdout, stderr := run(t, nil, a.args...)
		if code != 0 || !strings.Contains(stdout, a.want) || stderr != "" {
			t.Errorf("payhook %v = %d, stdout %.80q, stderr %q; want 0, stdout with %q and no stderr", a.args, code, stdout, stderr, a.want)
		}
	}
	// A command's flags are listed under its help.
	if _, stdout, _ := run(t, nil, "events", "list", "--help"); !strings.Contains(stdout, "-limit") {
		t.Errorf("events list --help lists no flags:\n%s", stdout)
	}
	// One that has none gets no empty Flags: heading.
	if _, stdout, _ := run(t, nil, "version", "--help"); strings.Contains(stdout, "Flags:") {
		t.Errorf("version --help has a Flags: heading and no flags:\n%s", stdout)
	}
}

// TestREADMEUsage: the README's CLI section is payhook help's text, made
// from the command table, so it lists the commands as they are.
func TestREADMEUsage(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## The CLI\n")
	_, block, _ := strings.Cut(section, "```text\n")
	block, _, _ = strings.Cut(block, "```\n")
	if block != usage() {
		t.Errorf("the README's CLI section is not payhook help's text; paste the output of payhook help there.\nREADME:\n%s\npayhook help:\n%s", block, usage())
	}
}

func TestDidYouMean(t *testing.T) {
	t.Parallel()
	names := []string{"serve", "send", "sim", "events", "payments"}
	for _, tc := range []struct{ typed, want string }{
		{"serve", `did you mean "serve"?`},
		{"sevre", `did you mean "serve"?`},
		{"snd", `did you mean "send"?`},
		{"evnts", `did you mean "events"?`},
		{"pay", `did you mean "payments"?`},
		{"se", `did you mean "serve" or "send"?`},
		{"x", ""},
		{"zzzzzz", ""},
		{"", ""},
	} {
		if got := didYouMean(tc.typed, names); got != tc.want {
			t.Errorf("didYouMean(%q) = %q; want %q", tc.typed, got, tc.want)
		}
	}
}

// TestServeEndToEnd drives the binary as a user would: serve with no
// config, send a signed event twice and a forged one, list, show, replay,
// and shut down gracefully.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_ADMIN_TOKEN": "admin-secret-0123456789abcdef0123456789",
			"PAYHOOK_DEMO_SECRET_FILE": filepath.Join(t.TempDir(), "demo.secret")}
		s := startServer(t, env)
		secret := regexp.MustCompile(`whsec_\S+`).FindString(s.stdout.String())
		if secret == "" {
			t.Fatalf("serve did not print the demo secret:\n%s", s.stdout)
		}
		for i, want := range []string{`"status":"stored"`, `"status":"duplicate"`} {
			code, out, errOut := run(t, env, "send", "--url", s.url+"/webhooks/demo", "--secret", secret, "--id", "evt_e2e")
			if code != 0 || !strings.Contains(out, want) {
				t.Fatalf("send %d = %d, %q %q; want %s", i+1, code, out, errOut, want)
			}
		}
		if code, out, _ := run(t, env, "send", "--url", s.url+"/webhooks/demo", "--secret", "whsec_Zm9yZ2Vk", "--id", "evt_forged"); code != 1 || !strings.Contains(out, "400") {
			t.Fatalf("forged send = %d, %q; want 1 and a 400", code, out)
		}
		if resp, err := http.Get(s.url + "/readyz"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("readyz = %v, %v", resp, err)
		}

		var ev struct {
			ID     int64
			Status string
		}
		waitFor(t, func() bool {
			code, out, _ := run(t, env, "events", "show", "evt_e2e", "--json")
			return code == 0 && json.Unmarshal([]byte(out), &ev) == nil && ev.Status == "processed"
		})
		// The event became billing state, readable through the API.
		for token, want := range map[string]int{"admin-secret-0123456789abcdef0123456789": 200, "": 401, "guess": 401} {
			req, _ := http.NewRequest("GET", s.url+"/api/v1/orders/ord_evt_e2e", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var order struct {
				Status string
				PaidBy string `json:"paid_by"`
			}
			json.NewDecoder(resp.Body).Decode(&order)
			resp.Body.Close()
			if resp.StatusCode != want || (want == 200 && (order.Status != "paid" || order.PaidBy != "pay_evt_e2e")) {
				t.Fatalf("GET /api/v1/orders/ord_evt_e2e with token %q = %d %+v, want %d (paid by pay_evt_e2e)", token, resp.StatusCode, order, want)
			}
		}
		if code, out, _ := run(t, env, "payments", "show", "pay_evt_e2e", "--json"); code != 0 || !strings.Contains(out, `"status": "succeeded"`) {
			t.Fatalf("payments show = %d %s", code, out)
		}

		code, out, _ := run(t, env, "events", "list", "--json")
		var list []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
			t.Fatalf("events list --json = %d, %s; want one event", code, out)
		}
		if code, out, _ := run(t, env, "events", "list", "--status", "processed"); code != 0 || !strings.Contains(out, "evt_e2e") {
			t.Fatalf("events list = %d, %s", code, out)
		}
		if code, out, _ := run(t, env, "events", "replay", fmt.Sprint(ev.ID)); code != 0 || !strings.Contains(out, "re-enqueued") {
			t.Fatalf("replay = %d, %s", code, out)
		}
		var replayed struct{ Attempts int }
		waitFor(t, func() bool {
			_, out, _ := run(t, env, "events", "show", fmt.Sprint(ev.ID), "--json")
			return json.Unmarshal([]byte(out), &replayed) == nil && replayed.Attempts == 2
		})
		if code, _, errOut := run(t, env, "events", "show", "evt_missing"); code != 1 || !strings.Contains(errOut, "not found") {
			t.Fatalf("show missing = %d, %s", code, errOut)
		}
		if code := s.stop(); code != 0 {
			t.Fatalf("serve exited with %d after shutdown, want 0", code)
		}
	})
}

// TestServeKeepsDemoSecret: serve without a config keeps its demo
// secret in a file (mode 0600) beside the SQLite database, or where
// PAYHOOK_DEMO_SECRET_FILE says, so a restart takes the secret the
// sender was given; it prints the whole send and events list commands.
// A file that does not hold a secret, or that others may read, stops
// serve and is left as it was.
func TestServeKeepsDemoSecret(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		env := map[string]string{"PAYHOOK_DB": dbURL}
		file := strings.TrimPrefix(dbURL, "sqlite://") + ".demo-secret"
		if strings.HasPrefix(dbURL, "postgres") {
			file = filepath.Join(t.TempDir(), "demo.secret")
			env["PAYHOOK_DEMO_SECRET_FILE"] = file
		}
		// The printed command pastes as it is: quoted when the URL
		// needs it, its hidden password said.
		list := "  payhook events list --db " + shellWord(redactedURL(t, dbURL))
		if store.Redact(dbURL) != dbURL {
			list += "   # with the database's password in place of xxxxx"
		}
		var secrets []string
		for start := range 2 {
			s := startServer(t, env)
			out := s.stdout.String()
			secret := regexp.MustCompile(`whsec_\S+`).FindString(out)
			for _, want := range []string{
				"  payhook send --url " + s.url + "/webhooks/demo --secret " + secret + "\n",
				list + "\n",
				"kept in " + file,
			} {
				if !strings.Contains(out, want) {
					t.Errorf("start %d: serve printed\n%s\nwithout %q", start+1, out, want)
				}
			}
			// A 503 (the store busy on a loaded machine) is retried, as a
			// provider would; a 400 (the wrong secret) fails at once.
			waitFor(t, func() bool {
				code, out, errOut := run(t, env, "send", "--url", s.url+"/webhooks/demo", "--secret", secret, "--id", fmt.Sprintf("evt_start%d", start))
				if code != 0 && !strings.Contains(out, "503") {
					t.Fatalf("start %d: send with the printed secret = %d, %s %s", start+1, code, out, errOut)
				}
				return code == 0 && (strings.Contains(out, `"stored"`) || strings.Contains(out, `"duplicate"`))
			})
			secrets = append(secrets, secret)
			if code := s.stop(); code != 0 {
				t.Fatalf("serve exited %d", code)
			}
		}
		if secrets[0] == "" || secrets[0] != secrets[1] {
			t.Errorf("the secrets of two starts are %q and %q; want one", secrets[0], secrets[1])
		}
		info, err := os.Stat(file)
		if raw, _ := os.ReadFile(file); err != nil || info.Mode().Perm() != 0o600 || strings.TrimSpace(string(raw)) != secrets[0] {
			t.Errorf("secret file %s: %v, %v; want mode 0600 holding the secret", file, info, err)
		}

		for _, tc := range []struct {
			body string
			mode os.FileMode
			want string
		}{
			{secrets[0], 0o644, "may be read by others (mode 0644): chmod 600"},
			{"not a secret", 0o600, "does not hold a secret"},
			{"whsec_!!!", 0o600, "does not hold a secret"},
		} {
			os.WriteFile(file, []byte(tc.body), tc.mode)
			os.Chmod(file, tc.mode)
			code, _, errOut := run(t, env, "serve", "--addr", "127.0.0.1:0")
			if raw, _ := os.ReadFile(file); code != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, file) || string(raw) != tc.body {
				t.Errorf("serve with %q (mode %04o) in its secret file = %d, %q; want 1, %q, the file kept", tc.body, tc.mode, code, errOut, tc.want)
			}
		}
	})
}

// redactedURL is dbURL as payhook prints it, any password hidden.
func redactedURL(t *testing.T, dbURL string) string {
	t.Helper()
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return db.URL
}

func TestServeWithConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "payhook.yaml")
	os.WriteFile(cfg, []byte(`sources:
  - name: billete-test
    provider: billete
    secrets: ["${BILLETE_SECRET}"]
    environment: test
`), 0o600)
	env := map[string]string{"PAYHOOK_DB": dbtest.URL(t, "sqlite"), "PAYHOOK_CONFIG": cfg, "BILLETE_SECRET": "whsec_c2VjcmV0LWZyb20tZW52"}
	s := startServer(t, env)
	if code, out, _ := run(t, env, "send", "--url", s.url+"/webhooks/billete-test", "--secret", "whsec_c2VjcmV0LWZyb20tZW52", "--environment", "live"); code != 0 || !strings.Contains(out, "ignored") {
		t.Fatalf("live event on the test source = %d, %s; want 200 ignored", code, out)
	}
	delete(env, "BILLETE_SECRET")
	if code, _, errOut := run(t, env, "serve", "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "BILLETE_SECRET") {
		t.Fatalf("serve without the secret's variable = %d, %s; want 1 naming it", code, errOut)
	}
}

// TestVersion: payhook version and payhook --version print the build's
// version and Go's.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := run(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "payhook ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("payhook %v = %d, %q, %q; want payhook's version and %s", args, code, out, errOut, runtime.Version())
		}
	}
	// A stray argument is refused, as by every command that takes none;
	// before, it was ignored.
	for _, args := range [][]string{{"version", "extra"}, {"--version", "extra"}} {
		code, out, errOut := run(t, nil, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, `payhook version takes no argument, got "extra"`) {
			t.Errorf("payhook %v = %d, %q, %q; want 2, the stray argument refused", args, code, out, errOut)
		}
	}
}

// TestStrayArguments: the commands that take flags only refuse a stray
// argument (exit 2) before they do anything, as backfill, reconcile and
// the list views do. Before, it was ignored, and every flag after it with
// it (the flag package stops at the first argument): payhook migrate
// extra --db sqlite://given.db migrated the default database instead.
func TestStrayArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	def, given := filepath.Join(dir, "default.db"), filepath.Join(dir, "given.db")
	env := map[string]string{"PAYHOOK_DB": "sqlite://" + def, "PAYHOOK_ADDR": "127.0.0.1:0",
		"PAYHOOK_DEMO_SECRET_FILE": filepath.Join(dir, "demo.secret")}
	for _, args := range [][]string{
		{"migrate", "extra", "--db", "sqlite://" + given},
		{"serve", "extra", "--db", "sqlite://" + given},
		{"demo", "extra", "--db", "sqlite://" + given},
		{"bench", "extra", "--floor"},
		{"send", "extra", "--secret", "whsec_eA==", "--url", "http://127.0.0.1:1/webhooks/demo"},
		{"sim", "serve", "extra", "--addr", "127.0.0.1:0"},
	} {
		name := strings.Join(args[:slices.Index(args, "extra")], " ")
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var stdout, stderr syncBuffer
			code := (&Main{Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(env)}).Run(ctx, args)
			if code != 2 || !strings.Contains(stderr.String(), `payhook `+name+` takes no argument, got "extra"`) {
				t.Errorf("payhook %v = %d\n%s\n%s; want 2, the stray argument refused", args, code, stdout.String(), stderr.String())
			}
		})
	}
	for _, p := range []string{def, given} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
}
