package stripe_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/providertest"
	"github.com/payhook/payhook/provider/stripe"
)

func sign(t *testing.T, body []byte, secret string, at time.Time) http.Header {
	ts := fmt.Sprint(at.Unix())
	h := http.Header{}
	h.Set(stripe.Header, "t="+ts+",v1="+providertest.HMACHex([]byte(secret), ts+"."+string(body))+",v0=6ffbb59b2300aae63f2724")
	return h
}

func TestSuite(t *testing.T) {
	t.Parallel()
	providertest.Run(t, suite)
}

func FuzzVerify(f *testing.F) { providertest.Fuzz(f, suite) }

// suite describes the provider to providertest.
var suite = providertest.Suite{
	Envelope: stripe.Adapter.Envelope,
	New: func(secrets []string, tol time.Duration) (payhook.Verifier, error) {
		return stripe.New(stripe.Config{Secrets: secrets, Tolerance: tol})
	},
	Sign:       sign,
	Secrets:    [3]string{"whsec_old", "whsec_current", "whsec_removed"},
	Event:      []byte(`{"id":"evt_1","type":"charge.succeeded","created":1768470000,"livemode":false}`),
	Want:       payhook.Envelope{EventID: "evt_1", Type: "charge.succeeded", Environment: "test", OccurredAt: time.Unix(1768470000, 0).UTC()},
	Incomplete: []byte(`{"object":"event","type":"charge.succeeded"}`),
	Header:     stripe.Header,
	IDField:    "id", TypeField: "type", TimeField: "created", ReadFields: []string{"livemode"},
}

// Known-answer vectors computed with Python, independently of this package:
//
//	hmac.new(secret.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
//	"sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:12]
const (
	kaBody   = `{"id":"evt_1PayHook","object":"event","type":"invoice.paid","created":1699999990,"livemode":true,"data":{"object":{"id":"in_1"}}}`
	kaSecret = "whsec_payhookStripeTestSecret"
	kaOld    = "whsec_payhookStripeOldSecret"
	kaSig    = "54f25850bfde9c2b02345d7d82c19aade6c3d895fb7a1d1484196918ef2df496"
	kaSigOld = "8dc5037846b2132cd6ae9f13dd887ea6e672572c377ac221907005f28f8611fe"
	kaFP     = "sha256:3c1678b01965"
	kaFPOld  = "sha256:07afe2ad73e4"
)

func TestKnownAnswers(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0).UTC()
	want := payhook.Envelope{EventID: "evt_1PayHook", Type: "invoice.paid", Environment: "live", OccurredAt: time.Unix(1699999990, 0).UTC()}
	tests := []struct {
		name     string
		secrets  []string
		header   string
		received time.Time
		wantFP   string
		wantErr  error
	}{
		{"v1", []string{kaSecret}, "t=1700000000,v1=" + kaSig, at, kaFP, nil},
		{"uppercase hex", []string{kaSecret}, "t=1700000000,v1=54F25850BFDE9C2B02345D7D82C19AADE6C3D895FB7A1D1484196918EF2DF496", at, kaFP, nil},
		{"with v0 and spaces", []string{kaSecret}, "t=1700000000, v0=abc, v1=" + kaSig, at, kaFP, nil},
		{"rolling: two v1, new secret", []string{kaSecret}, "t=1700000000,v1=" + kaSigOld + ",v1=" + kaSig, at, kaFP, nil},
		{"rolling: two v1, old secret", []string{kaOld}, "t=1700000000,v1=" + kaSigOld + ",v1=" + kaSig, at, kaFPOld, nil},
		{"two secrets, old first", []string{kaOld, kaSecret}, "t=1700000000,v1=" + kaSig, at, kaFP, nil},
		{"four minutes later", []string{kaSecret}, "t=1700000000,v1=" + kaSig, at.Add(4 * time.Minute), kaFP, nil},
		{"six minutes later", []string{kaSecret}, "t=1700000000,v1=" + kaSig, at.Add(6 * time.Minute), "", payhook.ErrSignature},
		{"other timestamp", []string{kaSecret}, "t=1700000001,v1=" + kaSig, at, "", payhook.ErrSignature},
		{"wrong secret", []string{kaOld}, "t=1700000000,v1=" + kaSig, at, "", payhook.ErrSignature},
		{"v0 only", []string{kaSecret}, "t=1700000000,v0=" + kaSig, at, "", payhook.ErrSignature},
		{"no t", []string{kaSecret}, "v1=" + kaSig, at, "", payhook.ErrSignature},
		{"two t", []string{kaSecret}, "t=1700000000,t=1700000000,v1=" + kaSig, at, "", payhook.ErrSignature},
		{"t not a number", []string{kaSecret}, "t=now,v1=" + kaSig, at, "", payhook.ErrSignature},
		{"v1 not hex", []string{kaSecret}, "t=1700000000,v1=zz" + kaSig[2:], at, "", payhook.ErrSignature},
		{"truncated v1", []string{kaSecret}, "t=1700000000,v1=" + kaSig[:62], at, "", payhook.ErrSignature},
		{"entry without =", []string{kaSecret}, "t=1700000000,v1", at, "", payhook.ErrSignature},
		{"empty", []string{kaSecret}, "", at, "", payhook.ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := stripe.New(stripe.Config{Secrets: tc.secrets})
			if err != nil {
				t.Fatal(err)
			}
			d := payhook.Delivery{Header: http.Header{}, Body: []byte(kaBody), ReceivedAt: tc.received}
			if tc.header != "" {
				d.Header.Set("stripe-signature", tc.header)
			}
			got, err := v.Verify(d)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify = %v; want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			w := want
			w.SecretID = tc.wantFP
			if got != w {
				t.Errorf("Verify = %+v; want %+v", got, w)
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	v, err := stripe.New(stripe.Config{Secrets: []string{kaSecret}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0).UTC()
	tests := []struct {
		header   string
		received time.Time
		want     string
	}{
		{"", at, "stripe: missing Stripe-Signature header: invalid signature"},
		{"t=1700000000,v1=" + kaSigOld, at, "stripe: no v1 signature matches: invalid signature"},
		{"t=1700000000,v1=" + kaSig, at.Add(12 * time.Minute), "stripe: timestamp 1700000000 is 12m0s old, beyond the 5m0s tolerance: invalid signature"},
		{"t=1700000000,v1=" + kaSig, at.Add(-12 * time.Minute), "stripe: timestamp 1700000000 is 12m0s in the future, beyond the 5m0s tolerance: invalid signature"},
	}
	for _, tc := range tests {
		h := http.Header{}
		if tc.header != "" {
			h.Set(stripe.Header, tc.header)
		}
		_, err := v.Verify(payhook.Delivery{Header: h, Body: []byte(kaBody), ReceivedAt: tc.received})
		if err == nil || err.Error() != tc.want {
			t.Errorf("Verify(%q) error = %v; want %q", tc.header, err, tc.want)
		}
	}
	if _, err := stripe.New(stripe.Config{}); err == nil || err.Error() != "stripe: no secret configured: invalid configuration" {
		t.Errorf("New(no secrets) = %v", err)
	}
}
