package main

import (
	"context"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
)

// TestMetricsAccess: /metrics is open on --admin-addr; on the public
// listener it is behind the console's login when there is a console,
// else open with a warning at start; a metrics token is required wherever
// it is served; a short one is refused at start. The console's URL is
// logged at start, on the listener it is served on.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	const (
		admin   = "admin-token-0123456789abcdef0123456789"
		metrics = "metrics-token-0123456789abcdef01234567"
	)
	type want struct {
		listener, bearer string // listener "public" or "admin"
		code             int
	}
	for _, tc := range []struct {
		name      string
		env       map[string]string
		adminAddr bool
		warn      bool
		wants     []want
	}{
		{"nothing configured", nil, false, true, []want{{"public", "", 200}}},
		{"admin listener", nil, true, false, []want{{"public", "", 404}, {"admin", "", 200}}},
		{"console", map[string]string{"PAYHOOK_ADMIN_TOKEN": admin}, false, false,
			[]want{{"public", "", 401}, {"public", "wrong-token", 401}, {"public", admin, 200}}},
		{"console on the admin listener", map[string]string{"PAYHOOK_ADMIN_TOKEN": admin}, true, false,
			[]want{{"public", admin, 404}, {"admin", "", 200}}},
		{"metrics token", map[string]string{"PAYHOOK_METRICS_TOKEN": metrics}, false, false,
			[]want{{"public", "", 401}, {"public", admin, 401}, {"public", metrics, 200}}},
		{"metrics token and console on the admin listener", map[string]string{"PAYHOOK_METRICS_TOKEN": metrics, "PAYHOOK_ADMIN_TOKEN": admin}, true, false,
			[]want{{"admin", "", 401}, {"admin", metrics, 200}, {"admin", admin, 200}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"PAYHOOK_DB": dbtest.URL(t, "sqlite")}
			for k, v := range tc.env {
				env[k] = v
			}
			adminAddr := make(chan string, 1)
			stderr := &syncBuffer{}
			m := &Main{Stdout: &syncBuffer{}, Stderr: stderr, Getenv: testEnv(env),
				OnAdminListen: func(a string) { adminAddr <- a }}
			var args []string
			if tc.adminAddr {
				args = []string{"--admin-addr", "127.0.0.1:0"}
			}
			p, err := startInProcess(context.Background(), m, args...)
			if err != nil {
				t.Fatalf("%v: %s", err, stderr)
			}
			t.Cleanup(func() { p.stop() })
			urls := map[string]string{"public": p.url}
			if tc.adminAddr {
				select {
				case a := <-adminAddr:
					urls["admin"] = "http://" + a
				case <-time.After(time.Minute):
					t.Fatal("no admin listener")
				}
			}
			for _, w := range tc.wants {
				req, _ := http.NewRequest("GET", urls[w.listener]+"/metrics", nil)
				if w.bearer != "" {
					req.Header.Set("Authorization", "Bearer "+w.bearer)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != w.code {
					t.Errorf("GET /metrics on the %s listener with bearer %q = %d; want %d", w.listener, w.bearer, resp.StatusCode, w.code)
				}
			}
			// Where the console is, said at start (when there is one).
			console := "msg=console url=" + urls["public"] + "/console\n"
			if tc.adminAddr {
				console = "msg=console url=" + urls["admin"] + "/console\n"
			}
			if got, want := strings.Contains(stderr.String(), console), tc.env["PAYHOOK_ADMIN_TOKEN"] != ""; got != want ||
				(!want && strings.Contains(stderr.String(), "msg=console")) {
				t.Errorf("logged %q: %v; want %v\n%s", console, got, want, stderr)
			}
			if got := strings.Contains(stderr.String(), "without authentication on the public listener"); got != tc.warn {
				t.Errorf("warned of open metrics: %v; want %v\n%s", got, tc.warn, stderr)
			}
		})
	}
}

// TestServeRefusesBeforeWriting: serve refuses a short token in the
// environment, an address that is no host:port or one in use, and an
// --admin-addr equal to --addr, before it creates the database or the
// demo secret's file.
func TestServeRefusesBeforeWriting(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free := freeLoopbackAddr(t)
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"PAYHOOK_METRICS_TOKEN": "short"}, nil, "PAYHOOK_METRICS_TOKEN has 5 bytes; want at least 32"},
		{map[string]string{"PAYHOOK_ADMIN_TOKEN": "short"}, nil, "PAYHOOK_ADMIN_TOKEN has 5 bytes; want at least 32"},
		{nil, []string{"--addr", "8085"}, "(--addr (PAYHOOK_ADDR), host:port)"},
		{nil, []string{"--addr", taken.Addr().String()}, "in use (another payhook serve?); give --addr (PAYHOOK_ADDR) another"},
		{nil, []string{"--admin-addr", taken.Addr().String()}, "give --admin-addr (PAYHOOK_ADMIN_ADDR) another"},
		{nil, []string{"--addr", free, "--admin-addr", free}, "--admin-addr (PAYHOOK_ADMIN_ADDR) " + free + " is --addr's"},
	} {
		dir := t.TempDir()
		env := map[string]string{"PAYHOOK_DB": "sqlite://" + filepath.Join(dir, "payhook.db")}
		maps.Copy(env, c.env)
		args := append([]string{"serve"}, c.args...)
		if !slices.Contains(c.args, "--addr") {
			args = append(args, "--addr", "127.0.0.1:0")
		}
		code, _, errOut := run(t, env, args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("payhook %v with %v = %d, %s; want 1 and %q", args, c.env, code, errOut, c.want)
		}
		if files, _ := os.ReadDir(dir); len(files) > 0 {
			t.Errorf("payhook %v with %v left %v; want nothing written", args, c.env, files)
		}
	}
}
