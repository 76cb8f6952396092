package standard_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/providertest"
	"github.com/payhook/payhook/provider/standard"
)

func newVerifier(secrets []string, tol time.Duration) (payhook.Verifier, error) {
	return standard.New(standard.Config{Secrets: secrets, Tolerance: tol})
}

const suiteEvent = `{"type":"invoice.paid","timestamp":"2026-01-15T09:59:30Z","data":{"id":"inv_1"}}`

var suiteWant = payhook.Envelope{EventID: "msg_suite1", Type: "invoice.paid", OccurredAt: time.Date(2026, 1, 15, 9, 59, 30, 0, time.UTC)}

func headers(ts string, sig string) http.Header {
	return headersID("msg_suite1", ts, sig)
}

func headersID(id, ts, sig string) http.Header {
	h := http.Header{}
	h.Set(standard.IDHeader, id)
	h.Set(standard.TimestampHeader, ts)
	h.Set(standard.SignatureHeader, sig)
	return h
}

// signHMAC signs with a v1 signature made with crypto/hmac.
func signHMAC(t *testing.T, id string, body []byte, secret string, at time.Time) http.Header {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	ts := fmt.Sprint(at.Unix())
	return headersID(id, ts, "v1,"+providertest.HMACBase64(key, id+"."+ts+"."+string(body)))
}

func TestSuiteHMAC(t *testing.T) {
	t.Parallel()
	providertest.Run(t, hmacSuite)
}

func FuzzVerify(f *testing.F) { providertest.Fuzz(f, hmacSuite) }

// hmacSuite describes the provider to providertest.
var hmacSuite = providertest.Suite{
	New: newVerifier,
	Sign: func(t *testing.T, body []byte, secret string, at time.Time) http.Header {
		return signHMAC(t, "msg_suite1", body, secret, at)
	},
	SignID:    signHMAC,
	TypeField: "type", TimeField: "timestamp",
	Secrets: [3]string{
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("old-secret-bytes")),
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("current-secret-bytes")),
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("removed-secret-bytes")),
	},
	Event:      []byte(suiteEvent),
	Want:       suiteWant,
	Incomplete: []byte(`{"timestamp":"2026-01-15T09:59:30Z","data":{}}`),
	Header:     standard.SignatureHeader,
}

// TestSuiteEd25519 runs the suite with v1a signatures made by
// crypto/ed25519 from fixed seeds.
func TestSuiteEd25519(t *testing.T) {
	t.Parallel()
	private := map[string]ed25519.PrivateKey{}
	var secrets [3]string
	for i := range secrets {
		priv := ed25519.NewKeyFromSeed([]byte(strings.Repeat(fmt.Sprint(i), 32)))
		secrets[i] = "whpk_" + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
		private[secrets[i]] = priv
	}
	providertest.Run(t, providertest.Suite{
		New: newVerifier,
		Sign: func(t *testing.T, body []byte, secret string, at time.Time) http.Header {
			ts := fmt.Sprint(at.Unix())
			sig := ed25519.Sign(private[secret], []byte("msg_suite1."+ts+"."+string(body)))
			return headers(ts, "v1a,"+base64.StdEncoding.EncodeToString(sig))
		},
		SignID: func(t *testing.T, id string, body []byte, secret string, at time.Time) http.Header {
			ts := fmt.Sprint(at.Unix())
			sig := ed25519.Sign(private[secret], []byte(id+"."+ts+"."+string(body)))
			return headersID(id, ts, "v1a,"+base64.StdEncoding.EncodeToString(sig))
		},
		TypeField: "type", TimeField: "timestamp",
		Secrets:    secrets,
		Event:      []byte(suiteEvent),
		Want:       suiteWant,
		Incomplete: []byte(`{"timestamp":"2026-01-15T09:59:30Z","data":{}}`),
		Header:     standard.SignatureHeader,
	})
}

// TestSpecVector checks the example published by Standard Webhooks (and
// Svix): secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, id
// msg_p5jXN8AQM9LWM0D4loKWxJek, timestamp 1614265330, body
// {"test": 2432232314}, signature v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
// (re-derived with Python's hmac/base64). The body has no "type", so only
// the signature is checked.
func TestSpecVector(t *testing.T) {
	t.Parallel()
	v, err := standard.New(standard.Config{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	d := payhook.Delivery{Header: h, Body: []byte(`{"test": 2432232314}`), ReceivedAt: time.Unix(1614265330, 0)}
	got, err := v.VerifySignature(d)
	if err != nil {
		t.Fatalf("VerifySignature = %v; want nil", err)
	}
	want := standard.Signed{ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Timestamp: time.Unix(1614265330, 0).UTC(), SecretID: "sha256:96ad2ccd8146"}
	if got != want {
		t.Errorf("VerifySignature = %+v; want %+v", got, want)
	}
	if _, err := v.Verify(d); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf("Verify(body without type) = %v; want ErrMalformed", err)
	}
}

// Known-answer vectors computed with Python, independently of this package:
//
//	key = bytes(range(32)); secret = "whsec_" + base64(key)
//	v1  = base64(hmac.new(key, b"msg_2PayHook.1700000000." + body, sha256).digest())
//	priv = Ed25519PrivateKey.from_private_bytes(bytes(range(100, 132)))  # cryptography 48
//	v1a = base64(priv.sign(b"msg_2PayHook.1700000000." + body))
//	fingerprint = "sha256:" + sha256(secret.encode()).hexdigest()[:12]
const (
	kaBody      = `{"type":"invoice.paid","timestamp":"2023-11-14T22:13:15Z","data":{"id":"inv_1"}}`
	kaSecret    = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	kaSecretFP  = "sha256:5036e1435aa9"
	kaV1        = "v1,dgs3wnl2mGlxwNgH/dqTLkIa+TVsNF3ihQ/Qekbn/+s="
	kaPublic    = "whpk_C7w0aldmfDgBIL2cf9flHSxf3+o3zS9b9AWyxr9vLXg="
	kaPublicFP  = "sha256:0d2efcf40257"
	kaV1a       = "v1a,ocd2d0cACYYlKidaWZf32YQ+UfHNR8qcZC459w0OEk+8domUZnZJUxm0PNVj9eybrYY7ek4QfgTnbqPcm7W/Cw=="
	kaOtherHMAC = "whsec_c29tZS1vdGhlci1zZWNyZXQ="
)

func TestKnownAnswers(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0).UTC()
	tests := []struct {
		name     string
		secrets  []string
		id, ts   string
		sig      string
		received time.Time
		wantFP   string
		wantErr  error
	}{
		{"v1", []string{kaSecret}, "msg_2PayHook", "1700000000", kaV1, at, kaSecretFP, nil},
		{"v1a", []string{kaPublic}, "msg_2PayHook", "1700000000", kaV1a, at, kaPublicFP, nil},
		{"mixed secrets, v1a", []string{kaOtherHMAC, kaPublic}, "msg_2PayHook", "1700000000", kaV1 + " " + kaV1a, at, kaPublicFP, nil},
		{"mixed secrets, v1", []string{kaPublic, kaSecret}, "msg_2PayHook", "1700000000", kaV1a + " " + kaV1, at, kaSecretFP, nil},
		{"unknown version ignored", []string{kaSecret}, "msg_2PayHook", "1700000000", "v2,AAAA " + kaV1, at, kaSecretFP, nil},
		{"v1 unpadded", []string{kaSecret}, "msg_2PayHook", "1700000000", strings.TrimRight(kaV1, "="), at, kaSecretFP, nil},
		{"v1 as v1a", []string{kaPublic}, "msg_2PayHook", "1700000000", "v1a," + kaV1[3:], at, "", payhook.ErrSignature},
		{"v1a against hmac secret", []string{kaSecret}, "msg_2PayHook", "1700000000", kaV1a, at, "", payhook.ErrSignature},
		{"other id", []string{kaSecret, kaPublic}, "msg_3PayHook", "1700000000", kaV1 + " " + kaV1a, at, "", payhook.ErrSignature},
		{"other timestamp", []string{kaSecret}, "msg_2PayHook", "1700000001", kaV1, at, "", payhook.ErrSignature},
		{"wrong secret", []string{kaOtherHMAC}, "msg_2PayHook", "1700000000", kaV1, at, "", payhook.ErrSignature},
		{"expired", []string{kaSecret}, "msg_2PayHook", "1700000000", kaV1, at.Add(10 * time.Minute), "", payhook.ErrSignature},
		{"future", []string{kaSecret}, "msg_2PayHook", "1700000000", kaV1, at.Add(-10 * time.Minute), "", payhook.ErrSignature},
		{"no id", []string{kaSecret}, "", "1700000000", kaV1, at, "", payhook.ErrSignature},
		{"no timestamp", []string{kaSecret}, "msg_2PayHook", "", kaV1, at, "", payhook.ErrSignature},
		{"timestamp not a number", []string{kaSecret}, "msg_2PayHook", "2023-11-14", kaV1, at, "", payhook.ErrSignature},
		{"no signature", []string{kaSecret}, "msg_2PayHook", "1700000000", "", at, "", payhook.ErrSignature},
		{"no comma", []string{kaSecret}, "msg_2PayHook", "1700000000", "v1", at, "", payhook.ErrSignature},
		{"not base64", []string{kaSecret}, "msg_2PayHook", "1700000000", "v1,@@@@", at, "", payhook.ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := standard.New(standard.Config{Secrets: tc.secrets})
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for k, val := range map[string]string{"Webhook-Id": tc.id, "Webhook-Timestamp": tc.ts, "Webhook-Signature": tc.sig} {
				if val != "" {
					h.Set(k, val)
				}
			}
			got, err := v.Verify(payhook.Delivery{Header: h, Body: []byte(kaBody), ReceivedAt: tc.received})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify = %v; want %v", err, tc.wantErr)
			}
			want := payhook.Envelope{EventID: "msg_2PayHook", Type: "invoice.paid", OccurredAt: time.Date(2023, 11, 14, 22, 13, 15, 0, time.UTC), SecretID: tc.wantFP}
			if tc.wantErr == nil && got != want {
				t.Errorf("Verify = %+v; want %+v", got, want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		secrets []string
	}{
		{"no prefix", []string{"c2VjcmV0"}},
		{"whsec not base64", []string{"whsec_not base64!"}},
		{"whsec empty key", []string{"whsec_"}},
		{"whpk short", []string{"whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31))}},
		{"whpk not base64", []string{"whpk_???"}},
		{"one bad among good", []string{kaSecret, "pk_live_x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := standard.New(standard.Config{Secrets: tc.secrets}); !errors.Is(err, payhook.ErrConfig) {
				t.Errorf("New(%q) = %v; want ErrConfig", tc.secrets, err)
			}
		})
	}
}

func TestSignVerifies(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("sign-me"))
	body := []byte(`{"type":"x.y","timestamp":"2026-01-15T10:00:00Z","data":{}}`)
	h, err := standard.Sign(secret, "msg_1", providertest.Now, body)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := standard.New(standard.Config{Secrets: []string{secret}})
	if env, err := v.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: providertest.Now}); err != nil || env.EventID != "msg_1" {
		t.Fatalf("Verify(Sign(...)) = %+v, %v; want msg_1", env, err)
	}
	if _, err := standard.Sign("not-a-secret", "msg_1", providertest.Now, body); !errors.Is(err, payhook.ErrConfig) {
		t.Fatalf("Sign with a bad secret: %v, want ErrConfig", err)
	}
}

// TestIDWithDot: "." separates the parts of the signed content
// "<id>.<timestamp>.<body>", so a webhook-id holding one is refused even
// when signed.
func TestIDWithDot(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("dot-secret"))
	v, _ := standard.New(standard.Config{Secrets: []string{secret}})
	body := []byte(suiteEvent)
	for _, id := range []string{"msg.1", "msg_1.", ".", "1700000000.msg"} {
		_, err := v.Verify(payhook.Delivery{Header: signHMAC(t, id, body, secret, providertest.Now), Body: body, ReceivedAt: providertest.Now})
		if !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("Verify(webhook-id %q) = %v; want ErrMalformed", id, err)
		}
	}
	if got, want := standard.CheckID("msg.1").Error(), `webhook-id "msg.1" holds a ".", the separator of the signed content: malformed event`; got != want {
		t.Errorf("CheckID = %q; want %q", got, want)
	}
	for _, id := range []string{"msg_p5jXN8AQM9LWM0D4loKWxJek", "evt-1_a:b"} {
		if err := standard.CheckID(id); err != nil {
			t.Errorf("CheckID(%q) = %v; want nil", id, err)
		}
	}
}
