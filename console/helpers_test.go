package console_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/payhook/payhook/store/storetest"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/console"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/jobs/jobsui"
	"github.com/payhook/payhook/store"
)

// token is the tests' admin token (32 bytes and more).
const token = "test-admin-token-0123456789abcdef"

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// env is a console served on a loopback port over a migrated database
// whose queue runs: events of type "flaky" fail until fixed is set, and
// those of type "unreadable" fail at once.
type env struct {
	t       *testing.T
	db      *store.DB
	queue   *jobs.Queue
	console *console.Console
	url     string
	fixed   atomic.Bool
}

// options tweak the console of an env.
type options func(*console.Config)

func newEnv(t *testing.T, dbURL string, opts ...options) *env {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db}
	mux := &payhook.Mux{}
	mux.HandleFunc("flaky", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
		if !e.fixed.Load() {
			return errors.New("the application is down (test)")
		}
		return nil
	})
	mux.HandleFunc("checkout.completed", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error { return nil })
	// "unreadable" fails at its first attempt, until fixed: no retry to
	// wait for.
	mux.HandleFunc("unreadable", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
		if !e.fixed.Load() {
			return fmt.Errorf("%w: the application cannot read it (test)", payhook.ErrMalformed)
		}
		return nil
	})
	q, err := jobs.New(db, jobs.Config{Handlers: mux, MaxAttempts: 2, PollInterval: 10 * time.Millisecond,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		q.Stop(ctx)
	})
	e.queue = q
	uiCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ui, err := jobsui.Handler(uiCtx, q, console.JobsPrefix, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cfg := console.Config{DB: db, Queue: q, Token: token, Jobs: ui, Logger: slog.New(slog.DiscardHandler),
		Sources: []console.Source{{Name: "shop", Provider: "billete", Environment: "test", Fingerprints: []string{"sha256:aaaaaaaaaaaa", "sha256:bbbbbbbbbbbb"}}}}
	cfg.Resend = e.resend
	for _, o := range opts {
		o(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.console = c
	m := http.NewServeMux()
	c.Mount(m)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// ingest stores events (and enqueues their jobs) and returns their ids.
func (e *env) ingest(evs ...*payhook.Event) []int64 {
	e.t.Helper()
	if _, err := e.queue.Ingest(context.Background(), evs); err != nil {
		e.t.Fatal(err)
	}
	ids := make([]int64, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

func event(id, typ, payload string) *payhook.Event {
	return &payhook.Event{Source: "shop", EventID: id, Type: typ, ReceivedAt: time.Now().UTC(), SecretID: "sha256:aaaaaaaaaaaa",
		Payload: []byte(payload)}
}

// wait waits until the event's status is want, failing when nothing
// changes for a long while.
func (e *env) wait(id int64, want payhook.Status) *payhook.Event {
	e.t.Helper()
	var last string
	moved := time.Now()
	for {
		ev, err := e.db.Event(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if ev.Status == want {
			return ev
		}
		if now := fmt.Sprint(ev.Status, ev.Attempts); now != last {
			last, moved = now, time.Now()
		}
		if time.Since(moved) > 60*time.Second {
			e.t.Fatalf("event %d stuck at %s; want %s", id, last, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alert raises an alert and returns its id.
func (e *env) alert(kind, subject string) int64 {
	e.t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, e.db, t0)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := billing.RaiseAlert(ctx, tx, kind, subject, "test alert "+subject); err != nil {
		e.t.Fatal(errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
	var id int64
	if err := e.db.SQL.QueryRow(`SELECT id FROM payhook_alerts WHERE kind = $1 AND subject = $2`, kind, subject).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// client is a browser-like HTTP client with a cookie jar that does not
// follow redirects.
type client struct {
	t   *testing.T
	e   *env
	hc  *http.Client
	jar *cookiejar.Jar
}

func (e *env) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: e.t, e: e, jar: jar, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// do sends a request; form, if not nil, is the urlencoded body.
func (c *client) do(method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.e.url+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

// login logs in with the admin token and returns the CSRF token of the
// session.
func (c *client) login() string {
	c.t.Helper()
	resp, _ := c.do("POST", "/console/login", url.Values{"secret": {token}, "next": {"/console/events"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/events" {
		c.t.Fatalf("login = %d to %q; want 303 to /console/events", resp.StatusCode, resp.Header.Get("Location"))
	}
	return c.csrf()
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page.
func (c *client) csrf() string {
	c.t.Helper()
	resp, body := c.do("GET", "/console/alerts", nil, nil)
	m := csrfField.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		c.t.Fatalf("GET /console/alerts = %d without a CSRF token", resp.StatusCode)
	}
	return m[1]
}

// waitNone waits until the count query returns 0, failing only when the
// count has not moved for a minute.
func waitNone(t *testing.T, e *env, query string) {
	t.Helper()
	last, moved := -1, time.Now()
	for {
		var n int
		if err := e.db.SQL.QueryRow(query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if n != last {
			last, moved = n, time.Now()
		}
		if time.Since(moved) > 60*time.Second {
			t.Fatalf("%s: still %d after a minute without change", query, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
