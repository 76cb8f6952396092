package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/payhook/payhook/internal/dbtest"
)

func TestServeRefusesAShortAdminToken(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"PAYHOOK_ADMIN_TOKEN": "admin-secret"},
		{"PAYHOOK_CONFIG": writeAdminConfig(t, "  token: short-token\n")},
	} {
		env["PAYHOOK_DB"] = dbtest.URL(t, "sqlite")
		if code, _, errOut := run(t, env, "serve", "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "want at least 32") {
			t.Errorf("serve with a short admin token = %d, %s; want 1 and why", code, errOut)
		}
	}
}

// writeAdminConfig writes a config of one source with the given admin
// section's lines.
func writeAdminConfig(t *testing.T, admin string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payhook.yaml")
	err := os.WriteFile(path, []byte("sources:\n  - name: shop\n    provider: billete\n    secrets: [whsec_c2VjcmV0]\n    environment: test\nadmin:\n"+admin), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeAdminAddr(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("ana-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const token = "admin-token-from-the-file-0123456789"
		cfg := writeAdminConfig(t, "  token: ${ADMIN_TOKEN}\n  users:\n    - name: ana\n      hash: '"+string(hash)+"'\n")
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": cfg, "ADMIN_TOKEN": token}
		adminAddr := make(chan string, 1)
		m := &Main{Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, Getenv: testEnv(env),
			OnAdminListen: func(a string) { adminAddr <- a }}
		p, err := startInProcess(context.Background(), m, "--admin-addr", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("%v: %s", err, m.Stderr)
		}
		t.Cleanup(func() { p.stop() })
		var admin string
		select {
		case a := <-adminAddr:
			admin = "http://" + a
		case <-time.After(time.Minute):
			t.Fatal("no admin listener")
		}
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func(u, bearer string) int {
			t.Helper()
			req, _ := http.NewRequest("GET", u, nil)
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, tc := range []struct {
			url, bearer string
			want        int
		}{
			{p.url + "/console", "", 404},
			{p.url + "/api/v1/alerts", token, 404},
			{p.url + "/healthz", "", 200},
			{admin + "/", "", 303},
			{admin + "/console", "", 303},
			{admin + "/api/v1/alerts", token, 200},
			{admin + "/api/v1/alerts", "", 401},
			{admin + "/healthz", "", 200},
			{p.url + "/metrics", token, 404},
			{admin + "/metrics", "", 200}, // the admin listener is private: a scraper needs no secret
			{admin + "/metrics", token, 200},
		} {
			if got := get(tc.url, tc.bearer); got != tc.want {
				t.Errorf("GET %s = %d; want %d", tc.url, got, tc.want)
			}
		}
		resp, err := hc.PostForm(admin+"/console/login", url.Values{"user": {"ana"}, "secret": {"ana-password"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 303 || len(resp.Cookies()) != 1 {
			t.Errorf("login of a user from the config = %d, cookies %v; want 303 and the session", resp.StatusCode, resp.Cookies())
		}
	})
}
