package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/hmac"
	"github.com/payhook/payhook/provider/providertest"
	"github.com/payhook/payhook/receiver"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

// watchedBody records whether the receiver read a request's body, and
// says when it starts to.
type watchedBody struct {
	io.ReadCloser
	once    sync.Once
	reading chan struct{}
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	return b.ReadCloser.Read(p)
}

func (b *watchedBody) read() bool {
	select {
	case <-b.reading:
		return true
	default:
		return false
	}
}

// watched serves r over loopback HTTP, handing each request's body
// watcher to the channel of the X-Test-Case header, when there is one.
type watched struct {
	mu       sync.Mutex
	watchers map[string]chan *watchedBody
}

func (wt *watched) serve(t *testing.T, r http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/webhooks/{source}", func(w http.ResponseWriter, req *http.Request) {
		wb := &watchedBody{ReadCloser: req.Body, reading: make(chan struct{})}
		req.Body = wb
		wt.mu.Lock()
		ch := wt.watchers[req.Header.Get("X-Test-Case")]
		wt.mu.Unlock()
		if ch != nil {
			ch <- wb
		}
		r.ServeHTTP(w, req)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// watch returns the channel that gets the body watcher of requests sent
// with X-Test-Case: name.
func (wt *watched) watch(name string) chan *watchedBody {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.watchers == nil {
		wt.watchers = map[string]chan *watchedBody{}
	}
	ch := make(chan *watchedBody, 16)
	wt.watchers[name] = ch
	return ch
}

func newQueueOn(t *testing.T, dbURL string) (*store.DB, *jobs.Queue) {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	q, err := jobs.New(db, jobs.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return db, q
}

// TestBogusHeaderRefusedUnread: on every provider, a delivery whose
// signature header is missing, garbage or signed too long ago is answered
// 400 without its body being read, and nothing is stored; a signed
// delivery is read and stored. Before, every body was read first (up to
// MaxBodyBytes of memory per connection for a request that could never
// verify).
func TestBogusHeaderRefusedUnread(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db, q := newQueueOn(t, dbURL)
		secret := "whsec_" + strings.Repeat("c2VjcmV0", 4)
		var sources []payhook.Source
		for _, name := range provider.Names() {
			o := provider.Options{Provider: name, Secrets: []string{secret}}
			if name == "hmac" {
				o.HMAC = hmac.Config{Header: "X-Signature", TimestampHeader: "X-Timestamp", Template: "{timestamp}.{body}"}
			}
			v, err := provider.New(o)
			if err != nil {
				t.Fatal(err)
			}
			sources = append(sources, payhook.Source{Name: name, Provider: name, Verifier: v})
		}
		r, err := receiver.New(receiver.Config{Sources: sources, Inbox: q, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		var wt watched
		url := wt.serve(t, r)
		now := time.Now()
		stale := fmt.Sprint(now.Add(-time.Hour).Unix())
		bodyOf := bytes.Repeat([]byte("x"), 64<<10)
		type tc struct {
			name, source string
			header       map[string]string
		}
		cases := []tc{
			{"stripe stale", "stripe", map[string]string{"Stripe-Signature": "t=" + stale + ",v1=" + strings.Repeat("ab", 32)}},
			{"stripe short signature", "stripe", map[string]string{"Stripe-Signature": fmt.Sprintf("t=%d,v1=abcd", now.Unix())}},
			{"paddle stale", "paddle", map[string]string{"Paddle-Signature": "ts=" + stale + ";h1=" + strings.Repeat("ab", 32)}},
			{"standard no id", "standard", map[string]string{"webhook-timestamp": fmt.Sprint(now.Unix()), "webhook-signature": "v1,abc="}},
			{"billete not base64", "billete", map[string]string{"webhook-id": "evt_1", "webhook-timestamp": fmt.Sprint(now.Unix()), "webhook-signature": "v1,%%%"}},
			{"crypto no prefix", "crypto", map[string]string{"BTCPay-Sig": strings.Repeat("ab", 32)}},
			{"hmac stale", "hmac", map[string]string{"X-Signature": strings.Repeat("ab", 32), "X-Timestamp": stale}},
		}
		for _, name := range provider.Names() {
			cases = append(cases, tc{name + " no signature", name, nil},
				tc{name + " garbage", name, map[string]string{"Stripe-Signature": "garbage", "Paddle-Signature": "garbage",
					"webhook-id": "garbage", "webhook-timestamp": "garbage", "webhook-signature": "garbage",
					"BTCPay-Sig": "garbage", "X-Signature": "garbage", "X-Timestamp": "garbage"}})
		}
		for _, c := range cases {
			ch := wt.watch(c.name)
			req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/"+c.source, bytes.NewReader(bodyOf))
			req.Header.Set("X-Test-Case", c.name)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(answer), "signature") && !strings.Contains(string(answer), "header") {
				t.Errorf("%s: %d %s, want 400 about the signature", c.name, resp.StatusCode, answer)
			}
			if wb := <-ch; wb.read() {
				t.Errorf("%s: the body was read before the header was refused", c.name)
			}
		}

		// A signed delivery passes the check and is read.
		ch := wt.watch("signed")
		b := []byte(`{"id":"evt_signed","object":"event","type":"charge.succeeded","created":` + fmt.Sprint(now.Unix()) + `,"livemode":false,"data":{"object":{}}}`)
		ts := fmt.Sprint(now.Unix())
		req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", bytes.NewReader(b))
		req.Header.Set("X-Test-Case", "signed")
		req.Header.Set("Stripe-Signature", "t="+ts+",v1="+providertest.HMACHex([]byte(secret), ts+"."+string(b)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !(<-ch).read() {
			t.Fatalf("signed delivery = %d %s; want 200 and its body read", resp.StatusCode, answer)
		}
		var n int
		if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d events stored, %v; want only the signed one", n, err)
		}
	})
}

// stripeEvent returns a Stripe event body of exactly size bytes (at least
// about 150) and its headers signed with secret, with X-Test-Case: id.
func stripeEvent(id string, size int, secret string, at time.Time) ([]byte, http.Header) {
	b := fmt.Appendf(nil, `{"id":%q,"object":"event","type":"charge.succeeded","created":%d,"livemode":false,"data":{"object":{}},"pad":"`, id, at.Unix())
	b = append(b, bytes.Repeat([]byte("p"), size-len(b)-2)...)
	b = append(b, `"}`...)
	ts := fmt.Sprint(at.Unix())
	h := http.Header{}
	h.Set("Stripe-Signature", "t="+ts+",v1="+providertest.HMACHex([]byte(secret), ts+"."+string(b)))
	h.Set("X-Test-Case", id)
	return b, h
}

// TestInFlightBudget: while deliveries hold the whole in-flight budget
// (two bodies at MaxBodyBytes, half sent), the next one is answered 503
// with Retry-After and not read; once they finish, the budget is back and
// deliveries of known and unknown length are stored. Before, there was
// no budget: every connection could hold a body.
func TestInFlightBudget(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const secret, limit = "whsec_budget", 4096
		db, wt, url := budgeted(t, dbURL, secret, limit)
		send := func(b io.Reader, h http.Header, length int64) (*http.Response, error) {
			req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", b)
			req.Header = h
			req.ContentLength = length
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return resp, err
		}

		// Two deliveries at the limit, each stalled after its first bytes.
		type holder struct {
			rest []byte
			w    *io.PipeWriter
			resp chan int
		}
		var holders []holder
		for _, id := range []string{"evt_hold1", "evt_hold2"} {
			b, h := stripeEvent(id, limit, secret, time.Now())
			ch := wt.watch(id)
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) }) // before the server closes
			hd := holder{rest: b[100:], w: pw, resp: make(chan int, 1)}
			go func() {
				resp, err := send(pr, h, limit)
				if err != nil {
					hd.resp <- 0
					return
				}
				hd.resp <- resp.StatusCode
			}()
			if _, err := pw.Write(b[:100]); err != nil {
				t.Fatal(err)
			}
			<-(<-ch).reading // the receiver took the budget and reads
			holders = append(holders, hd)
		}

		b, h := stripeEvent("evt_refused", 200, secret, time.Now())
		ch := wt.watch("evt_refused")
		resp, err := send(bytes.NewReader(b), h, int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || (<-ch).read() {
			t.Fatalf("delivery beyond the budget = %d, Retry-After %q; want 503 with Retry-After, body unread",
				resp.StatusCode, resp.Header.Get("Retry-After"))
		}

		for _, hd := range holders {
			if _, err := hd.w.Write(hd.rest); err != nil {
				t.Fatal(err)
			}
			hd.w.Close()
			if code := <-hd.resp; code != 200 {
				t.Fatalf("stalled delivery, once sent = %d, want 200", code)
			}
		}
		// The budget is back: the refused delivery's retry, and one of
		// unknown length (chunked), are stored.
		if resp, err := send(bytes.NewReader(b), h, int64(len(b))); err != nil || resp.StatusCode != 200 {
			t.Fatalf("retry after the budget freed = %v, %v; want 200", resp, err)
		}
		b, h = stripeEvent("evt_chunked", 3000, secret, time.Now())
		if resp, err := send(io.MultiReader(bytes.NewReader(b)), h, -1); err != nil || resp.StatusCode != 200 {
			t.Fatalf("chunked delivery = %v, %v; want 200", resp, err)
		}
		b, h = stripeEvent("evt_chunked_big", limit+10, secret, time.Now())
		if resp, err := send(io.MultiReader(bytes.NewReader(b)), h, -1); err != nil || resp.StatusCode != 413 {
			t.Fatalf("chunked delivery over the limit = %v, %v; want 413", resp, err)
		}
		var n int
		if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events`).Scan(&n); err != nil || n != 4 {
			t.Fatalf("%d events stored, %v; want 4", n, err)
		}
	})
}

// TestClaimHoldsNoBudget: a delivery that claims a large Content-Length
// and then stalls holds only the first bytes it is read into, not its
// claim: two of them, claiming the whole in-flight budget between them,
// leave room for a provider's delivery. Before, anyone could answer every
// delivery 503 with a few idle connections that claimed 1 MiB each, no
// secret needed (the header checks pass with any signature).
func TestClaimHoldsNoBudget(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const secret, limit = "whsec_claims", 64 << 10
		_, wt, url := budgeted(t, dbURL, secret, limit)
		for _, id := range []string{"evt_claim1", "evt_claim2"} {
			b, h := stripeEvent(id, limit, secret, time.Now())
			ch := wt.watch(id)
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) }) // before the server closes
			go func() {
				req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", pr)
				req.Header, req.ContentLength = h, limit
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			if _, err := pw.Write(b[:100]); err != nil {
				t.Fatal(err)
			}
			<-(<-ch).reading // the receiver reads its body, stalled
		}
		b, h := stripeEvent("evt_provider", 200, secret, time.Now())
		req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", bytes.NewReader(b))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a delivery beside two stalled claims of the whole budget = %d; want 200", resp.StatusCode)
		}
	})
}

// budgeted serves, watched, a receiver of one Stripe source signed with
// secret, whose bodies are of limit bytes at most and whose in-flight
// budget holds two of them; it returns the database and the server's URL.
func budgeted(t *testing.T, dbURL, secret string, limit int64) (*store.DB, *watched, string) {
	db, q := newQueueOn(t, dbURL)
	v, err := provider.New(provider.Options{Provider: "stripe", Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := receiver.New(receiver.Config{
		Sources: []payhook.Source{{Name: "stripe", Provider: "stripe", Verifier: v}},
		Inbox:   q, MaxBodyBytes: limit, MaxInFlightBytes: 2 * limit, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	wt := &watched{}
	return db, wt, wt.serve(t, r)
}
