package console_test

import (
	"fmt"
	"net/http"
	"net/url"
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
