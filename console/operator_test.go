package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
)

// TestBulkReplayFormTextNoColumnHolds: the bulk replay's confirmation
// (a POST form, which api.CheckText, run on the pages' queries, never
// sees) with a source or type no column can hold (a NUL, invalid UTF-8)
// is a bad parameter, 400 on both engines, as its dry run's GET is; not
// a database error answered 500 on PostgreSQL.
func TestBulkReplayFormTextNoColumnHolds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		ids := e.ingest(event("evt_a", "unreadable", `{}`))
		e.wait(ids[0], payhook.StatusFailed)
		c := e.client()
		csrf := c.login()
		for _, tc := range []struct{ name, source, typ string }{
			{"NUL in source", "shop\x00", ""},
			{"invalid UTF-8 in source", "shop\xff", ""},
			{"NUL in type", "shop", "unreadable\x00"},
			{"invalid UTF-8 in type", "shop", "\xffunreadable"},
		} {
			form := url.Values{"csrf": {csrf}, "source": {tc.source}, "status": {"failed"}, "since": {"24h"},
				"type": {tc.typ}, "before": {fmt.Sprint(ids[0] + 1)}}
			if resp, body := c.do("POST", "/console/events/replay", form, nil); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: bulk replay = %d; want 400: %.300s", tc.name, resp.StatusCode, body)
			}
			q := url.Values{"source": {tc.source}, "status": {"failed"}, "since": {"24h"}, "type": {tc.typ}}
			if resp, body := c.do("GET", "/console/events/replay?"+q.Encode(), nil, nil); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: dry run = %d; want 400: %.300s", tc.name, resp.StatusCode, body)
			}
		}
	})
}

// TestAckHidesNoOccurrenceRaisedSinceThePage: an operator reads the
// alerts page (count 1), the alert is raised again (count 2, open
// again), then the operator's Acknowledge, the form as the page wrote
// it, is sent. That acknowledges what the operator saw, not the
// occurrence raised since, which must stay open: the ack is refused (or
// leaves the alert open) rather than hiding the new occurrence.
func TestAckHidesNoOccurrenceRaisedSinceThePage(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		id := e.alert("source_silent", "shop")
		c := e.client()
		c.login()
		resp, page := c.do("GET", "/console/alerts", nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("alerts page = %d", resp.StatusCode)
		}
		formRE := regexp.MustCompile(`(?s)<form method="post" action="/console/alerts/` + fmt.Sprint(id) + `/ack"[^>]*>(.*?)</form>`)
		m := formRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no ack form for alert %d on the page:\n%s", id, page)
		}
		form := url.Values{}
		for _, in := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(m[1], -1) {
			form.Add(in[1], html.UnescapeString(in[2]))
		}
		// Raised again while the operator reads the page.
		e.alert("source_silent", "shop")
		resp, body := c.do("POST", "/console/alerts/"+fmt.Sprint(id)+"/ack", form, nil)
		var acked bool
		var count int
		if err := e.db.SQL.QueryRow(`SELECT acknowledged, count FROM payhook_alerts WHERE id = $1`, id).Scan(&acked, &count); err != nil {
			t.Fatal(err)
		}
		if acked {
			t.Errorf("ack sent from a page showing count 1 = %d, and alert %d (count %d) is acknowledged: the occurrence raised since is hidden",
				resp.StatusCode, id, count)
		}
		if resp.StatusCode == http.StatusSeeOther || resp.StatusCode/100 == 5 {
			t.Errorf("stale ack = %d; want a 4xx saying the alert was raised again: %.200s", resp.StatusCode, body)
		}
		// The ack of the page as it is now goes through.
		_, page = c.do("GET", "/console/alerts", nil, nil)
		m = formRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no ack form for alert %d on the page after the refused ack", id)
		}
		form = url.Values{}
		for _, in := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(m[1], -1) {
			form.Add(in[1], html.UnescapeString(in[2]))
		}
		if resp, body := c.do("POST", "/console/alerts/"+fmt.Sprint(id)+"/ack", form, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("ack of the page as it is = %d; want 303: %.200s", resp.StatusCode, body)
		}
		if err := e.db.SQL.QueryRow(`SELECT acknowledged FROM payhook_alerts WHERE id = $1`, id).Scan(&acked); err != nil || !acked {
			t.Errorf("after the fresh ack: acknowledged %v, %v; want true", acked, err)
		}
	})
}

// TestLogoutEndsTheSessionForItsCookie: after logout, the session's
// cookie, as captured before (a shared machine's browser profile, a
// proxy log, a stolen cookie), is no session any more: pages redirect
// to the login and actions are refused. Logout must end the session, not
// only ask the browser to forget its cookie.
func TestLogoutEndsTheSessionForItsCookie(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		c := e.client()
		csrf := c.login()
		u, _ := url.Parse(e.url)
		var captured *http.Cookie
		for _, ck := range c.jar.Cookies(u) {
			if ck.Name == "payhook_session" {
				captured = ck
			}
		}
		if captured == nil {
			t.Fatal("no session cookie after login")
		}
		if resp, _ := c.do("POST", "/console/logout", url.Values{"csrf": {csrf}}, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout = %d; want 303", resp.StatusCode)
		}
		thief := e.client()
		thief.jar.SetCookies(u, []*http.Cookie{{Name: "payhook_session", Value: captured.Value}})
		if resp, _ := thief.do("GET", "/console/events", nil, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("GET /console/events with the logged-out session's cookie = %d; want 303 to the login", resp.StatusCode)
		}
		if resp, _ := thief.do("GET", "/api/v1/alerts", nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /api/v1/alerts with the logged-out session's cookie = %d; want 401", resp.StatusCode)
		}
		id := e.alert("source_silent", "shop")
		if resp, _ := thief.do("POST", fmt.Sprintf("/console/alerts/%d/ack", id), url.Values{"csrf": {csrf}}, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("ack with the logged-out session's cookie and CSRF token = %d; want 401", resp.StatusCode)
		}
	})
}
