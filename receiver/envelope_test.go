package receiver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/providertest"
	"github.com/payhook/payhook/provider/stripe"
)

// TestHostileEnvelopes replays, over HTTP on both engines, the deliveries
// of issue 7 that were answered 200 and stored although signed
// correctly: each must now be 400 with nothing stored.
func TestHostileEnvelopes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		now := time.Now()
		stripeAt := func(b []byte, ts int64) http.Header {
			h := http.Header{}
			t := fmt.Sprint(ts)
			h.Set(stripe.Header, "t="+t+",v1="+providertest.HMACHex([]byte(stripeSecret), t+"."+string(b)))
			return h
		}
		stripeEvent := func(id, extra string) []byte {
			return fmt.Appendf(nil, `{"id":%s,"type":"charge.succeeded","created":%d,"livemode":true%s}`, id, now.Unix(), extra)
		}
		billeteEvent := func(id string) []byte { return body(id, "test") }
		for _, tc := range []struct {
			name      string
			source    string
			header    http.Header
			body      []byte
			wantError string
		}{
			{"stripe timestamp ~29,700 years ahead", "stripe-live", stripeAt(stripeEvent(`"evt_far"`, ""), 1001796109157), stripeEvent(`"evt_far"`, ""), "2000–2200"},
			{"stripe millisecond timestamp", "stripe-live", stripeAt(stripeEvent(`"evt_ms"`, ""), now.UnixMilli()), stripeEvent(`"evt_ms"`, ""), "2000–2200"},
			{"billete timestamp ~29,700 years ahead", "billete-test", mustSign(t, newSecret, "evt_far", time.Unix(1001796109157, 0), billeteEvent("evt_far")), billeteEvent("evt_far"), "2000–2200"},
			{"stripe created in year 318857", "stripe-live", stripeSigned([]byte(`{"id":"evt_t","type":"charge.succeeded","created":10000000000000,"livemode":true}`), now),
				[]byte(`{"id":"evt_t","type":"charge.succeeded","created":10000000000000,"livemode":true}`), "2000–2200"},
			{"duplicate id", "stripe-live", stripeSigned([]byte(`{"id":"evt_a","id":"evt_b","type":"charge.succeeded","livemode":true}`), now),
				[]byte(`{"id":"evt_a","id":"evt_b","type":"charge.succeeded","livemode":true}`), "duplicate"},
			{"id beside ID", "stripe-live", stripeSigned([]byte(`{"id":"evt_a","ID":"evt_b","type":"charge.succeeded","livemode":true}`), now),
				[]byte(`{"id":"evt_a","ID":"evt_b","type":"charge.succeeded","livemode":true}`), `appears also as "ID"`},
			{"invalid UTF-8 in the id", "stripe-live", stripeSigned(stripeEvent("\"evt_\xff\"", ""), now), stripeEvent("\"evt_\xff\"", ""), "UTF-8"},
			{"lone surrogate in the id", "stripe-live", stripeSigned(stripeEvent(`"evt_\ud800"`, ""), now), stripeEvent(`"evt_\ud800"`, ""), "surrogate"},
			{"invalid UTF-8 deep in the body", "stripe-live", stripeSigned(stripeEvent(`"evt_d"`, ",\"data\":{\"object\":{\"x\":\"\xc3\x28\"}}"), now),
				stripeEvent(`"evt_d"`, ",\"data\":{\"object\":{\"x\":\"\xc3\x28\"}}"), "UTF-8"},
			{"U+2028 in the id", "stripe-live", stripeSigned(stripeEvent(`"evt_\u2028"`, ""), now), stripeEvent(`"evt_\u2028"`, ""), "control or format"},
			{"U+202E in the id", "billete-test", mustSign(t, newSecret, "evt_\u202e1", now, billeteEvent("evt_\u202e1")), billeteEvent("evt_\u202e1"), "control or format"},
			{"webhook-id with a dot", "billete-test", mustSign(t, newSecret, "evt.1", now, billeteEvent("evt.1")), billeteEvent("evt.1"), `"."`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, answer := e.do(t, http.MethodPost, "/webhooks/"+tc.source, tc.header, bytes.NewReader(tc.body))
				msg, _ := answer["error"].(string)
				if status != 400 || !strings.Contains(msg, tc.wantError) {
					t.Fatalf("status %d, answer %v; want 400 and an error mentioning %q", status, answer, tc.wantError)
				}
				if ev, jobs := e.counts(t); ev != 0 || jobs != 0 {
					t.Fatalf("stored %d events and %d jobs, want nothing", ev, jobs)
				}
			})
		}
	})
}
