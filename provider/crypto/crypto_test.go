package crypto_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/crypto"
	"github.com/payhook/payhook/provider/providertest"
)

func sign(t *testing.T, body []byte, secret string, _ time.Time) http.Header {
	h := http.Header{}
	h.Set(crypto.Header, "sha256="+providertest.HMACHex([]byte(secret), string(body)))
	return h
}

func TestSuite(t *testing.T) {
	t.Parallel()
	providertest.Run(t, suite)
}

func FuzzVerify(f *testing.F) { providertest.Fuzz(f, suite) }

// suite describes the provider to providertest.
var suite = providertest.Suite{
	Envelope: crypto.Adapter.Envelope,
	New: func(secrets []string, tol time.Duration) (payhook.Verifier, error) {
		return crypto.New(crypto.Config{Secrets: secrets, Tolerance: tol})
	},
	Sign:        sign,
	Secrets:     [3]string{"old-btcpay-secret", "current-btcpay-secret", "removed-btcpay-secret"},
	Event:       []byte(`{"deliveryId":"D1","webhookId":"W1","isRedelivery":false,"type":"InvoiceSettled","timestamp":1768470000,"storeId":"S1","invoiceId":"I1"}`),
	Want:        payhook.Envelope{EventID: "I1:InvoiceSettled", Type: "InvoiceSettled", OccurredAt: time.Unix(1768470000, 0).UTC()},
	Incomplete:  []byte(`{"deliveryId":"D1","type":"InvoiceSettled","timestamp":1768470000}`),
	Header:      crypto.Header,
	NoTimestamp: true,
	IDField:     "invoiceId", TypeField: "type", TimeField: "timestamp",
}

// Known-answer vector computed with Python, independently of this package:
//
//	hmac.new(b"btcpay-webhook-secret-payhook", body, hashlib.sha256).hexdigest()
//	"sha256:" + hashlib.sha256(b"btcpay-webhook-secret-payhook").hexdigest()[:12]
const (
	kaBody   = `{"deliveryId":"Wz1","webhookId":"Kx9","originalDeliveryId":"Wz1","isRedelivery":false,"type":"InvoiceSettled","timestamp":1700000000,"storeId":"St1","invoiceId":"Inv42","manuallyMarked":false}`
	kaSecret = "btcpay-webhook-secret-payhook"
	kaSig    = "f354e8846fd1cab3fe6fc3f10d0b2567aac73404e2dce63c125c1d2b839783ec"
	kaFP     = "sha256:ed36e3c0a35f"
)

func TestKnownAnswers(t *testing.T) {
	t.Parallel()
	want := payhook.Envelope{EventID: "Inv42:InvoiceSettled", Type: "InvoiceSettled", OccurredAt: time.Unix(1700000000, 0).UTC(), SecretID: kaFP}
	tests := []struct {
		name     string
		secrets  []string
		header   string
		received time.Time
		wantErr  error
	}{
		{"valid", []string{kaSecret}, "sha256=" + kaSig, time.Unix(1700000000, 0), nil},
		{"no tolerance: a day later", []string{kaSecret}, "sha256=" + kaSig, time.Unix(1700086400, 0), nil},
		{"rotation", []string{"new-secret", kaSecret}, "sha256=" + kaSig, time.Unix(1700000000, 0), nil},
		{"wrong secret", []string{"new-secret"}, "sha256=" + kaSig, time.Unix(1700000000, 0), payhook.ErrSignature},
		{"no prefix", []string{kaSecret}, kaSig, time.Unix(1700000000, 0), payhook.ErrSignature},
		{"sha1 prefix", []string{kaSecret}, "sha1=" + kaSig, time.Unix(1700000000, 0), payhook.ErrSignature},
		{"not hex", []string{kaSecret}, "sha256=" + kaSig[:63] + "g", time.Unix(1700000000, 0), payhook.ErrSignature},
		{"empty hex", []string{kaSecret}, "sha256=", time.Unix(1700000000, 0), payhook.ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := crypto.New(crypto.Config{Secrets: tc.secrets})
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set("btcpay-sig", tc.header)
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

// TestRedelivery checks that a redelivery, with its new deliveryId, has
// the event id of the original.
func TestRedelivery(t *testing.T) {
	t.Parallel()
	v, err := crypto.New(crypto.Config{Secrets: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	ids := map[string]bool{}
	for _, body := range []string{
		`{"deliveryId":"D1","originalDeliveryId":"D1","isRedelivery":false,"type":"InvoiceSettled","timestamp":1700000000,"invoiceId":"I9"}`,
		`{"deliveryId":"D2","originalDeliveryId":"D1","isRedelivery":true,"type":"InvoiceSettled","timestamp":1700000000,"invoiceId":"I9"}`,
	} {
		env, err := v.Verify(payhook.Delivery{Header: sign(t, []byte(body), "s", at), Body: []byte(body), ReceivedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		ids[env.EventID] = true
	}
	if len(ids) != 1 || !ids["I9:InvoiceSettled"] {
		t.Errorf("event ids = %v; want only I9:InvoiceSettled", ids)
	}
}

// TestPaymentEvents: the events of one payment of an invoice name the
// payment, so that an invoice paid in two parts tells two events, each
// redelivered as itself; without a payment id they keep the invoice's.
func TestPaymentEvents(t *testing.T) {
	t.Parallel()
	v, err := crypto.New(crypto.Config{Secrets: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	for _, tc := range []struct{ body, want string }{
		{`{"deliveryId":"D1","type":"InvoiceReceivedPayment","timestamp":1700000000,"invoiceId":"I9","payment":{"id":"tx1-0","value":"0.5"}}`, "I9:InvoiceReceivedPayment:tx1-0"},
		{`{"deliveryId":"D2","isRedelivery":true,"type":"InvoiceReceivedPayment","timestamp":1700000001,"invoiceId":"I9","payment":{"id":"tx1-0","value":"0.5"}}`, "I9:InvoiceReceivedPayment:tx1-0"},
		{`{"deliveryId":"D3","type":"InvoiceReceivedPayment","timestamp":1700000002,"invoiceId":"I9","payment":{"id":"tx2-1","value":"0.5"}}`, "I9:InvoiceReceivedPayment:tx2-1"},
		{`{"deliveryId":"D4","type":"InvoicePaymentSettled","timestamp":1700000003,"invoiceId":"I9","payment":{"id":"tx2-1"}}`, "I9:InvoicePaymentSettled:tx2-1"},
		{`{"deliveryId":"D5","type":"InvoiceReceivedPayment","timestamp":1700000004,"invoiceId":"I9"}`, "I9:InvoiceReceivedPayment"},
		{`{"deliveryId":"D6","type":"InvoiceReceivedPayment","timestamp":1700000005,"invoiceId":"I9","payment":"tx3"}`, "I9:InvoiceReceivedPayment"},
		{`{"deliveryId":"D7","type":"InvoiceSettled","timestamp":1700000006,"invoiceId":"I9","payment":{"id":"tx2-1"}}`, "I9:InvoiceSettled"},
	} {
		env, err := v.Verify(payhook.Delivery{Header: sign(t, []byte(tc.body), "s", at), Body: []byte(tc.body), ReceivedAt: at})
		if err != nil || env.EventID != tc.want {
			t.Errorf("Verify(%s) = %q, %v; want %q", tc.body, env.EventID, err, tc.want)
		}
	}
}

// TestInvoiceWithColon: the event id joins invoiceId and type with ":",
// so an invoiceId holding one could share a dedup key with another pair.
func TestInvoiceWithColon(t *testing.T) {
	t.Parallel()
	v, err := crypto.New(crypto.Config{Secrets: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	for _, body := range []string{
		`{"type":"Settled","timestamp":1700000000,"invoiceId":"I9:Invoice"}`,
		`{"type":"Invoice:Settled","timestamp":1700000000,"invoiceId":"I9"}`, // the same id, but a type may hold ":"
	} {
		env, err := v.Verify(payhook.Delivery{Header: sign(t, []byte(body), "s", at), Body: []byte(body), ReceivedAt: at})
		if strings.Contains(body, `"I9:`) {
			if !errors.Is(err, payhook.ErrMalformed) {
				t.Errorf("Verify(%s) = %+v, %v; want ErrMalformed", body, env, err)
			}
		} else if err != nil || env.EventID != "I9:Invoice:Settled" {
			t.Errorf("Verify(%s) = %+v, %v; want I9:Invoice:Settled", body, env, err)
		}
	}
}
