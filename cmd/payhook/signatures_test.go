package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

// TestSignatureFailuresAlert: serve counts the signatures its receiver
// refuses and raises signature_failures once signature_failures of them
// came within signature_window; a valid delivery clears it.
func TestSignatureFailuresAlert(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the secret payhook has"))
	wrong := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the provider's new secret"))
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		dbURL := dbtest.URL(t, engine)
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_CONFIG": writeConfig(t,
			"sources:\n  - name: shop\n    provider: billete\n    secrets: [\""+secret+"\"]\n"+
				"    signature_failures: 3\n    signature_window: 5s\n")}
		s := startServer(t, env)
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		seq := 0
		post := func(key string) int {
			t.Helper()
			seq++
			id := fmt.Sprint("evt_", seq)
			b := fmt.Appendf(nil, `{"id":%q,"type":"checkout.completed","created_at":%q,"environment":"test","data":{}}`,
				id, time.Now().UTC().Format(time.RFC3339))
			h, err := standard.Sign(key, id, time.Now(), b)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, s.url+"/webhooks/shop", bytes.NewReader(b))
			req.Header = h
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		state := func() (n int, acked bool) {
			db.SQL.QueryRow(`SELECT count, acknowledged FROM payhook_alerts WHERE kind = $1 AND subject = 'shop'`,
				reconcile.AlertSignatureFailures).Scan(&n, &acked)
			return n, acked
		}
		// Refused deliveries, one more at a time until the alert comes
		// (however slowly the machine sends them), at most 50.
		refused := 0
		waitProgress(t, "signature_failures raised", func() (bool, string) {
			if n, _ := state(); n > 0 {
				return true, ""
			}
			if refused < 50 {
				if code := post(wrong); code != http.StatusBadRequest {
					t.Fatalf("delivery signed with the wrong secret = %d; want 400", code)
				}
				refused++
			}
			return false, fmt.Sprint(refused)
		})
		if n, acked := state(); n != 1 || acked || refused < 3 {
			t.Fatalf("signature_failures count %d, acknowledged %v after %d refused; want raised once, open, after at least 3", n, acked, refused)
		}
		if code := post(secret); code != http.StatusOK {
			t.Fatalf("delivery signed with the right secret = %d; want 200", code)
		}
		waitProgress(t, "signature_failures cleared", func() (bool, string) {
			n, acked := state()
			return acked || n > 1, fmt.Sprint(n, acked)
		})
		if n, acked := state(); n != 1 || !acked {
			t.Fatalf("signature_failures count %d, acknowledged %v; want raised once, then cleared", n, acked)
		}
	})
}

// TestSignatureAlertConfig: signature_failures and signature_window take
// their defaults, "off", or a clear error naming the key.
func TestSignatureAlertConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra string
		limit       int
		window      time.Duration
		err         string
	}{
		{"defaults", "", 20, 5 * time.Minute, ""},
		{"set", "    signature_failures: 5\n    signature_window: 1m\n", 5, time.Minute, ""},
		{"off", "    signature_failures: off\n", 0, 5 * time.Minute, ""},
		{"not a count", "    signature_failures: many\n", 0, 0, `signature_failures "many" is neither a count`},
		{"negative", "    signature_failures: -3\n", 0, 0, `signature_failures "-3"`},
		{"bad window", "    signature_window: soon\n", 0, 0, `signature_window "soon" is not a duration of at least 1s`},
		{"window too short", "    signature_window: 10ms\n", 0, 0, `signature_window "10ms"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := loadConfig(writeConfig(t, "sources:\n  - name: shop\n    provider: billete\n    secrets: [whsec_x]\n"+tc.extra), env(nil))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `source "shop"`) {
					t.Fatalf("loadConfig = %v; want an error naming source \"shop\" and saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			limit, window, err := c.Sources[0].signatureAlert()
			if limit != tc.limit || window != tc.window || err != nil {
				t.Fatalf("signatureAlert = %d, %s, %v; want %d, %s", limit, window, err, tc.limit, tc.window)
			}
		})
	}
}
