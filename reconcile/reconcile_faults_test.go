package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
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

// objectsAPI serves billete's payments list in three pages of two
// payments (cursors "", c1, c2), empty refund and subscription lists, and
// lets fault misbehave instead, per payments page and attempt.
type objectsAPI struct {
	mu       sync.Mutex
	attempts map[int]int
	fault    func(w http.ResponseWriter, r *http.Request, page, attempt int) bool
	// hanging tells the client that the API will not answer this request
	// (see timeoutTransport): a timeout, however fast or slow the machine.
	hanging chan struct{}
}

var paymentPages = [][]string{{"pay_a1", "pay_a2"}, {"pay_b1", "pay_b2"}, {"pay_c1", "pay_c2"}}

func paymentsPage(ids []string, next string) string {
	items := make([]string, len(ids))
	for i, id := range ids {
		items[i] = `{"id":"` + id + `","object":"payment","amount":1000,"currency":"eur","status":"succeeded",` +
			`"refunded_amount":0,"created_at":"2026-11-30T12:00:00Z"}`
	}
	cursor := "null"
	if next != "" {
		cursor = `"` + next + `"`
	}
	return fmt.Sprintf(`{"object":"list","data":[%s],"has_more":%t,"next_cursor":%s}`, strings.Join(items, ","), next != "", cursor)
}

func (a *objectsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/payments" {
		fmt.Fprint(w, `{"object":"list","data":[],"has_more":false,"next_cursor":null}`)
		return
	}
	n := map[string]int{"": 0, "c1": 1, "c2": 2}[r.URL.Query().Get("cursor")]
	a.mu.Lock()
	a.attempts[n]++
	attempt := a.attempts[n]
	fault := a.fault
	a.mu.Unlock()
	r = r.WithContext(context.WithValue(r.Context(), hangingKey{}, a.hanging))
	if fault != nil && fault(w, r, n, attempt) {
		return
	}
	next := ""
	if n < len(paymentPages)-1 {
		next = fmt.Sprintf("c%d", n+1)
	}
	fmt.Fprint(w, paymentsPage(paymentPages[n], next))
}

// Each fault of the provider's API while listing objects: a retry with
// backoff (honouring Retry-After) that gets through, or the run failed
// with a clear error, recorded as failed, and no alert raised.
func TestReconcileProviderFaults(t *testing.T) {
	t.Parallel()
	backoffs := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for _, tc := range []struct {
		name   string
		fault  func(http.ResponseWriter, *http.Request, int, int) bool
		sleeps []time.Duration // the waits before retries
		err    string          // "" when the run gets through
	}{
		{"a timeout, then an answer", on(1, 1, hang), []time.Duration{time.Second}, ""},
		{"503 twice, then 200", on(1, 2, status(503, "")), []time.Duration{time.Second, 2 * time.Second}, ""},
		{"429 with Retry-After, honoured", on(2, 2, status(429, "7")), []time.Duration{7 * time.Second, 7 * time.Second}, ""},
		{"500 every time", on(1, 0, status(500, "")), backoffs, "gave up after 5 attempts"},
		{"timeouts every time", on(1, 0, hang), backoffs, "gave up after 5 attempts"},
		{"429 asking for an hour", on(1, 0, status(429, "3600")), nil, "the API asks to wait 1h0m0s, more than the 5m0s"},
		{"401", on(1, 0, status(401, "")), nil, "401 Unauthorized"},
		{"a malformed page", on(1, 0, body(`<html>gateway</html>`)), nil, "not a billete list"},
		{"an item without an id", on(1, 0, body(`{"object":"list","data":[{"amount":1}],"has_more":false}`)), nil, "without an id"},
		{"a page that repeats an item", on(1, 0, body(paymentsPage([]string{"pay_b1", "pay_a2"}, "c2"))), nil,
			"lists payment pay_a2 again (first on page 1)"},
		{"an empty page with a next cursor", on(1, 0, body(paymentsPage(nil, "c2"))), nil, "says more follow lists nothing"},
		{"a page whose cursor goes round", on(1, 0, body(paymentsPage([]string{"pay_b1"}, "c1"))), nil, "gives back its own cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := openDB(t, dbURL)
				api := &objectsAPI{attempts: map[int]int{}, fault: tc.fault, hanging: make(chan struct{}, 1)}
				srv := httptest.NewServer(api)
				defer srv.Close()
				// A timeout without a clock: only the hanging answers time
				// out, however busy the machine.
				c, err := provider.NewClient("billete", adapter.ClientConfig{BaseURL: srv.URL, Key: "sk_test_x",
					HTTP: &http.Client{Transport: timeoutTransport{hanging: api.hanging}}})
				if err != nil {
					t.Fatal(err)
				}
				var sleeps []time.Duration
				now := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
				rep, err := reconcile.Reconcile(ctx, reconcile.Config{
					DB: db, Source: "shop", Client: c, Since: now.Add(-3 * time.Hour), Now: func() time.Time { return now },
					Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil },
				})
				if !slices.Equal(sleeps, tc.sleeps) {
					t.Errorf("waits before retries %v; want %v", sleeps, tc.sleeps)
				}
				runs, _ := db.Runs(ctx, store.RunFilter{Source: "shop", Kind: store.RunReconcile})
				if len(runs) != 1 || !runs[0].Finished() {
					t.Fatalf("runs %+v; want one, finished", runs)
				}
				var alerts int
				db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_alerts`).Scan(&alerts)
				if tc.err == "" {
					if err != nil || rep.Listed["payment"] != 6 || len(rep.Differences) != 6 || runs[0].Failed() || alerts != 6 {
						t.Fatalf("Reconcile = %+v, %v (%d alerts); want the 6 payments through the retries, each missing here", rep, err, alerts)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Reconcile error = %v; want one saying %q", err, tc.err)
				}
				if !runs[0].Failed() || runs[0].Error != err.Error() || alerts != 0 {
					t.Fatalf("run %+v, %d alerts; want failed with the error %q and no alert", runs[0], alerts, err)
				}
			})
		})
	}
}
