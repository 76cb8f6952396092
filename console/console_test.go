package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/console"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

func TestNewRefusesBadCredentials(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	db := &store.DB{}
	for _, tc := range []struct {
		name string
		cfg  console.Config
		want string // in the error; "" for none
	}{
		{"no token, no users", console.Config{}, "no admin token and no users"},
		{"31-byte token", console.Config{Token: strings.Repeat("x", 31)}, "has 31 bytes; want at least 32"},
		{"32-byte token", console.Config{Token: strings.Repeat("x", 32)}, ""},
		{"users only", console.Config{Users: []console.User{{Name: "ana", Hash: string(hash)}}}, ""},
		{"hash not bcrypt", console.Config{Users: []console.User{{Name: "ana", Hash: "secret"}}}, "not a bcrypt hash"},
		{"user without a name", console.Config{Users: []console.User{{Hash: string(hash)}}}, "want a name"},
		{"user twice", console.Config{Users: []console.User{{Name: "ana", Hash: string(hash)}, {Name: "ana", Hash: string(hash)}}}, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DB, tc.cfg.Queue = db, nopQueue{}
			_, err := console.New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New = %v; want no error", err)
			case tc.want != "" && (!errors.Is(err, payhook.ErrConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New = %v; want ErrConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestLoginSessionAndCookie(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("ana's password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, func(c *console.Config) {
			c.Users = []console.User{{Name: "ana", Hash: string(hash)}}
			c.TrustProxy = true
		})
		c := e.client()
		// Not logged in: pages redirect to the login, actions are refused.
		if resp, _ := c.do("GET", "/console/events?status=failed", nil, nil); resp.StatusCode != 303 ||
			resp.Header.Get("Location") != "/console/login?next="+url.QueryEscape("/console/events?status=failed") {
			t.Fatalf("GET events without a session = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp, _ := c.do("GET", "/", nil, nil); resp.StatusCode != 303 || resp.Header.Get("Location") != "/console" {
			t.Fatalf("GET / = %d to %q; want 303 to /console", resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, tc := range []struct {
			user, secret string
			want         int
		}{
			{"", "wrong", 401},
			{"", token + "x", 401},
			{"", "", 401},
			{"ana", "wrong", 401},
			{"bob", "ana's password", 401},
			{"ana", token, 401},
			{"", token, 303},
			{"ana", "ana's password", 303},
		} {
			resp, body := c.do("POST", "/console/login", url.Values{"user": {tc.user}, "secret": {tc.secret}, "next": {"//evil.example/"}}, nil)
			if resp.StatusCode != tc.want {
				t.Errorf("login %q/%q = %d; want %d", tc.user, tc.secret, resp.StatusCode, tc.want)
			}
			if tc.want == 401 && (!strings.Contains(body, "Wrong token") || resp.Header.Get("Set-Cookie") != "") {
				t.Errorf("refused login %q/%q: body without the reason, or a cookie set", tc.user, tc.secret)
			}
			if tc.want == 303 && resp.Header.Get("Location") != "/console" {
				t.Errorf("login redirects to %q; want /console (an outside next is not followed)", resp.Header.Get("Location"))
			}
		}
		resp, _ := c.do("POST", "/console/login", url.Values{"secret": {token}}, map[string]string{"X-Forwarded-Proto": "https"})
		var cookie *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "payhook_session" {
				cookie = ck
			}
		}
		if cookie == nil || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteStrictMode {
			t.Fatalf("session cookie behind TLS = %+v; want HttpOnly, Secure, SameSite=Strict", cookie)
		}
		if resp, _ := e.client().do("POST", "/console/login", url.Values{"secret": {token}}, nil); strings.Contains(resp.Header.Get("Set-Cookie"), "Secure") {
			t.Errorf("cookie over plain HTTP is Secure: %s", resp.Header.Get("Set-Cookie"))
		}
		// A forged or altered cookie is no session.
		forged := e.client()
		u, _ := url.Parse(e.url)
		forged.jar.SetCookies(u, []*http.Cookie{{Name: "payhook_session", Value: strings.Replace(cookie.Value, "a", "b", 1)}})
		if resp, _ := forged.do("GET", "/console/events", nil, nil); resp.StatusCode != 303 {
			t.Errorf("GET with an altered cookie = %d; want 303 to the login", resp.StatusCode)
		}
		// Logging out needs the CSRF token, and ends the session.
		csrf := c.csrf()
		if resp, _ := c.do("POST", "/console/logout", url.Values{}, nil); resp.StatusCode != 403 {
			t.Errorf("logout without CSRF = %d; want 403", resp.StatusCode)
		}
		if resp, _ := c.do("POST", "/console/logout", url.Values{"csrf": {csrf}}, nil); resp.StatusCode != 303 {
			t.Errorf("logout = %d; want 303", resp.StatusCode)
		}
		if resp, _ := c.do("GET", "/console/events", nil, nil); resp.StatusCode != 303 {
			t.Errorf("GET after logout = %d; want 303 to the login", resp.StatusCode)
		}
	})
}

func TestLoginAttemptsAreLimited(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		now := t0
		e := newEnv(t, dbURL, func(c *console.Config) {
			c.LoginBurst, c.LoginEvery, c.Now = 3, time.Minute, func() time.Time { return now }
		})
		c := e.client()
		for i, want := range []int{401, 401, 401, 429, 429} {
			resp, _ := c.do("POST", "/console/login", url.Values{"secret": {"guess"}}, nil)
			if resp.StatusCode != want {
				t.Fatalf("attempt %d = %d; want %d", i+1, resp.StatusCode, want)
			}
			if want == 429 && resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		}
		// Even the right token waits its turn; a minute later it is let in.
		if resp, _ := c.do("POST", "/console/login", url.Values{"secret": {token}}, nil); resp.StatusCode != 429 {
			t.Errorf("right token while limited = %d; want 429", resp.StatusCode)
		}
		now = now.Add(time.Minute)
		if resp, _ := c.do("POST", "/console/login", url.Values{"secret": {token}}, nil); resp.StatusCode != 303 {
			t.Errorf("right token a minute later = %d; want 303", resp.StatusCode)
		}
	})
}

func TestActionsNeedTheirCSRFToken(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		id := e.alert("test_kind", "csrf")
		ev := e.ingest(event("evt_csrf", "checkout.completed", `{"id":"evt_csrf"}`))[0]
		e.wait(ev, payhook.StatusProcessed)
		ignored := e.ingest(event("evt_ignored", "nobody.handles.this", `{}`))[0]
		e.wait(ignored, payhook.StatusIgnored)
		c := e.client()
		csrf := c.login()
		other := e.client()
		otherCSRF := other.login()
		ack := fmt.Sprintf("/console/alerts/%d/ack", id)
		replay := fmt.Sprintf("/console/events/%d/replay", ev)
		for _, tc := range []struct {
			name   string
			path   string
			form   url.Values
			header map[string]string
			want   int
		}{
			{"ack without token", ack, url.Values{}, nil, 403},
			{"ack with a wrong token", ack, url.Values{"csrf": {"x" + csrf}}, nil, 403},
			{"ack with another session's token", ack, url.Values{"csrf": {otherCSRF}}, nil, 403},
			{"ack cross-site with the token", ack, url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
			{"replay without token", replay, url.Values{}, nil, 403},
			{"replay an ignored event", fmt.Sprintf("/console/events/%d/replay", ignored), url.Values{"csrf": {csrf}}, nil, 400},
			{"bulk replay without token", "/console/events/replay", url.Values{"source": {"shop"}, "status": {"processed"}, "since": {"24h"}, "before": {"99"}}, nil, 403},
			{"bulk replay not from its dry run", "/console/events/replay", url.Values{"csrf": {csrf}, "source": {"shop"}, "status": {"processed"}, "since": {"24h"}}, nil, 400},
			{"bulk replay of ignored events", "/console/events/replay", url.Values{"csrf": {csrf}, "source": {"shop"}, "status": {"ignored"}, "since": {"24h"}, "before": {"99"}}, nil, 400},
			{"bulk replay without since", "/console/events/replay", url.Values{"csrf": {csrf}, "source": {"shop"}, "status": {"processed"}, "before": {"99"}}, nil, 400},
			{"ack", ack, url.Values{"csrf": {csrf}}, nil, 303},
			{"replay", replay, url.Values{"csrf": {csrf}}, nil, 303},
		} {
			resp, _ := c.do("POST", tc.path, tc.form, tc.header)
			if resp.StatusCode != tc.want {
				t.Errorf("%s = %d; want %d", tc.name, resp.StatusCode, tc.want)
			}
		}
		as, err := billing.ListAlerts(context.Background(), e.db, billing.AlertFilter{})
		if err != nil || len(as) != 1 || !as[0].Acknowledged {
			t.Errorf("alerts = %+v, %v; want the one acknowledged", as, err)
		}
		// The bulk replay's dry run refuses a filter without its bounds.
		for _, tc := range []struct {
			query string
			want  int
			body  string
		}{
			{"source=shop&status=received&since=24h", 400, "want failed or processed"},
			{"source=shop&status=failed", 400, "since is required"},
			{"status=failed&since=24h", 400, "a source is required"},
			{"source=shop&status=failed&since=yesterday", 400, "since"},
			{"source=shop&status=failed&since=24h", 200, "Nothing to replay"},
		} {
			resp, body := c.do("GET", "/console/events/replay?"+tc.query, nil, nil)
			if resp.StatusCode != tc.want || !strings.Contains(body, tc.body) {
				t.Errorf("dry run %s = %d; want %d with %q", tc.query, resp.StatusCode, tc.want, tc.body)
			}
		}
		if got, _ := e.db.Event(context.Background(), ignored); got.Status != payhook.StatusIgnored {
			t.Errorf("ignored event after the refused bulk replays: %s", got.Status)
		}
	})
}

func TestAPITakesBearerOrSession(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		id := e.alert("test_kind", "api")
		c := e.client()
		csrf := c.login()
		anon := e.client()
		ack := fmt.Sprintf("/api/v1/alerts/%d/ack", id)
		for _, tc := range []struct {
			name   string
			c      *client
			method string
			path   string
			header map[string]string
			want   int
		}{
			{"no credentials", anon, "GET", "/api/v1/alerts", nil, 401},
			{"wrong bearer", anon, "GET", "/api/v1/alerts", map[string]string{"Authorization": "Bearer " + token + "x"}, 401},
			{"bearer", anon, "GET", "/api/v1/alerts", map[string]string{"Authorization": "Bearer " + token}, 200},
			{"session", c, "GET", "/api/v1/alerts", nil, 200},
			{"session POST without CSRF", c, "POST", ack, nil, 401},
			{"session POST with CSRF", c, "POST", ack, map[string]string{"X-CSRF-Token": csrf}, 200},
			{"bearer POST", anon, "POST", ack, map[string]string{"Authorization": "Bearer " + token}, 200},
		} {
			resp, body := tc.c.do(tc.method, tc.path, nil, tc.header)
			if resp.StatusCode != tc.want {
				t.Errorf("%s: %s %s = %d %s; want %d", tc.name, tc.method, tc.path, resp.StatusCode, body, tc.want)
			}
		}
	})
}

func TestJobsUIBehindLoginAndSameOriginJSON(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		anon := e.client()
		if resp, _ := anon.do("GET", "/console/jobs/", nil, nil); resp.StatusCode != 303 {
			t.Errorf("jobs UI without a session = %d; want 303 to the login", resp.StatusCode)
		}
		c := e.client()
		c.login()
		if resp, body := c.do("GET", "/console/jobs/api/states", nil, nil); resp.StatusCode != 200 || !strings.Contains(body, "available") {
			t.Errorf("jobs UI states = %d %.200s", resp.StatusCode, body)
		}
		cancel := "/console/jobs/api/jobs/cancel"
		for _, tc := range []struct {
			name   string
			header map[string]string
			want   int
		}{
			{"no Sec-Fetch-Site", map[string]string{"Content-Type": "application/json"}, 403},
			{"form", map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/x-www-form-urlencoded"}, 403},
			{"same-origin JSON", map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, 200},
		} {
			req, _ := http.NewRequest("POST", e.url+cancel, strings.NewReader(`{"ids":["999"]}`))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := c.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if (tc.want == 403) != (resp.StatusCode == 403) {
				t.Errorf("%s: POST %s = %d; want %d", tc.name, cancel, resp.StatusCode, tc.want)
			}
		}
	})
}

func TestEventFilterErrors(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		query string
		want  string // in the error; "" for none
	}{
		{"status=failed&source=shop&type=x&via=backfill&event_id=evt_1", ""},
		{"since=24h&until=2026-12-01T10:00", ""},
		{"since=2026-11-30T10:00:00Z", ""},
		{"status=done", `status "done"`},
		{"via=email", `via "email"`},
		{"since=yesterday", "since"},
		{"until=-5m", "until"},
		{"before=0", "before"},
		{"before=abc", "before"},
		{"since=9999-01-01", "since"},
	} {
		q, _ := url.ParseQuery(tc.query)
		_, _, err := console.ParseEventFilter(q, now)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want no error", tc.query, err)
		case tc.want != "" && (!errors.Is(err, payhook.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want ErrInvalid containing %q", tc.query, err, tc.want)
		}
	}
	q, _ := url.ParseQuery("since=2h")
	f, _, _ := console.ParseEventFilter(q, now)
	if !f.Since.Equal(now.Add(-2 * time.Hour)) {
		t.Errorf("since=2h = %v; want %v", f.Since, now.Add(-2*time.Hour))
	}
}

func TestEventPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		payload := "{\"id\":\"evt_x\",  \"note\":\"<script>alert(1)</script>\"}\n"
		ids := e.ingest(event("evt_x", "checkout.completed", payload), event("evt_f", "flaky", `{"id":"evt_f"}`))
		e.wait(ids[0], payhook.StatusProcessed)
		e.wait(ids[1], payhook.StatusFailed)
		// River writes its jobs' completion after the attempt, which the
		// event page shows as succeeded.
		waitNone(t, e, `SELECT count(*) FROM river_job WHERE state = 'running'`)
		// Signature checks as the receiver's counter flushes them: three
		// refusals after the last match, and refusals for a source no
		// longer configured.
		now := time.Now().UTC().Truncate(time.Second)
		if err := e.db.AddSignatureCounts(context.Background(), []store.SignatureCount{
			{Source: "shop", Bucket: now.Add(-time.Hour), Failures: 3, Verified: 5, LastFailure: now.Add(-30 * time.Minute), LastVerified: now.Add(-50 * time.Minute)},
			{Source: "gone", Bucket: now.Add(-time.Hour), Failures: 2, LastFailure: now.Add(-40 * time.Minute)},
		}); err != nil {
			t.Fatal(err)
		}
		c := e.client()
		c.login()
		for _, tc := range []struct {
			path string
			want int
			in   []string
			out  []string
		}{
			{"/console/events", 200, []string{"evt_x", "evt_f"}, nil},
			{"/console/events?status=failed", 200, []string{"evt_f"}, []string{"evt_x"}},
			{"/console/events?event_id=evt_x", 200, []string{"evt_x"}, []string{"evt_f"}},
			{"/console/events?type=flaky&source=shop&via=webhook&since=1h", 200, []string{"evt_f"}, []string{"evt_x"}},
			{"/console/events?via=backfill", 200, []string{"No events match"}, []string{"evt_x"}},
			{"/console/events?status=nope", 400, []string{"status"}, nil},
			{fmt.Sprintf("/console/events/%d", ids[0]), 200, []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "sha256:aaaaaaaaaaaa", "succeeded"}, []string{"<script>"}},
			{fmt.Sprintf("/console/events/%d", ids[1]), 200, []string{"the application is down (test)", "failed"}, nil},
			{"/console/events/999999", 404, nil, nil},
			{"/console/events/abc", 400, nil, nil},
			{"/console", 200, []string{"<svg", "Events per minute"}, nil},
			{"/console/chart.svg", 200, []string{"<svg"}, nil},
			{"/console/sources", 200, []string{"sha256:aaaaaaaaaaaa", "sha256:bbbbbbbbbbbb", "safe to retire",
				"3 refused</span>, 5 matched", "3 with no valid signature after them", "gone", "2 refused</span>, 0 matched"}, nil},
			{"/console/payments", 200, nil, nil},
			{"/console/ledger", 200, nil, nil},
			{"/console/subscriptions", 200, nil, nil},
			{"/console/subscriptions?status=cancelled", 400, []string{"canceled"}, nil},
			{"/console/orders", 200, nil, nil},
			{"/console/alerts?all=1", 200, nil, nil},
			{"/console/alerts?all=1&kind=event_faild", 400, []string{"event_failed"}, nil},
			// Text no column can hold: refused, not a failed query (a 500
			// on PostgreSQL).
			{"/console/events?source=%ff", 400, []string{"not valid UTF-8"}, nil},
			{"/console/payments?source=%00", 400, []string{"not valid UTF-8"}, nil},
			{"/console/subscriptions?customer=%ff", 400, []string{"not valid UTF-8"}, nil},
			{"/console/runs", 200, nil, nil},
			{"/console/nope", 404, nil, nil},
		} {
			resp, body := c.do("GET", tc.path, nil, nil)
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s = %d; want %d", tc.path, resp.StatusCode, tc.want)
				continue
			}
			for _, s := range tc.in {
				if !strings.Contains(body, s) {
					t.Errorf("GET %s: no %q", tc.path, s)
				}
			}
			for _, s := range tc.out {
				if strings.Contains(body, s) {
					t.Errorf("GET %s: has %q", tc.path, s)
				}
			}
		}
		resp, body := c.do("GET", fmt.Sprintf("/console/events/%d/payload", ids[0]), nil, nil)
		if resp.StatusCode != 200 || body != payload || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("payload download = %d %q %q; want the stored bytes as an attachment", resp.StatusCode, body, resp.Header.Get("Content-Disposition"))
		}
	})
}

func TestEventListPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		var evs []*payhook.Event
		for i := range console.PageSize*2 + 5 {
			evs = append(evs, event(fmt.Sprintf("evt_page_%03d", i), "other", `{}`))
		}
		e.ingest(evs...)
		c := e.client()
		c.login()
		seen := map[string]bool{}
		path := "/console/events?source=shop"
		for pages := 0; path != ""; pages++ {
			if pages > 3 {
				t.Fatal("more than 3 pages")
			}
			resp, body := c.do("GET", path, nil, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d", path, resp.StatusCode)
			}
			for _, ev := range evs {
				if strings.Contains(body, ">"+ev.EventID+"<") {
					if seen[ev.EventID] {
						t.Errorf("%s on two pages", ev.EventID)
					}
					seen[ev.EventID] = true
				}
			}
			path = ""
			if j := strings.Index(body, `" id="older"`); j >= 0 {
				k := strings.LastIndex(body[:j], `href="`)
				path = strings.ReplaceAll(body[k+6:j], "&amp;", "&")
			}
		}
		if len(seen) != len(evs) {
			t.Errorf("pages showed %d events; want %d", len(seen), len(evs))
		}
	})
}

// nopQueue is a queue for the tests that never reach it.
type nopQueue struct{}

func (nopQueue) Replay(context.Context, int64) error { return nil }
func (nopQueue) Attempts(context.Context, int64) ([]jobs.Attempt, error) {
	return nil, nil
}
func (nopQueue) PlanReplay(context.Context, jobs.BulkFilter, int) (*jobs.BulkPlan, error) {
	return &jobs.BulkPlan{}, nil
}
func (nopQueue) ReplayBulk(context.Context, *jobs.BulkPlan, jobs.BulkOptions) (jobs.BulkResult, error) {
	return jobs.BulkResult{}, nil
}

// Close stops a bulk replay running in the background and waits for it:
// the batch it replayed stays replayed, the rest stay failed, and a bulk
// replay asked for after Close is refused with 503.
func TestCloseStopsTheBulkReplay(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		// One event a minute: the second waits for Close.
		e := newEnv(t, dbURL, func(cfg *console.Config) { cfg.ReplayRate = 1.0 / 60 })
		ids := e.ingest(event("evt_a", "unreadable", `{}`), event("evt_b", "unreadable", `{}`))
		for _, id := range ids {
			e.wait(id, payhook.StatusFailed)
		}
		c := e.client()
		csrf := c.login()
		confirm := url.Values{"csrf": {csrf}, "source": {"shop"}, "status": {"failed"}, "since": {"24h"},
			"before": {fmt.Sprint(ids[1] + 1)}}
		// Fixed before the replay, whose first attempt may run before the
		// POST returns.
		e.fixed.Store(true)
		if resp, body := c.do("POST", "/console/events/replay", confirm, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("bulk replay = %d: %s", resp.StatusCode, body)
		}
		// The first event is replayed at once; wait for its new attempt.
		e.wait(ids[0], payhook.StatusProcessed)
		e.console.Close()
		if got, err := e.db.Event(context.Background(), ids[1]); err != nil || got.Status != payhook.StatusFailed {
			t.Fatalf("the event the stopped replay did not reach: %v, %v; want failed", got.Status, err)
		}
		resp, body := c.do("GET", "/console/events", nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(body, "stopped after 1 of 2") {
			t.Errorf("events page after Close = %d; want the bulk replay stopped after 1 of 2:\n%s", resp.StatusCode, body)
		}
		if resp, body := c.do("POST", "/console/events/replay", confirm, nil); resp.StatusCode != 503 {
			t.Errorf("bulk replay after Close = %d; want 503: %s", resp.StatusCode, body)
		}
	})
}
