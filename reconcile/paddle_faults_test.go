package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

// paddleAPI serves Paddle's transactions and refund adjustments in three
// pages of two (after "", p1, p2), an empty chargeback and subscription
// list, and lets fault misbehave instead, per list, page and attempt.
type paddleAPI struct {
	mu       sync.Mutex
	attempts map[string]int
	fault    func(w http.ResponseWriter, r *http.Request, page, attempt int) bool
	// faulty is the path whose pages fault sees.
	faulty string
}

// paddleItem is one transaction or refund adjustment (pending: it
// changes no payment) of id.
func paddleItem(path, id string) string {
	if path == "/adjustments" {
		return `{"id":"` + id + `","action":"refund","transaction_id":"txn_x","status":"pending_approval","currency_code":"EUR",` +
			`"totals":{"total":"100","currency_code":"EUR"},"created_at":"2026-11-30T12:00:00Z"}`
	}
	return `{"id":"` + id + `","status":"completed","currency_code":"EUR","details":{"totals":{"total":"1000","grand_total":"1000",` +
		`"currency_code":"EUR"}},"created_at":"2026-11-30T12:00:00Z"}`
}

// paddlePage is a page of Paddle's list at path: next is set on every
// page, has_more says whether more follow (more "" on the last).
func paddlePage(path string, ids []string, more string) string {
	items := make([]string, len(ids))
	for i, id := range ids {
		items[i] = paddleItem(path, id)
	}
	after := more
	if after == "" && len(ids) > 0 {
		after = ids[len(ids)-1]
	}
	return fmt.Sprintf(`{"data":[%s],"meta":{"request_id":"r","pagination":{"per_page":%d,"next":"https://api.paddle.com%s?after=%s","has_more":%t}}}`,
		strings.Join(items, ","), len(ids), path, after, more != "")
}

var paddlePages = map[string][][]string{
	"/transactions": {{"txn_a1", "txn_a2"}, {"txn_b1", "txn_b2"}, {"txn_c1", "txn_c2"}},
	"/adjustments":  {{"adj_c2", "adj_c1"}, {"adj_b2", "adj_b1"}, {"adj_a2", "adj_a1"}}, // newest first
}

func (a *paddleAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pages := paddlePages[r.URL.Path]
	if pages == nil || r.URL.Query().Get("action") == "chargeback" {
		fmt.Fprint(w, paddlePage(r.URL.Path, nil, ""))
		return
	}
	n := map[string]int{"": 0, "p1": 1, "p2": 2}[r.URL.Query().Get("after")]
	a.mu.Lock()
	a.attempts[fmt.Sprint(r.URL.Path, n)]++
	attempt := a.attempts[fmt.Sprint(r.URL.Path, n)]
	a.mu.Unlock()
	if r.URL.Path == a.faulty && a.fault(w, r, n, attempt) {
		return
	}
	more := ""
	if n < len(pages)-1 {
		more = fmt.Sprintf("p%d", n+1)
	}
	fmt.Fprint(w, paddlePage(r.URL.Path, pages[n], more))
}

// A Paddle list that pages wrongly or cannot be read fails the run with a
// clear error, recorded as failed, and raises no alert; read right, its
// six transactions are each missing here.
func TestReconcilePaddlePageFaults(t *testing.T) {
	t.Parallel()
	const tx, adj = "/transactions", "/adjustments"
	cases := []struct {
		name, path string
		fault      http.HandlerFunc // on page 1, every attempt; nil: none
		err        string           // "" when the run gets through
	}{
		{"healthy", tx, nil, ""},
		{"a malformed page", tx, body(`<html>gateway</html>`), "not a Paddle list"},
		{"an item without created_at", tx, body(`{"data":[{"id":"txn_b1","status":"completed"}],"meta":{"pagination":{"has_more":false}}}`),
			"without an id or created_at"},
		{"a page that repeats an item", tx, body(paddlePage(tx, []string{"txn_b1", "txn_a2"}, "p2")),
			"lists payment txn_a2 again (first on page 1)"},
		{"a page of adjustments that repeats one", adj, body(paddlePage(adj, []string{"adj_b2", "adj_c1"}, "p2")),
			"lists refund adj_c1 again (first on page 1)"},
		{"an empty page with a next cursor", tx, body(paddlePage(tx, nil, "p2")), "says more follow lists nothing"},
		{"an empty page of adjustments with a next cursor", adj, body(paddlePage(adj, nil, "p2")), "says more follow lists nothing"},
		{"a page whose cursor goes round", tx, body(paddlePage(tx, []string{"txn_b1"}, "p1")), "gives back its own cursor"},
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL) // one database, a source per case
		now := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
		for i, tc := range cases {
			source := fmt.Sprint("paddle", i)
			api := &paddleAPI{attempts: map[string]int{}, faulty: tc.path, fault: func(http.ResponseWriter, *http.Request, int, int) bool { return false }}
			if tc.fault != nil {
				api.fault = on(1, 0, tc.fault)
			}
			srv := httptest.NewServer(api)
			c, err := provider.NewClient("paddle", adapter.ClientConfig{BaseURL: srv.URL, Key: "pdl_sdbx_apikey_x"})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := reconcile.Reconcile(ctx, reconcile.Config{
				DB: db, Source: source, Client: c, Since: now.Add(-3 * time.Hour), Now: func() time.Time { return now },
				Sleep: func(context.Context, time.Duration) error { return nil },
			})
			srv.Close()
			runs, _ := db.Runs(ctx, store.RunFilter{Source: source, Kind: store.RunReconcile})
			var alerts int
			db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_alerts WHERE subject LIKE $1`, source+"/%").Scan(&alerts)
			if len(runs) != 1 || !runs[0].Finished() {
				t.Fatalf("%s: runs %+v; want one, finished", tc.name, runs)
			}
			if tc.err == "" {
				if err != nil || rep.Listed["payment"] != 6 || rep.Listed["refund"] != 6 || len(rep.Differences) != 6 || runs[0].Failed() || alerts != 6 {
					t.Fatalf("%s: Reconcile = %+v, %v (%d alerts); want the 6 transactions and 6 refunds listed, each transaction missing here", tc.name, rep, err, alerts)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: Reconcile error = %v; want one saying %q", tc.name, err, tc.err)
			}
			if !runs[0].Failed() || err == nil || runs[0].Error != err.Error() || alerts != 0 {
				t.Errorf("%s: run %+v, %d alerts; want failed with the error %v and no alert", tc.name, runs[0], alerts, err)
			}
		}
	})
}
