package metrics

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// open returns a migrated database of the URL, closed when t ends.
func open(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// scrape returns the series of m's /metrics: "name{labels}" to value.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", rec.Code, rec.Body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestReconcileDifferencesAfterFailedRun: a reconcile run that failed
// (the provider's API down) compared nothing; payhook_reconcile_differences
// keeps what the last run that compared found, instead of a 0 that says
// all agree, and payhook_runs_last_failed says the last run failed.
func TestReconcileDifferencesAfterFailedRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		for i, r := range []*store.Run{
			{Kind: store.RunReconcile, Source: "stripe", Differences: 3, Unchecked: 7},
			{Kind: store.RunReconcile, Source: "stripe", Error: "list payments: 503 Service Unavailable"},
			{Kind: store.RunBackfill, Source: "stripe", New: 2},
		} {
			r.From, r.Until = at.Add(-24*time.Hour), at
			start := at.Add(time.Duration(i) * time.Minute)
			if err := db.StartRun(ctx, r, start); err != nil {
				t.Fatal(err)
			}
			if err := db.FinishRun(ctx, r, start.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := New(Config{DB: db, Now: func() time.Time { return at.Add(time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		got := scrape(t, m)
		for series, want := range map[string]float64{
			`payhook_metrics_scrape_errors`:                                                 0,
			`payhook_reconcile_differences{source="stripe"}`:                                3,
			`payhook_reconcile_unchecked{source="stripe"}`:                                  7,
			`payhook_runs_last_failed{kind="reconcile",source="stripe"}`:                    1,
			`payhook_runs_last_failed{kind="backfill",source="stripe"}`:                     0,
			`payhook_runs_last_success_timestamp_seconds{kind="reconcile",source="stripe"}`: float64(at.Add(time.Second).Unix()),
			`payhook_runs_last_success_timestamp_seconds{kind="backfill",source="stripe"}`:  float64(at.Add(2*time.Minute + time.Second).Unix()),
		} {
			if v, ok := got[series]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
			}
		}
	})
}

// TestEndToEndBuckets: an event processed minutes or hours after its
// receipt (a retry's backoff, a backlog drained after an outage) falls in
// a bucket of its own, not all of them past the last (33 s) in +Inf.
func TestEndToEndBuckets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		m, err := New(Config{DB: open(t, dbURL), Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		for _, ago := range []time.Duration{10 * time.Minute, 3 * time.Hour} {
			m.Done(&payhook.Event{Source: "stripe", ReceivedAt: now.Add(-ago)}, payhook.StatusProcessed, time.Millisecond)
		}
		got := scrape(t, m)
		// Some finite bucket holds the 10 minutes and not the 3 hours.
		split, buckets := false, []string{}
		for series, v := range got {
			if strings.HasPrefix(series, `payhook_end_to_end_duration_seconds_bucket{source="stripe",le="`) {
				buckets = append(buckets, fmt.Sprintf("%s %v", series, v))
				split = split || !strings.Contains(series, `le="+Inf"`) && v == 1
			}
		}
		if !split {
			t.Errorf("no finite bucket of payhook_end_to_end_duration_seconds holds 10 minutes without 3 hours: %v", buckets)
		}
	})
}

// inboxFunc is a payhook.Inbox of a function.
type inboxFunc func(ctx context.Context, evs []*payhook.Event) ([]bool, error)

func (f inboxFunc) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	return f(ctx, evs)
}

// TestBackfillCounted: the events a scheduled backfill stores are new
// rows, counted as received (and backfilled) like the deliveries the group
// committer counts; those it finds stored already are no duplicate
// deliveries, and a failed Ingest counts nothing.
func TestBackfillCounted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		m, err := New(Config{DB: open(t, dbURL)})
		if err != nil {
			t.Fatal(err)
		}
		fail := false
		in := m.Backfill(inboxFunc(func(_ context.Context, evs []*payhook.Event) ([]bool, error) {
			if fail {
				return nil, payhook.ErrUnavailable
			}
			return []bool{true, false, true}, nil
		}))
		evs := []*payhook.Event{{Source: "stripe", EventID: "evt_1", Status: payhook.StatusReceived},
			{Source: "stripe", EventID: "evt_2", Status: payhook.StatusReceived},
			{Source: "stripe", EventID: "evt_3", Status: payhook.StatusIgnored}}
		if _, err := in.Ingest(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		fail = true
		if _, err := in.Ingest(context.Background(), evs); err == nil {
			t.Fatal("Ingest's error was lost")
		}
		got := scrape(t, m)
		for series, want := range map[string]float64{
			`payhook_events_received_total{source="stripe"}`:                2,
			`payhook_events_backfilled_total{source="stripe"}`:              2,
			`payhook_events_ignored_total{source="stripe",stage="receive"}`: 1,
			`payhook_events_duplicates_total{source="stripe"}`:              0,
		} {
			if v := got[series]; v != want {
				t.Errorf("%s = %v, want %v", series, v, want)
			}
		}
	})
}

// TestAlertsOpenZero: a kind of Config.AlertKinds reads 0 while none of
// its alerts is open, and its count once one is; a kind not listed has a
// series only while open.
func TestAlertsOpenZero(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := open(t, dbURL)
		m, err := New(Config{DB: db, AlertKinds: []string{"event_failed", "sink_paused"}})
		if err != nil {
			t.Fatal(err)
		}
		got := scrape(t, m)
		for _, kind := range []string{"event_failed", "sink_paused"} {
			if v, ok := got[`payhook_alerts_open{kind="`+kind+`"}`]; !ok || v != 0 {
				t.Errorf("payhook_alerts_open{kind=%q} = %v, %v before any alert; want 0", kind, v, ok)
			}
		}
		if _, err := db.SQL.Exec(`INSERT INTO payhook_alerts (kind, subject, message, first_seen, last_seen, acknowledged)
			VALUES ('event_failed', 'a', 'm', $1, $1, $2), ('own_kind', 'b', 'm', $1, $1, $2)`,
			db.TimeValue(time.Now()), false); err != nil {
			t.Fatal(err)
		}
		got = scrape(t, m)
		for series, want := range map[string]float64{`payhook_alerts_open{kind="event_failed"}`: 1,
			`payhook_alerts_open{kind="sink_paused"}`: 0, `payhook_alerts_open{kind="own_kind"}`: 1} {
			if v, ok := got[series]; !ok || v != want {
				t.Errorf("%s = %v, %v; want %v", series, v, ok, want)
			}
		}
	})
}

// TestSourcesStartAtZero: each event counter has a series at 0 for every
// configured source before its first event.
func TestSourcesStartAtZero(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		m, err := New(Config{DB: open(t, dbURL), Sources: []string{"shop", "eu"}})
		if err != nil {
			t.Fatal(err)
		}
		got := scrape(t, m)
		for _, name := range []string{"payhook_events_received_total", "payhook_events_backfilled_total",
			"payhook_events_duplicates_total", "payhook_events_processed_total", "payhook_events_failed_total",
			"payhook_provider_rate_limited_total"} {
			for _, source := range []string{"shop", "eu"} {
				series := name + `{source="` + source + `"}`
				if v, ok := got[series]; !ok || v != 0 {
					t.Errorf("%s = %v, %v; want 0", series, v, ok)
				}
			}
		}
	})
}

// TestRateLimited: processing's OnRateLimited hook counts a source's
// 429s.
func TestRateLimited(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		m, err := New(Config{DB: open(t, dbURL), Sources: []string{"shop", "eu"}})
		if err != nil {
			t.Fatal(err)
		}
		m.RateLimited("shop")
		m.RateLimited("shop")
		got := scrape(t, m)
		if a, b := got[`payhook_provider_rate_limited_total{source="shop"}`], got[`payhook_provider_rate_limited_total{source="eu"}`]; a != 2 || b != 0 {
			t.Errorf("rate limited: shop %v, eu %v; want 2, 0", a, b)
		}
	})
}

// TestSQLiteWALBytes: on SQLite payhook_sqlite_wal_bytes is the size of
// the WAL file, so a read held open that lets it grow without bound is
// seen; on PostgreSQL there is no such series.
func TestSQLiteWALBytes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := open(t, dbURL)
		m, err := New(Config{DB: db})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := scrape(t, m)["payhook_sqlite_wal_bytes"]
		size, isSQLite := db.WALBytes()
		switch {
		case !isSQLite && ok:
			t.Fatalf("payhook_sqlite_wal_bytes = %v on PostgreSQL", v)
		case isSQLite && (!ok || v <= 0 || int64(v) != size):
			t.Fatalf("payhook_sqlite_wal_bytes = %v, %v; want the WAL's %d bytes (after the migrations)", v, ok, size)
		}
	})
}
