package billete_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/providertest"
)

// sign signs like Billete (Standard Webhooks v1), with webhook-id evt_suite.
func sign(t *testing.T, body []byte, secret string, at time.Time) http.Header {
	return signID(t, "evt_suite", body, secret, at)
}

func signID(t *testing.T, id string, body []byte, secret string, at time.Time) http.Header {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	ts := fmt.Sprint(at.Unix())
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+providertest.HMACBase64(key, id+"."+ts+"."+string(body)))
	return h
}

func secret(s string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(s)) }

func TestSuite(t *testing.T) {
	t.Parallel()
	providertest.Run(t, suite)
}

func FuzzVerify(f *testing.F) { providertest.Fuzz(f, suite) }

// suite describes the provider to providertest.
var suite = providertest.Suite{
	Envelope: billete.Adapter.Envelope,
	New: func(secrets []string, tol time.Duration) (payhook.Verifier, error) {
		return billete.New(billete.Config{Secrets: secrets, Tolerance: tol})
	},
	Sign:    sign,
	Secrets: [3]string{secret("old endpoint secret"), secret("current endpoint secret"), secret("removed endpoint secret")},
	Event: []byte(`{"id":"evt_suite","type":"subscription.renewed","created_at":"2026-01-15T09:58:00Z",` +
		`"environment":"live","api_version":"2025-05-01","data":{"id":"sub_1"}}`),
	Want: payhook.Envelope{
		EventID: "evt_suite", Type: "subscription.renewed", Environment: "live",
		OccurredAt: time.Date(2026, 1, 15, 9, 58, 0, 0, time.UTC),
	},
	Incomplete: []byte(`{"type":"subscription.renewed","environment":"live","data":{}}`),
	Header:     "webhook-signature",
	IDField:    "id", TypeField: "type", TimeField: "created_at", ReadFields: []string{"environment"},
	SignID: signID,
}

// Known-answer vector computed with Python, independently of this package
// and of package standard:
//
//	key = b"billete-test-endpoint-key-32byte"; secret = "whsec_" + base64(key)
//	base64(hmac.new(key, b"evt_01JBILLETE0001.1748779205." + body, sha256).digest())
//	"sha256:" + sha256(secret.encode()).hexdigest()[:12]
const (
	kaBody   = `{"id":"evt_01JBILLETE0001","type":"checkout.completed","created_at":"2025-06-01T12:00:00Z","environment":"test","api_version":"2025-05-01","data":{"id":"chk_123"}}`
	kaSecret = "whsec_YmlsbGV0ZS10ZXN0LWVuZHBvaW50LWtleS0zMmJ5dGU="
	kaSig    = "v1,yQ+1mTfrPA6hEswasmwXXwa0pIT/r4jkHVLTt/WHge8="
	kaFP     = "sha256:c087507c3e8f"
)

func TestKnownAnswers(t *testing.T) {
	t.Parallel()
	at := time.Unix(1748779205, 0).UTC()
	tests := []struct {
		name    string
		secrets []string
		id      string
		ts      string
		sig     string
		wantErr error
	}{
		{"valid", []string{kaSecret}, "evt_01JBILLETE0001", "1748779205", kaSig, nil},
		{"rotation", []string{secret("next"), kaSecret}, "evt_01JBILLETE0001", "1748779205", "v1,AAAA " + kaSig, nil},
		{"other id header", []string{kaSecret}, "evt_01JBILLETE0002", "1748779205", kaSig, payhook.ErrSignature},
		{"other timestamp", []string{kaSecret}, "evt_01JBILLETE0001", "1748779206", kaSig, payhook.ErrSignature},
		{"wrong secret", []string{secret("next")}, "evt_01JBILLETE0001", "1748779205", kaSig, payhook.ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := billete.New(billete.Config{Secrets: tc.secrets})
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set("webhook-id", tc.id)
			h.Set("webhook-timestamp", tc.ts)
			h.Set("webhook-signature", tc.sig)
			got, err := v.Verify(payhook.Delivery{Header: h, Body: []byte(kaBody), ReceivedAt: at})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify = %v; want %v", err, tc.wantErr)
			}
			want := payhook.Envelope{
				EventID: "evt_01JBILLETE0001", Type: "checkout.completed", Environment: "test",
				OccurredAt: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), SecretID: kaFP,
			}
			if tc.wantErr == nil && got != want {
				t.Errorf("Verify = %+v; want %+v", got, want)
			}
		})
	}
}

// TestBody covers bodies that are correctly signed but unreadable.
func TestBody(t *testing.T) {
	t.Parallel()
	key := secret("body test")
	v, err := billete.New(billete.Config{Secrets: []string{key}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1748779205, 0)
	tests := []struct {
		name, id, body, wantMsg string
	}{
		{"id differs from webhook-id", "evt_header", `{"id":"evt_body","type":"checkout.completed","environment":"test"}`,
			`billete: body id "evt_body" differs from webhook-id "evt_header": malformed event`},
		{"unknown environment", "evt_1", `{"id":"evt_1","type":"x","environment":"staging"}`,
			`billete: environment "staging" is neither test nor live: malformed event`},
		{"no environment", "evt_1", `{"id":"evt_1","type":"x","created_at":"2025-06-01T12:00:00Z"}`,
			`billete: field "environment" is missing (want test or live): malformed event`},
		{"empty environment", "evt_1", `{"id":"evt_1","type":"x","environment":""}`,
			`billete: field "environment" is missing (want test or live): malformed event`},
		{"environment not a string", "evt_1", `{"id":"evt_1","type":"x","environment":true}`,
			`billete: field "environment" is not a string: malformed event`},
		{"environment in another case", "evt_1", `{"id":"evt_1","type":"x","environment":"LIVE"}`,
			`billete: environment "LIVE" is neither test nor live: malformed event`},
		{"no type", "evt_1", `{"id":"evt_1"}`, `billete: field "type" is missing: malformed event`},
		{"id not a string", "evt_1", `{"id":1,"type":"x"}`, `billete: field "id" is not a string: malformed event`},
		{"bad created_at", "evt_1", `{"id":"evt_1","type":"x","created_at":"1 June","environment":"live"}`, `billete: field "created_at" is not an RFC 3339 time: malformed event`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(tc.body)
			_, err := v.Verify(payhook.Delivery{Header: signID(t, tc.id, body, key, at), Body: body, ReceivedAt: at})
			if !errors.Is(err, payhook.ErrMalformed) || err.Error() != tc.wantMsg {
				t.Errorf("Verify = %v; want %q", err, tc.wantMsg)
			}
		})
	}
}
