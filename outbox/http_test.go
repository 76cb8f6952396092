package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url     string
		private bool
		want    string // in the error; "" for accepted
	}{
		{"https://app.example.com/payhook", false, ""},
		{"http://93.184.216.34:8080/hook", false, ""},
		{"http://127.0.0.1:8080/hook", true, ""},
		{"http://localhost/hook", true, ""},
		{"http://127.0.0.1:8080/hook", false, "loopback"},
		{"http://127.1.2.3/hook", false, "loopback"},
		{"http://169.254.169.254/latest/meta-data/", false, "link-local"},
		{"http://[::1]:8080/", false, "loopback"},
		{"http://[::ffff:127.0.0.1]/", false, "loopback"},
		{"http://10.0.0.5/", false, "private"},
		{"http://172.16.3.4/", false, "private"},
		{"http://192.168.1.1/", false, "private"},
		{"http://[fc00::1]/", false, "private"},
		{"http://[fe80::1]/", false, "link-local"},
		{"http://0.0.0.0/", false, "unspecified"},
		{"http://100.64.1.1/", false, "carrier-grade"},
		{"http://localhost:8080/", false, "local host"},
		{"http://api.localhost/", false, "local host"},
		{"ftp://app.example.com/", false, "http or https"},
		{"file:///etc/passwd", false, "http or https"},
		{"https://user:pw@app.example.com/", false, "no user or password"},
		{"https:///nohost", false, "no host"},
		{"://bad", false, "missing protocol scheme"},
	} {
		_, err := outbox.CheckURL(tc.url, tc.private)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckURL(%q, %v) = %v; want accepted", tc.url, tc.private, err)
		case tc.want != "" && (!errors.Is(err, payhook.ErrConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckURL(%q, %v) = %v; want ErrConfig saying %q", tc.url, tc.private, err, tc.want)
		case tc.want != "" && strings.Contains(err.Error(), "pw@"):
			t.Errorf("CheckURL(%q) = %v: shows the password", tc.url, err)
		}
		if tc.want != "" {
			if _, err := outbox.NewHTTP(outbox.HTTPConfig{URL: tc.url, Secret: secret, AllowPrivate: tc.private}); err == nil {
				t.Errorf("NewHTTP(%q) accepted", tc.url)
			}
		}
	}
}

func TestDecodeSecret(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := outbox.DecodeSecret(s); !errors.Is(err, payhook.ErrConfig) {
			t.Errorf("DecodeSecret(%q) = %v; want ErrConfig", s, err)
		}
	}
	if _, err := outbox.DecodeSecret(secret); err != nil {
		t.Errorf("DecodeSecret(%q) = %v", secret, err)
	}
}

// receiver is an application's webhook endpoint: it verifies each request
// with the official Standard Webhooks library and deduplicates by
// webhook-id. It answers fail (a status) to its first failures requests.
type receiver struct {
	t        *testing.T
	wh       *standardwebhooks.Webhook
	failures int64
	fail     int
	mu       sync.Mutex
	requests int64
	seen     map[string]int // webhook-id → requests
	facts    map[string]outbox.Fact
}

func newReceiver(t *testing.T, failures int64, fail int) (*receiver, *httptest.Server) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, wh: wh, failures: failures, fail: fail, seen: map[string]int{}, facts: map[string]outbox.Fact{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.t.Errorf("verify %s: %v", req.Header.Get("webhook-id"), err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if r.requests <= r.failures {
		http.Error(w, "not now", r.fail)
		return
	}
	var f outbox.Fact
	if err := json.Unmarshal(body, &f); err != nil || f.ID != req.Header.Get("webhook-id") {
		r.t.Errorf("body %s: %v; want a fact whose id is the webhook-id", body, err)
	}
	r.seen[f.ID]++
	r.facts[f.ID] = f
	fmt.Fprintln(w, "ok")
}

func (r *receiver) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.facts)
}

func (r *receiver) calls() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// TestHTTPSinkStorm: a storm delivering each event up to 5 times makes each
// fact once in the outbox; the application, verifying with the official
// Standard Webhooks library, sees every fact at least once and, after
// deduplication by webhook-id, exactly the outbox's facts, although it
// failed its first requests.
func TestHTTPSinkStorm(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		app, srv := newReceiver(t, 7, http.StatusServiceUnavailable)
		sink, err := outbox.NewHTTP(outbox.HTTPConfig{URL: srv.URL + "/payhook", Secret: secret, AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := box.Add("app", []string{"*"}, sink); err != nil {
			t.Fatal(err)
		}
		var runs counts
		q := queue(t, db, box, &runs)
		const n = 20
		var storm []*payhook.Event
		for i := range n {
			for range 1 + i%5 {
				storm = append(storm, checkout(fmt.Sprintf("evt_%d", i), fmt.Sprintf("pi_%d", i), fmt.Sprintf("ord_%d", i), 1000+int64(i)))
			}
		}
		var wg sync.WaitGroup
		for _, ev := range storm {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cp := *ev
				if _, err := q.Ingest(ctx, []*payhook.Event{&cp}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		waitProgress(t, "facts received", func() (bool, string) {
			return app.distinct() == 2*n, fmt.Sprint(app.calls(), " requests, ", app.distinct(), " facts")
		})
		stored, err := outbox.List(ctx, db, outbox.Filter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != 2*n {
			t.Fatalf("outbox holds %d facts; want %d", len(stored), 2*n)
		}
		var want, got []string
		for _, f := range stored {
			want = append(want, f.ID)
		}
		app.mu.Lock()
		for id, k := range app.seen {
			got = append(got, id)
			if k < 1 {
				t.Errorf("fact %s seen %d times", id, k)
			}
		}
		app.mu.Unlock()
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("the application got %v; want the outbox's %v", got, want)
		}
		for i := range n {
			if k := runs.get(fmt.Sprintf("evt_%d", i)); k != 1 {
				t.Errorf("evt_%d handled %d times; want once", i, k)
			}
		}
		var codes []string
		ds, err := outbox.ListDeliveries(ctx, db, outbox.DeliveryFilter{Sink: "app", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			for _, a := range d.Log {
				codes = append(codes, fmt.Sprint(a.Status))
				if a.Status == 503 && !strings.Contains(a.Response, "not now") {
					t.Errorf("attempt %+v: want the response excerpt", a)
				}
			}
		}
		if c := strings.Count(strings.Join(codes, " "), "503"); c != 7 {
			t.Errorf("delivery log has %d 503s; want 7 (%v)", c, codes)
		}
	})
}

// TestHTTPSinkGonePauses: a 410 Gone pauses the sink with an alert
// (OnPause) instead of retrying; its deliveries wait, paused, and a resend
// resumes the sink and delivers them.
func TestHTTPSinkGonePauses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		var paused atomic.Int32
		box, err := outbox.New(outbox.Config{DB: db, Logger: quiet, OnPause: func(_ context.Context, _ *sql.Tx, sink, reason string) error {
			if sink != "app" || !strings.Contains(reason, "410") {
				t.Errorf("OnPause(%s, %s)", sink, reason)
			}
			paused.Add(1)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		app, srv := newReceiver(t, 1, http.StatusGone)
		sink, err := outbox.NewHTTP(outbox.HTTPConfig{URL: srv.URL, Secret: secret, AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := box.Add("app", []string{"order.paid"}, sink); err != nil {
			t.Fatal(err)
		}
		q := queue(t, db, box, nil)
		if _, err := q.Ingest(ctx, []*payhook.Event{checkout("evt_g1", "pi_g1", "ord_g1", 500)}); err != nil {
			t.Fatal(err)
		}
		status := func() string {
			ds, err := outbox.ListDeliveries(ctx, db, outbox.DeliveryFilter{Sink: "app"})
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, d := range ds {
				s = append(s, d.Status)
			}
			return strings.Join(s, ",")
		}
		waitProgress(t, "sink paused", func() (bool, string) { s := status(); return s == "paused", s })
		if _, err := q.Ingest(ctx, []*payhook.Event{checkout("evt_g2", "pi_g2", "ord_g2", 500)}); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "second delivery paused", func() (bool, string) { s := status(); return s == "paused,paused", s })
		if paused.Load() != 1 || app.calls() != 1 {
			t.Fatalf("paused %d times, %d requests; want once, one request", paused.Load(), app.calls())
		}
		ds, err := outbox.ListDeliveries(ctx, db, outbox.DeliveryFilter{Status: outbox.StatusPaused})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		last := ds[len(ds)-1].ID
		if err := outbox.ResendTx(ctx, db, tx, last, t0); err != nil {
			t.Fatal(err)
		}
		if err := q.EnqueueDeliveriesTx(ctx, tx, []int64{ds[0].ID, last}, true); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "resent", func() (bool, string) { s := status(); return s == "delivered,delivered", s })
		if app.distinct() != 2 {
			t.Fatalf("the application got %d facts; want 2", app.distinct())
		}
	})
}

// TestHTTPSinkNoRedirects: a redirect is not followed; it is a failed
// attempt, logged with its status.
func TestHTTPSinkNoRedirects(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	sink, err := outbox.NewHTTP(outbox.HTTPConfig{URL: srv.URL + "/hook", Secret: secret, AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sink.Send(context.Background(), outbox.Fact{ID: "fct_r", Type: "order.paid", Data: []byte(`{}`)})
	if err == nil || rec.Status != http.StatusTemporaryRedirect || followed.Load() != 0 {
		t.Fatalf("Send = %+v, %v, followed %d; want a failed 307, not followed", rec, err, followed.Load())
	}
}
