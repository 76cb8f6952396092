package paddle_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/paddle"
	"github.com/payhook/payhook/provider/providertest"
)

func sign(t *testing.T, body []byte, secret string, at time.Time) http.Header {
	ts := fmt.Sprint(at.Unix())
	h := http.Header{}
	h.Set(paddle.Header, "ts="+ts+";h1="+providertest.HMACHex([]byte(secret), ts+":"+string(body)))
	return h
}

func TestSuite(t *testing.T) {
	t.Parallel()
	providertest.Run(t, suite)
}

func FuzzVerify(f *testing.F) { providertest.Fuzz(f, suite) }

// suite describes the provider to providertest.
var suite = providertest.Suite{
	Envelope: paddle.Adapter.Envelope,
	New: func(secrets []string, tol time.Duration) (payhook.Verifier, error) {
		return paddle.New(paddle.Config{Secrets: secrets, Tolerance: tol})
	},
	Sign:       sign,
	Secrets:    [3]string{"pdl_ntfset_old", "pdl_ntfset_current", "pdl_ntfset_removed"},
	Event:      []byte(`{"event_id":"evt_01","event_type":"subscription.updated","occurred_at":"2026-01-15T09:59:00Z","data":{}}`),
	Want:       payhook.Envelope{EventID: "evt_01", Type: "subscription.updated", OccurredAt: time.Date(2026, 1, 15, 9, 59, 0, 0, time.UTC)},
	Incomplete: []byte(`{"event_type":"subscription.updated","data":{}}`),
	Header:     paddle.Header,
	IDField:    "event_id", TypeField: "event_type", TimeField: "occurred_at",
}

// Known-answer vector computed with Python, independently of this package:
//
//	hmac.new(secret.encode(), b"1700000000:" + body, hashlib.sha256).hexdigest()
//	"sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:12]
const (
	kaBody   = `{"event_id":"evt_01hv8x2payhook","event_type":"transaction.completed","occurred_at":"2023-11-14T22:13:10.123456Z","notification_id":"ntf_01","data":{"id":"txn_01"}}`
	kaSecret = "pdl_ntfset_01hpayhook_TestSecretKey"
	kaSig    = "4a589193d4ea99dabc2191aebfb9721b12bacb7d6c50035e4a71a2f6fa929dc7"
	kaFP     = "sha256:48807181ff5f"
)

func TestKnownAnswers(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0).UTC()
	want := payhook.Envelope{
		EventID: "evt_01hv8x2payhook", Type: "transaction.completed",
		OccurredAt: time.Date(2023, 11, 14, 22, 13, 10, 123456000, time.UTC), SecretID: kaFP,
	}
	tests := []struct {
		name     string
		secrets  []string
		header   string
		received time.Time
		wantErr  error
	}{
		{"h1", []string{kaSecret}, "ts=1700000000;h1=" + kaSig, at, nil},
		{"two h1", []string{kaSecret}, "ts=1700000000;h1=00ff;h1=" + kaSig, at, nil},
		{"second secret", []string{"pdl_other", kaSecret}, "ts=1700000000;h1=" + kaSig, at, nil},
		{"late", []string{kaSecret}, "ts=1700000000;h1=" + kaSig, at.Add(5*time.Minute + time.Second), payhook.ErrSignature},
		{"early", []string{kaSecret}, "ts=1700000000;h1=" + kaSig, at.Add(-5*time.Minute - time.Second), payhook.ErrSignature},
		{"other ts", []string{kaSecret}, "ts=1700000060;h1=" + kaSig, at, payhook.ErrSignature},
		{"wrong secret", []string{"pdl_other"}, "ts=1700000000;h1=" + kaSig, at, payhook.ErrSignature},
		{"stripe separators", []string{kaSecret}, "ts=1700000000,h1=" + kaSig, at, payhook.ErrSignature},
		{"no h1", []string{kaSecret}, "ts=1700000000", at, payhook.ErrSignature},
		{"no ts", []string{kaSecret}, "h1=" + kaSig, at, payhook.ErrSignature},
		{"h1 not hex", []string{kaSecret}, "ts=1700000000;h1=xyz", at, payhook.ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := paddle.New(paddle.Config{Secrets: tc.secrets})
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set("paddle-signature", tc.header)
			got, err := v.Verify(payhook.Delivery{Header: h, Body: []byte(kaBody), ReceivedAt: tc.received})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify = %v; want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && got != want {
				t.Errorf("Verify = %+v; want %+v", got, want)
			}
		})
	}
}

func TestBadOccurredAt(t *testing.T) {
	t.Parallel()
	v, err := paddle.New(paddle.Config{Secrets: []string{kaSecret}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event_id":"evt_1","event_type":"x","occurred_at":"yesterday"}`)
	at := time.Unix(1700000000, 0)
	_, err = v.Verify(payhook.Delivery{Header: sign(t, body, kaSecret, at), Body: body, ReceivedAt: at})
	if !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf("Verify(bad occurred_at) = %v; want ErrMalformed", err)
	}
}
