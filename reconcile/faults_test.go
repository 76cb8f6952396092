package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// pagedAPI serves billete's events list in three pages of two events
// (cursors "", c1, c2), with fault deciding, per page and attempt, to
// misbehave instead.
type pagedAPI struct {
	mu       sync.Mutex
	attempts map[int]int
	fault    func(w http.ResponseWriter, r *http.Request, page, attempt int) bool
	// hanging tells the client that the API will not answer this request
	// (see timeoutTransport): a timeout, however fast or slow the machine.
	hanging chan struct{}
}

// hangingKey carries the API's hanging channel to a fault in the request.
type hangingKey struct{}

// hang answers nothing until the client gives up.
func hang(w http.ResponseWriter, r *http.Request) {
	r.Context().Value(hangingKey{}).(chan struct{}) <- struct{}{}
	<-r.Context().Done()
}

var pages = [][]string{{"evt_a1", "evt_a2"}, {"evt_b1", "evt_b2"}, {"evt_c1", "evt_c2"}}

func item(id string) string {
	return `{"id":"` + id + `","type":"checkout.completed","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`
}

func page(ids []string, next string) string {
	items := make([]string, len(ids))
	for i, id := range ids {
		items[i] = item(id)
	}
	cursor := "null"
	if next != "" {
		cursor = `"` + next + `"`
	}
	return fmt.Sprintf(`{"object":"list","data":[%s],"has_more":%t,"next_cursor":%s}`, strings.Join(items, ","), next != "", cursor)
}

func (a *pagedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if n < len(pages)-1 {
		next = fmt.Sprintf("c%d", n+1)
	}
	fmt.Fprint(w, page(pages[n], next))
}

// Each fault of the provider's API: a retry with backoff (honouring
// Retry-After) that gets through, or the run failed with a clear error,
// recorded, the pages before it stored whole and nothing of the faulty
// one; the next backfill, the API healthy again, resumes from the cursor.
func TestBackfillProviderFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		fault  func(http.ResponseWriter, *http.Request, int, int) bool
		sleeps []time.Duration // the waits before retries
		err    string          // "" when the run gets through
	}{
		{"a timeout, then an answer", on(1, 1, hang), []time.Duration{time.Second}, ""},
		{"503 twice, then 200", on(1, 2, status(503, "")), []time.Duration{time.Second, 2 * time.Second}, ""},
		{"429 with Retry-After, honoured", on(2, 2, status(429, "7")), []time.Duration{7 * time.Second, 7 * time.Second}, ""},
		{"429 with Retry-After as an HTTP date, honoured", on(2, 1, retryAt(9*time.Second)), []time.Duration{9 * time.Second}, ""},
		{"500 every time", on(1, 0, status(500, "")),
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, "gave up after 5 attempts"},
		{"timeouts every time", on(1, 0, hang),
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, "gave up after 5 attempts"},
		{"429 asking for an hour", on(1, 0, status(429, "3600")), nil, "the API asks to wait 1h0m0s, more than the 5m0s"},
		{"401", on(1, 0, status(401, "")), nil, "401 Unauthorized"},
		{"a malformed page", on(1, 0, body(`<html>gateway</html>`)), nil, "not a billete list"},
		{"a page that repeats an item", on(1, 0, body(page([]string{"evt_b1", "evt_a2"}, "c2"))), nil,
			"event evt_a2 was already listed on page 1"},
		{"a page that repeats an item within itself", on(1, 0, body(page([]string{"evt_b1", "evt_b1"}, "c2"))), nil,
			"event evt_b1 was already listed on page 2"},
		{"an empty page with a next cursor", on(1, 0, body(page(nil, "c2"))), nil, "lists no event but says there are more"},
		{"a page whose cursor goes round", on(1, 0, body(page([]string{"evt_b1"}, "c1"))), nil, "the listing would go round"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				w := newWorld(t, dbURL, flavour.Billete(), 0)
				api := &pagedAPI{attempts: map[int]int{}, fault: tc.fault, hanging: make(chan struct{}, 1)}
				srv := httptest.NewServer(api)
				defer srv.Close()
				cfg := w.cfg
				cfg.Lister = &fixedLister{t: t, url: srv.URL, hanging: api.hanging}
				var sleeps []time.Duration
				cfg.Sleep = func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }
				sum, err := reconcile.Backfill(ctx, cfg)
				if !slices.Equal(sleeps, tc.sleeps) {
					t.Errorf("waits before retries %v; want %v", sleeps, tc.sleeps)
				}
				runs, _ := w.db.Runs(ctx, store.RunFilter{Source: "b"})
				if len(runs) != 1 || !runs[0].Finished() {
					t.Fatalf("runs %+v; want one, finished", runs)
				}
				if tc.err == "" {
					if err != nil || sum.New != 6 || len(w.stored(t)) != 6 || runs[0].Failed() {
						t.Fatalf("Backfill = %+v, %v (%d stored); want the 6 events through the retries", sum, err, len(w.stored(t)))
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Backfill error = %v; want one saying %q", err, tc.err)
				}
				if !runs[0].Failed() || runs[0].Error != err.Error() {
					t.Fatalf("run %+v; want failed with the error %q", runs[0], err)
				}
				// The pages before the faulty one, whole; nothing of it.
				got := w.stored(t)
				stuck := tc.name == "a page whose cursor goes round"
				if want := 2; len(got) != want && !(stuck && len(got) == 3) {
					t.Fatalf("stored %d events; want the first page's %d", len(got), want)
				}
				if got["evt_b2"] != nil || (!stuck && got["evt_b1"] != nil) {
					t.Fatal("an event of the faulty page was stored")
				}
				if runs[0].Cursor != "c1" || sum.New != len(got) {
					t.Fatalf("failed run %+v, summary %+v; want the cursor c1 of the faulty page recorded", runs[0], sum)
				}
				// The API recovers: the next backfill resumes from c1.
				api.mu.Lock()
				api.fault = nil
				api.mu.Unlock()
				w.clk.set(w.clk.now().Add(time.Minute))
				sum, err = reconcile.Backfill(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				resumed, _ := w.db.Run(ctx, sum.Runs[0])
				if resumed.Resumes != runs[0].ID || resumed.Listed != 4 || len(w.stored(t)) != 6 {
					t.Fatalf("resumed run %+v (%d stored); want it to resume run %d from c1 and list the 4 left", resumed, len(w.stored(t)), runs[0].ID)
				}
			})
		})
	}
}

// flakyInbox fails its first fails calls as a database that could not
// commit does.
type flakyInbox struct {
	payhook.Inbox
	mu    sync.Mutex
	fails int
}

func (f *flakyInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("%w: commit: deadlock detected", payhook.ErrUnavailable)
	}
	return f.Inbox.Ingest(ctx, evs)
}

// A page the database could not commit is stored again after a backoff;
// one that keeps failing fails the run with the store's error.
func TestBackfillStoreRetried(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		w := newWorld(t, dbURL, flavour.Billete(), 0)
		srv := httptest.NewServer(&pagedAPI{attempts: map[int]int{}})
		defer srv.Close()
		cfg := w.cfg
		cfg.Lister = &fixedLister{t: t, url: srv.URL}
		var sleeps []time.Duration
		cfg.Sleep = func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }
		cfg.Inbox = &flakyInbox{Inbox: w.queue, fails: 2}
		sum, err := reconcile.Backfill(ctx, cfg)
		if err != nil || sum.New != 6 || len(w.stored(t)) != 6 || len(sleeps) != 2 {
			t.Fatalf("Backfill = %+v, %v after %v; want the 6 events stored after two retries", sum, err, sleeps)
		}
		cfg.Inbox = &flakyInbox{Inbox: w.queue, fails: 100}
		cfg.From = cfg.From.Add(-time.Hour) // another window: the events are known, but every store fails
		if _, err := reconcile.Backfill(ctx, cfg); err == nil || !strings.Contains(err.Error(), "store (attempt 5)") {
			t.Fatalf("Backfill with a store that keeps failing = %v; want the store's error after 5 attempts", err)
		}
	})
}

// timeoutTransport fails a request with a timeout when the API says it
// will not answer it: the client's timeout, without a clock.
type timeoutTransport struct {
	hanging chan struct{}
}

// errTimeout is what an http.Client's timeout returns: a net.Error whose
// Timeout is true.
type errTimeout struct{}

func (errTimeout) Error() string   { return "timeout awaiting response headers" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

func (tt timeoutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(r.Context())
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.DefaultTransport.RoundTrip(r.WithContext(ctx))
		done <- result{resp, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			cancel()
			return nil, res.err
		}
		res.resp.Body = cancelOnClose{res.resp.Body, cancel}
		return res.resp, nil
	case <-tt.hanging:
		cancel()
		<-done
		return nil, errTimeout{}
	}
}

// cancelOnClose cancels the request's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// on makes a fault that answers page p's attempts up to upTo (0: every
// attempt) with do, and lets the others through.
func on(p, upTo int, do http.HandlerFunc) func(http.ResponseWriter, *http.Request, int, int) bool {
	return func(w http.ResponseWriter, r *http.Request, page, attempt int) bool {
		if page != p || (upTo > 0 && attempt > upTo) {
			return false
		}
		do(w, r)
		return true
	}
}

// status answers code with an API error body, and Retry-After if given.
func status(code int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
		fmt.Fprint(w, `{"error":{"type":"api_error"}}`)
	}
}

// retryAt answers 429 with Retry-After the HTTP date d after the
// answer's own Date (set here, so that no second ticks between the two).
func retryAt(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		w.Header().Set("Date", at.Format(http.TimeFormat))
		w.Header().Set("Retry-After", at.Add(d).Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"type":"rate_limit_error"}}`)
	}
}

// body answers s as it is.
func body(s string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, s) }
}
