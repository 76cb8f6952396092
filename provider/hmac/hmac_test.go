package hmac_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/hmac"
	"github.com/payhook/payhook/provider/providertest"
)

var secrets = [3]string{"old-secret", "current-secret", "removed-secret"}

// bodyOnly is a GitHub-style configuration: the hex HMAC of the body
// alone, no timestamp.
var bodyOnly = providertest.Suite{
	New: func(s []string, tol time.Duration) (payhook.Verifier, error) {
		return hmac.New(hmac.Config{Secrets: s, Tolerance: tol, Header: "X-Hub-Signature-256", Prefix: "sha256=", TimeField: "created"})
	},
	Sign: func(t *testing.T, body []byte, secret string, _ time.Time) http.Header {
		h := http.Header{}
		h.Set("X-Hub-Signature-256", "sha256="+providertest.HMACHex([]byte(secret), string(body)))
		return h
	},
	Secrets:     secrets,
	Event:       []byte(`{"id":7,"type":"order.paid","created":1768470000}`),
	Want:        payhook.Envelope{EventID: "7", Type: "order.paid", OccurredAt: time.Unix(1768470000, 0).UTC()},
	Incomplete:  []byte(`{"type":"order.paid"}`),
	Header:      "X-Hub-Signature-256",
	NoTimestamp: true,
	IDField:     "id", TypeField: "type", TimeField: "created",
}

// template is a configuration with a timestamped template, base64
// signatures and the event id in a signed header.
var template = providertest.Suite{
	New: func(s []string, tol time.Duration) (payhook.Verifier, error) {
		return hmac.New(hmac.Config{
			Secrets: s, Tolerance: tol,
			Header: "X-Signature", Encoding: "base64", TimestampHeader: "X-Timestamp",
			Template: "{timestamp}.{header:X-Event-Id}.{body}", IDHeader: "X-Event-Id",
			TypeField: "kind", TimeField: "at",
		})
	},
	Sign: func(t *testing.T, body []byte, secret string, at time.Time) http.Header {
		return signTemplate("ev_suite", body, secret, at)
	},
	SignID: func(t *testing.T, id string, body []byte, secret string, at time.Time) http.Header {
		return signTemplate(id, body, secret, at)
	},
	TypeField: "kind", TimeField: "at",
	Secrets: secrets,
	Event:   []byte(`{"kind":"payment.succeeded","at":"2026-01-15T09:59:59Z"}`),
	Want:    payhook.Envelope{EventID: "ev_suite", Type: "payment.succeeded", OccurredAt: time.Date(2026, 1, 15, 9, 59, 59, 0, time.UTC)},
	// With the id in a header, no object lacks it; a non-string type is
	// the malformed object instead.
	Incomplete: []byte(`{"kind":42}`),
	Header:     "X-Signature",
}

func TestSuiteBodyOnly(t *testing.T) {
	t.Parallel()
	providertest.Run(t, bodyOnly)
}

func TestSuiteTemplate(t *testing.T) {
	t.Parallel()
	providertest.Run(t, template)
}

func FuzzVerifyBodyOnly(f *testing.F) { providertest.Fuzz(f, bodyOnly) }

func FuzzVerifyTemplate(f *testing.F) { providertest.Fuzz(f, template) }

// signTemplate signs as the template configuration says.
func signTemplate(id string, body []byte, secret string, at time.Time) http.Header {
	ts := fmt.Sprint(at.Unix())
	h := http.Header{}
	h.Set("X-Timestamp", ts)
	h.Set("X-Event-Id", id)
	h.Set("X-Signature", providertest.HMACBase64([]byte(secret), ts+"."+id+"."+string(body)))
	return h
}

// Known-answer vectors computed with Python, independently of this package:
//
//	hmac.new(b"gh-secret", body1, hashlib.sha256).hexdigest()
//	base64.b64encode(hmac.new(b"gh-secret", b"1700000000.req-77." + body2, hashlib.sha256).digest())
//
// The fingerprint of "gh-secret" is "sha256:" + sha256(b"gh-secret").hexdigest()[:12].
const (
	kaSecret = "gh-secret"
	kaFP     = "sha256:c70ebadc0890"
	kaBody1  = `{"id":42,"action":"opened"}`
	kaSig1   = "ce1cb3100c821f4a6172af04018fbb3108608623aacbb1ebfd2f6b1b3933b9b5"
	kaBody2  = `{"event_id":"ev_9","kind":"payment.succeeded","at":"2023-11-14T22:13:20Z"}`
	kaSig2   = "OZgsLm8mZp3EZDRdFGOXF6Yl7XiNYXU2uU8js+u3E+s="
)

func TestKnownAnswers(t *testing.T) {
	t.Parallel()
	github := hmac.Config{Secrets: []string{kaSecret}, Header: "X-Hub-Signature-256", Prefix: "sha256="}
	tmpl := hmac.Config{
		Secrets: []string{kaSecret}, Header: "X-Sig", Encoding: "BASE64", TimestampHeader: "X-Ts",
		Template: "{timestamp}.{header:X-Request-Id}.{body}", IDField: "event_id", TypeField: "kind", TimeField: "at",
	}
	at := time.Unix(1700000000, 0).UTC()
	tests := []struct {
		name     string
		cfg      hmac.Config
		headers  map[string]string
		body     string
		received time.Time
		want     payhook.Envelope
		wantErr  error
	}{
		{"github", github, map[string]string{"X-Hub-Signature-256": "sha256=" + kaSig1}, kaBody1, at,
			payhook.Envelope{EventID: "42", SecretID: kaFP}, nil},
		{"github no prefix", github, map[string]string{"X-Hub-Signature-256": kaSig1}, kaBody1, at, payhook.Envelope{}, payhook.ErrSignature},
		{"github other body", github, map[string]string{"X-Hub-Signature-256": "sha256=" + kaSig1}, `{"id":43,"action":"opened"}`, at, payhook.Envelope{}, payhook.ErrSignature},
		{"github base64 given", github, map[string]string{"X-Hub-Signature-256": "sha256=" + kaSig2}, kaBody1, at, payhook.Envelope{}, payhook.ErrSignature},
		{"template", tmpl, map[string]string{"X-Sig": kaSig2, "X-Ts": "1700000000", "X-Request-Id": "req-77"}, kaBody2, at,
			payhook.Envelope{EventID: "ev_9", Type: "payment.succeeded", OccurredAt: time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC), SecretID: kaFP}, nil},
		{"template other request id", tmpl, map[string]string{"X-Sig": kaSig2, "X-Ts": "1700000000", "X-Request-Id": "req-78"}, kaBody2, at, payhook.Envelope{}, payhook.ErrSignature},
		{"template no request id", tmpl, map[string]string{"X-Sig": kaSig2, "X-Ts": "1700000000"}, kaBody2, at, payhook.Envelope{}, payhook.ErrSignature},
		{"template no timestamp", tmpl, map[string]string{"X-Sig": kaSig2, "X-Request-Id": "req-77"}, kaBody2, at, payhook.Envelope{}, payhook.ErrSignature},
		{"template expired", tmpl, map[string]string{"X-Sig": kaSig2, "X-Ts": "1700000000", "X-Request-Id": "req-77"}, kaBody2, at.Add(time.Hour), payhook.Envelope{}, payhook.ErrSignature},
		{"template hex given", tmpl, map[string]string{"X-Sig": kaSig1, "X-Ts": "1700000000", "X-Request-Id": "req-77"}, kaBody2, at, payhook.Envelope{}, payhook.ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := hmac.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for k, val := range tc.headers {
				h.Set(k, val)
			}
			got, err := v.Verify(payhook.Delivery{Header: h, Body: []byte(tc.body), ReceivedAt: tc.received})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify = %v; want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && got != tc.want {
				t.Errorf("Verify = %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	s := []string{"secret"}
	tests := []struct {
		name string
		cfg  hmac.Config
	}{
		{"no header", hmac.Config{Secrets: s}},
		{"no secrets", hmac.Config{Header: "X-Sig"}},
		{"bad encoding", hmac.Config{Secrets: s, Header: "X-Sig", Encoding: "base32"}},
		{"template without body", hmac.Config{Secrets: s, Header: "X-Sig", Template: "{header:X-Id}"}},
		{"timestamp without header", hmac.Config{Secrets: s, Header: "X-Sig", Template: "{timestamp}.{body}"}},
		{"timestamp header not signed", hmac.Config{Secrets: s, Header: "X-Sig", TimestampHeader: "X-Ts", Template: "{body}"}},
		{"timestamp header, default template", hmac.Config{Secrets: s, Header: "X-Sig", TimestampHeader: "X-Ts"}},
		{"unknown placeholder", hmac.Config{Secrets: s, Header: "X-Sig", Template: "{now}.{body}"}},
		{"empty header placeholder", hmac.Config{Secrets: s, Header: "X-Sig", Template: "{header:}.{body}"}},
		{"unclosed brace", hmac.Config{Secrets: s, Header: "X-Sig", Template: "{body"}},
		{"unsigned id header", hmac.Config{Secrets: s, Header: "X-Sig", IDHeader: "X-Id"}},
		{"bad header name", hmac.Config{Secrets: s, Header: "X Sig"}},
		{"negative tolerance", hmac.Config{Secrets: s, Header: "X-Sig", Tolerance: -time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := hmac.New(tc.cfg); !errors.Is(err, payhook.ErrConfig) {
				t.Errorf("New = %v; want ErrConfig", err)
			}
		})
	}
	_, err := hmac.New(hmac.Config{Secrets: s, Header: "X-Sig", TimestampHeader: "X-Ts", Template: "{body}"})
	if want := `hmac: timestamp header X-Ts is set (TimestampHeader; timestamp_header in payhook.yaml) but template "{body}" does not sign {timestamp}`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New(unsigned timestamp header) = %v; want an error starting %q", err, want)
	}
	ok := hmac.Config{Secrets: s, Header: "X-Sig", IDHeader: "x-id", Template: "{header:X-Id}:{body}"}
	if _, err := hmac.New(ok); err != nil {
		t.Errorf("New(id header signed in another case) = %v; want nil", err)
	}
}

func TestAdapterOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		o       adapter.Options
		wantErr error
	}{
		{"config", adapter.Options{Secrets: []string{"s"}, Provider: hmac.Config{Header: "X-Sig"}}, nil},
		{"config with its own secrets", adapter.Options{Provider: hmac.Config{Header: "X-Sig", Secrets: []string{"s"}}}, nil},
		{"no config", adapter.Options{Secrets: []string{"s"}}, payhook.ErrConfig},
		{"a pointer to a config", adapter.Options{Secrets: []string{"s"}, Provider: &hmac.Config{Header: "X-Sig"}}, payhook.ErrConfig},
		{"no secret", adapter.Options{Provider: hmac.Config{Header: "X-Sig"}}, payhook.ErrConfig},
	} {
		v, err := hmac.Adapter.Verifier(tc.o)
		if !errors.Is(err, tc.wantErr) || (err != nil) != (v == nil) {
			t.Errorf("%s: Adapter.Verifier = %v, %v; want %v", tc.name, v, err, tc.wantErr)
		}
	}
}
