package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

const sinkSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestConfigSinks(t *testing.T) {
	t.Parallel()
	const source = "sources:\n  - name: shop\n    provider: stripe\n    secrets: [whsec_x]\n"
	for _, tc := range []struct {
		name, sinks string
		want        string // in the error; "" for accepted
	}{
		{"issue example", `
  - name: app
    type: http
    url: https://app.example.com/payhook
    secret: "${APP_WEBHOOK_SECRET}"
    facts: ["order.paid", "subscription.*"]
  - name: finance
    type: smtp
    smtp: {addr: "mail.example.com:587", username: payhook, password: "${SMTP_PASSWORD}", starttls: true}
    from: payhook@example.com
    to: ["finance@example.com"]
    facts: ["payment.charged_back", "alert.raised"]`, ""},
		{"log", "\n  - {name: audit, type: log, facts: [\"*\"]}", ""},
		{"loopback allowed", "\n  - {name: app, type: http, url: \"http://127.0.0.1:9/x\", secret: " + sinkSecret + ", allow_private: true}", ""},
		{"loopback", "\n  - {name: app, type: http, url: \"http://127.0.0.1:9/x\", secret: " + sinkSecret + "}", "loopback"},
		{"metadata", "\n  - {name: app, type: http, url: \"http://169.254.169.254/latest\", secret: " + sinkSecret + "}", "link-local"},
		{"ipv6 loopback", "\n  - {name: app, type: http, url: \"http://[::1]:8080/\", secret: " + sinkSecret + "}", "loopback"},
		{"private range", "\n  - {name: app, type: http, url: \"https://10.20.30.40/hook\", secret: " + sinkSecret + "}", "private"},
		{"private smtp", "\n  - {name: m, type: smtp, smtp: {addr: \"192.168.1.5:25\"}, from: a@example.com, to: [b@example.com]}", "private"},
		{"userinfo", "\n  - {name: app, type: http, url: \"https://u:p@app.example.com/\", secret: " + sinkSecret + "}", "no user or password"},
		{"scheme", "\n  - {name: app, type: http, url: \"gopher://app.example.com/\", secret: " + sinkSecret + "}", "http or https"},
		{"no secret", "\n  - {name: app, type: http, url: \"https://app.example.com/\"}", "needs url and secret"},
		{"bad secret", "\n  - {name: app, type: http, url: \"https://app.example.com/\", secret: hunter2}", "whsec_"},
		{"type", "\n  - {name: app, type: kafka}", "none of http, smtp, log"},
		{"no name", "\n  - {type: log}", "name is required"},
		{"twice", "\n  - {name: a, type: log}\n  - {name: a, type: log}", "already used"},
		{"pattern", "\n  - {name: a, type: log, facts: [\"orders.*\"]}", "no fact type"},
		{"key of another type", "\n  - {name: a, type: http, url: \"https://app.example.com/\", secret: " + sinkSecret + ", from: a@example.com}", "not a key"},
		{"unknown key", "\n  - {name: a, type: log, retries: 3}", "retries"},
		{"unset variable", "\n  - {name: a, type: http, url: \"https://app.example.com/\", secret: \"${NOPE}\"}", "NOPE"},
	} {
		path := writeConfig(t, source+"sinks:"+tc.sinks+"\n")
		_, err := loadConfig(path, env(map[string]string{"APP_WEBHOOK_SECRET": sinkSecret, "SMTP_PASSWORD": "pw"}))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, payhook.ErrConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: loadConfig = %v; want ErrConfig saying %q", tc.name, err, tc.want)
		}
	}
}

// appReceiver is an application's endpoint for payhook's facts: it
// verifies each with the official Standard Webhooks library, answers
// slowly (so that deliveries are in flight when payhook is killed) and
// counts each webhook-id.
type appReceiver struct {
	t  *testing.T
	wh *standardwebhooks.Webhook
	mu sync.Mutex
	// seen counts the requests of each webhook-id.
	seen     map[string]int
	requests int
	// gate, while open is false, holds every request until opened
	// (hold, open); held counts the requests it holds.
	gate chan struct{}
	held int
}

// hold makes the receiver hold the requests that arrive: their
// deliveries stay pending, sent and not yet answered.
func (r *appReceiver) hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate = make(chan struct{})
}

// open lets the held requests (and the next) through.
func (r *appReceiver) open() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gate != nil {
		close(r.gate)
		r.gate = nil
	}
}

func (r *appReceiver) holding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

func newAppReceiver(t *testing.T) (*appReceiver, *httptest.Server) {
	wh, err := standardwebhooks.NewWebhook(sinkSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &appReceiver{t: t, wh: wh, seen: map[string]int{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *appReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.t.Errorf("verify: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var f outbox.Fact
	if err := json.Unmarshal(body, &f); err != nil || f.ID != req.Header.Get("webhook-id") {
		r.t.Errorf("body %s: %v; want a fact whose id is the webhook-id", body, err)
	}
	r.mu.Lock()
	if gate := r.gate; gate != nil {
		r.held++
		r.mu.Unlock()
		<-gate
		r.mu.Lock()
		r.held--
	}
	r.seen[f.ID]++
	r.requests++
	r.mu.Unlock()
}

func (r *appReceiver) counts() (distinct, requests int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen), r.requests
}

// TestFaultSIGKILLFacts kills payhook serve with SIGKILL several times
// under a storm while its facts are being delivered to an application:
// no fact is lost (every fact of the outbox reaches the application, at
// least once, exactly once after deduplication by webhook-id) and each
// fact is in the outbox once.
func TestFaultSIGKILLFacts(t *testing.T) {
	t.Parallel()
	sc := scale(faultScale{size: 0.15, faults: 3}, faultScale{size: 1, faults: 10})
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		f := newFault(t, "SIGKILL facts", engine, dbtest.URL(t, engine))
		app, srv := newAppReceiver(t)
		addSink(t, f, fmt.Sprintf("sinks:\n  - {name: app, type: http, url: %q, secret: %s, allow_private: true}\n",
			srv.URL+"/payhook", sinkSecret))
		payhook := f.start()
		st := f.storm(payhook.url(), sc.size, 21)
		every := stormAcks(sc.size) / (sc.faults + 1)
		pendingAtKills := 0
		for i := range sc.faults {
			if !f.waitAcks(st, (i+1)*every) {
				break
			}
			// Kill it between a commit and the delivery of its facts:
			// while one is being sent.
			app.hold()
			waitProgress(t, "a fact being delivered", func() (bool, string) {
				n := app.holding()
				return n > 0, fmt.Sprint(f.rec.progress(), " facts ", facts(t, f))
			})
			payhook.signal(syscall.SIGKILL)
			pendingAtKills += undelivered(t, f)
			app.open()
			f.kills++
			payhook.restart()
			f.lastFault = time.Now()
		}
		f.finish(st, sc.faults, processingStall)
		total := facts(t, f)
		waitProgress(t, "every fact delivered", func() (bool, string) {
			d, n := app.counts()
			left := undelivered(t, f)
			return left == 0 && d >= total, fmt.Sprintf("%d of %d facts received in %d requests, %d deliveries left", d, total, n, left)
		})
		distinct, requests := app.counts()
		if distinct != total {
			t.Errorf("the application received %d distinct facts; the outbox holds %d", distinct, total)
		}
		var dup int
		if err := f.db().SQL.QueryRow(`SELECT count(*) - count(DISTINCT fact_id) FROM payhook_facts`).Scan(&dup); err != nil || dup != 0 {
			t.Errorf("outbox: %d facts twice (%v)", dup, err)
		}
		t.Logf("%d kills with %d deliveries not yet delivered; %d facts, %d requests (%d redelivered)",
			f.kills, pendingAtKills, total, requests, requests-distinct)
		if pendingAtKills == 0 {
			t.Errorf("no delivery was pending at any kill: the test did not kill between commit and delivery")
		}
	})
}

// addSink appends sinks (YAML) to the fault's config file.
func addSink(t *testing.T, f *fault, sinks string) {
	t.Helper()
	for _, kv := range f.env {
		if path, ok := strings.CutPrefix(kv, "PAYHOOK_CONFIG="); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, append(b, sinks...), 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("no PAYHOOK_CONFIG")
}

func undelivered(t *testing.T, f *fault) int {
	t.Helper()
	var n int
	if err := f.db().SQL.QueryRowContext(context.Background(),
		`SELECT count(*) FROM payhook_deliveries WHERE status <> 'delivered'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func facts(t *testing.T, f *fault) int {
	t.Helper()
	var n int
	if err := f.db().SQL.QueryRowContext(context.Background(), `SELECT count(*) FROM payhook_facts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDeliveriesCommands(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		env := map[string]string{"PAYHOOK_DB": dbURL}
		if code, _, errOut := run(t, env, "migrate"); code != 0 {
			t.Fatalf("migrate: %s", errOut)
		}
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		box, err := outbox.New(outbox.Config{DB: db, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := box.AddFunc("app", nil, func(context.Context, outbox.Fact) error { return errors.New("down") }); err != nil {
			t.Fatal(err)
		}
		tx, err := billing.Begin(ctx, db, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := billing.ApplyOutcome(ctx, tx.WithOutbox(box), "shop", []billing.Fact{
			billing.OrderPaid{OrderID: "ord_cli", PaymentRef: "pi_cli", At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := box.Deliver(ctx, tx.Deliveries()[0], true); err == nil {
			t.Fatal("Deliver to a failing sink: no error")
		}
		id := fmt.Sprint(tx.Deliveries()[0])
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"deliveries", "list"}, 0, "order.paid"},
			{[]string{"deliveries", "list", "--sink", "app", "--status", "failed"}, 0, "app   failed  1"},
			{[]string{"deliveries", "list", "--status", "delivered"}, 0, "(no deliveries)"},
			{[]string{"deliveries", "list", "--json"}, 0, `"error": "down"`},
			{[]string{"deliveries", "list", "--status", "lost"}, 2, "pending, delivered, failed, paused"},
			{[]string{"deliveries", "resend", "x"}, 2, "numeric id"},
			{[]string{"deliveries", "resend", "999999"}, 1, "not found"},
			{[]string{"deliveries", "resend", id}, 0, "delivery " + id + " queued again"},
			{[]string{"deliveries", "list", "--status", "pending"}, 0, "ord_cli"},
			{[]string{"deliveries"}, 2, "list or resend"},
		} {
			code, out, errOut := run(t, env, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("payhook %s = %d\n%s%s\nwant %d saying %q", strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.want)
			}
		}
		var jobs int
		if err := db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE kind = 'payhook_deliver'`).Scan(&jobs); err != nil || jobs != 1 {
			t.Errorf("%d delivery jobs after resend (%v); want 1", jobs, err)
		}
	})
}

// TestServeLogSinkByDefault: serve without sinks logs one line per fact.
func TestServeLogSinkByDefault(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_DEMO_SECRET_FILE": filepath.Join(t.TempDir(), "demo.secret")}
		var stdout, stderr syncBuffer
		m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(env)}
		p, err := startInProcess(context.Background(), m)
		if err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
		defer p.stop()
		secret := regexp.MustCompile(`whsec_\S+`).FindString(stdout.String())
		if code, out, errOut := run(t, env, "send", "--url", p.url+"/webhooks/demo", "--secret", secret, "--id", "evt_log"); code != 0 {
			t.Fatalf("send = %d %s %s", code, out, errOut)
		}
		var line string
		waitFor(t, func() bool {
			for _, l := range strings.Split(stderr.String(), "\n") {
				if strings.Contains(l, "msg=fact") && strings.Contains(l, "type=order.paid") {
					line = l
				}
			}
			return line != ""
		})
		if !strings.Contains(line, "id=fct_") || !strings.Contains(line, "subject=ord_evt_log") || !strings.Contains(line, "source=demo") {
			t.Fatalf("no log line for order.paid ord_evt_log:\n%s", stderr.String())
		}
	})
}

// TestSinkGoneRaisesAlert: serve's outbox raises a sink_paused alert when
// an http sink answers 410 Gone; deliveries resend, which resumes the
// sink, clears it (it stayed open, saying the sink was paused, while its
// deliveries went out).
func TestSinkGoneRaisesAlert(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this endpoint was removed", http.StatusGone)
		}))
		defer gone.Close()
		path := writeConfig(t, fmt.Sprintf("sources:\n  - {name: shop, provider: stripe, secrets: [whsec_x]}\n"+
			"sinks:\n  - {name: app, type: http, url: %q, secret: %s, allow_private: true}\n", gone.URL, sinkSecret))
		cfg, err := loadConfig(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, _, err := migrateAll(ctx, db, nil); err != nil {
			t.Fatal(err)
		}
		box, err := cfg.outbox(db, discardLogger(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := billing.Begin(ctx, db, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := billing.ApplyOutcome(ctx, tx.WithOutbox(box), "shop", []billing.Fact{
			billing.OrderPaid{OrderID: "ord_gone", PaymentRef: "pi_gone", At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := box.Deliver(ctx, tx.Deliveries()[0], false); err != nil {
			t.Fatalf("Deliver to a gone sink = %v; want the sink paused, no error", err)
		}
		alerts, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: outbox.AlertSinkPaused})
		if err != nil || len(alerts) != 1 || alerts[0].Subject != "app" || !strings.Contains(alerts[0].Message, "410") {
			t.Fatalf("alerts = %+v, %v; want one sink_paused alert for app", alerts, err)
		}
		ds, err := outbox.ListDeliveries(ctx, db, outbox.DeliveryFilter{Sink: "app"})
		if err != nil || len(ds) != 1 || ds[0].Status != outbox.StatusPaused || ds[0].Log[0].Status != http.StatusGone ||
			!strings.Contains(ds[0].Log[0].Response, "removed") {
			t.Fatalf("deliveries = %+v, %v", ds, err)
		}
		if code, _, errOut := run(t, map[string]string{"PAYHOOK_DB": dbURL}, "deliveries", "resend", fmt.Sprint(ds[0].ID)); code != 0 {
			t.Fatalf("deliveries resend = %d: %s", code, errOut)
		}
		alerts, err = billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: outbox.AlertSinkPaused, Unacknowledged: true})
		if err != nil || len(alerts) != 0 {
			t.Errorf("open sink_paused alerts after the sink was resumed: %+v, %v; want none", alerts, err)
		}
	})
}

// TestLastAttempt: deliveries list's LAST column reads for every kind of
// sink.
func TestLastAttempt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a    outbox.AttemptView
		want string
	}{
		{outbox.AttemptView{Status: 200, LatencyMS: 12.4}, "200 12ms"},
		{outbox.AttemptView{Status: 503, LatencyMS: 3.25}, "503 3.2ms"},
		{outbox.AttemptView{LatencyMS: 0.04}, "ok 0.0ms"},
		{outbox.AttemptView{Error: "dial tcp: refused", LatencyMS: 1.5}, "error 1.5ms"},
	} {
		if got := lastAttempt(c.a); got != c.want {
			t.Errorf("lastAttempt(%+v) = %q; want %q", c.a, got, c.want)
		}
	}
}
