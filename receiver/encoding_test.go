package receiver_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/stripe"
	"github.com/payhook/payhook/receiver"
)

// TestContentEncodingRefused: a body sent compressed (Content-Encoding
// gzip, deflate...) is refused with 415 and an error saying so, before
// its signature is judged, on both engines, storing nothing. Before, the
// receiver verified the compressed bytes as if they were the body: a
// provider or proxy that compressed a delivery signed over its JSON got
// "no v1 signature matches" (400), and each such delivery counted as a
// refused signature towards the signature_failures alert, which blames a
// rotated or wrong secret.
func TestContentEncodingRefused(t *testing.T) {
	b := []byte(`{"id":"evt_z","type":"charge.succeeded","livemode":true}`)
	gz := func() []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}()
	deflated := func() []byte {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}()
	cases := []struct {
		name, encoding string
		body           []byte
		wantStatus     int
	}{
		{"gzip", "gzip", gz, 415},
		{"deflate", "deflate", deflated, 415},
		{"gzip listed with identity", "identity, gzip", gz, 415},
		{"x-gzip", "x-gzip", gz, 415},
		{"identity", "identity", b, 200},
	}
	post := func(t *testing.T, url, encoding string, body []byte) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/webhooks/stripe-live", bytes.NewReader(body))
		req.Header = stripeSigned(b, time.Now()) // signed over the JSON, as providers sign
		req.Header.Set("Content-Encoding", encoding)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var answer map[string]any
		json.NewDecoder(resp.Body).Decode(&answer)
		return resp, answer
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				events, _ := e.counts(t)
				resp, answer := post(t, e.url, tc.encoding, tc.body)
				msg, _ := answer["error"].(string)
				if resp.StatusCode != tc.wantStatus {
					t.Fatalf("status %d (%v); want %d", resp.StatusCode, answer, tc.wantStatus)
				}
				if tc.wantStatus == 200 {
					return
				}
				if !strings.Contains(msg, "Content-Encoding") || resp.Header.Get("Accept-Encoding") != "identity" {
					t.Fatalf("error %q, Accept-Encoding %q; want an error naming Content-Encoding and Accept-Encoding: identity",
						msg, resp.Header.Get("Accept-Encoding"))
				}
				if after, _ := e.counts(t); after != events {
					t.Fatalf("%d events stored, want none", after-events)
				}
			})
		}
	})
	t.Run("not a signature failure", func(t *testing.T) {
		sv, err := stripe.New(stripe.Config{Secrets: []string{stripeSecret}})
		if err != nil {
			t.Fatal(err)
		}
		var refused int
		r, err := receiver.New(receiver.Config{
			Sources: []payhook.Source{{Name: "stripe-live", Provider: "stripe", Verifier: sv}},
			Inbox:   nothing{t},
			Logger:  slog.New(slog.DiscardHandler),
			OnSignature: func(_ string, ok bool, _ time.Time) {
				if !ok {
					refused++
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/webhooks/{source}", r)
		srv := httptest.NewServer(mux)
		defer srv.Close()
		if resp, _ := post(t, srv.URL, "gzip", gz); resp.StatusCode != 415 || refused != 0 {
			t.Fatalf("status %d, %d refused signatures; want 415 and none", resp.StatusCode, refused)
		}
	})
}

// nothing is an Inbox that must not be reached.
type nothing struct{ t *testing.T }

func (n nothing) Ingest(context.Context, []*payhook.Event) ([]bool, error) {
	n.t.Error("Ingest called")
	return nil, payhook.ErrUnavailable
}
