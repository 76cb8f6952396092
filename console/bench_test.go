package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/console"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// benchEvents is how many events BenchmarkEventList stores; the
// environment variable PAYHOOK_BENCH_EVENTS changes it (1,000,000 by
// default: the figure).
func benchEvents(b *testing.B) int {
	if s := os.Getenv("PAYHOOK_BENCH_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("PAYHOOK_BENCH_EVENTS=%q: want a positive number", s)
		}
		return n
	}
	return 1_000_000
}

// fillEvents stores n events in one statement: 4 sources, 10 types, 90%
// processed, 5% failed, 3% ignored, 2% received, 1% backfilled, evenly
// over the 10 days before now (one every 0.864 s for 1,000,000).
func fillEvents(b *testing.B, db *store.DB, n int, now time.Time) {
	b.Helper()
	start := now.Add(-10 * 24 * time.Hour).Unix()
	seq := `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < $1)`
	at := `strftime('%Y-%m-%dT%H:%M:%S', $2 + i * $3, 'unixepoch') || '.000000Z'`
	payload := `CAST('{"id":"evt_' || i || '","type":"type.' || (i % 10) || '"}' AS BLOB)`
	from := `seq`
	if db.Engine == store.Postgres {
		seq = ``
		at = `to_timestamp($2 + i * $3::float8)`
		payload = `convert_to('{"id":"evt_' || i || '","type":"type.' || (i % 10) || '"}', 'UTF8')`
		from = `generate_series(1, $1::bigint) AS seq(i)`
	}
	q := seq + ` INSERT INTO payhook_events (source, event_id, type, environment, occurred_at, received_at, payload,
		secret_id, status, attempts, last_error, enqueued_at, processed_at, received_via)
		SELECT 'src' || (i % 4), 'evt_' || i, 'type.' || (i % 10), 'live', ` + at + `, ` + at + `, ` + payload + `,
			CASE WHEN i % 100 = 99 THEN '' ELSE 'sha256:0123456789ab' END,
			CASE WHEN i % 100 < 90 THEN 'processed' WHEN i % 100 < 95 THEN 'failed' WHEN i % 100 < 98 THEN 'ignored' ELSE 'received' END,
			1, CASE WHEN i % 100 BETWEEN 90 AND 94 THEN 'handler failed' ELSE '' END, ` + at + `, NULL,
			CASE WHEN i % 100 = 99 THEN 'backfill' ELSE 'webhook' END
		FROM ` + from
	step := (10 * 24 * time.Hour).Seconds() / float64(n)
	if _, err := db.SQL.Exec(q, n, start, step); err != nil {
		b.Fatalf("fill %d events: %v", n, err)
	}
}

// BenchmarkEventList measures the console's event list page (the HTTP
// answer, rendered) over a table of benchEvents events, under the usual
// filters, on both engines. Figures: docs/benchmarks.md.
func BenchmarkEventList(b *testing.B) {
	n := benchEvents(b)
	for _, engine := range dbtest.Engines {
		b.Run(engine, func(b *testing.B) {
			ctx := context.Background()
			db, err := store.Open(ctx, dbtest.URL(b, engine))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			began := time.Now()
			fillEvents(b, db, n, now)
			if engine == "postgres" {
				// What autovacuum does soon after a bulk load.
				if _, err := db.SQL.Exec(`ANALYZE payhook_events`); err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("%s: %d events stored in %s", engine, n, time.Since(began).Round(time.Millisecond))
			c, err := console.New(console.Config{DB: db, Queue: nopQueue{}, Token: token, Logger: slog.New(slog.DiscardHandler),
				Sources: []console.Source{{Name: "src0"}, {Name: "src1"}, {Name: "src2"}, {Name: "src3"}}})
			if err != nil {
				b.Fatal(err)
			}
			login := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/console/login", strings.NewReader(url.Values{"secret": {token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			c.ServeHTTP(login, req)
			cookies := login.Result().Cookies()
			if login.Code != http.StatusSeeOther || len(cookies) != 1 {
				b.Fatalf("login = %d", login.Code)
			}
			middle := n / 2
			for _, bc := range []struct{ name, query string }{
				{"newest", ""},
				{"source", "source=src1"},
				{"status=failed", "status=failed"},
				{"source+status=failed", "source=src2&status=failed"},
				{"source+status=failed,deep", fmt.Sprintf("source=src2&status=failed&before=%d", middle)},
				{"type", "type=type.3"},
				{"via=backfill", "via=backfill"},
				{"source+last_hour", "source=src1&since=1h"},
				{"event_id", fmt.Sprintf("event_id=evt_%d", middle)},
			} {
				b.Run(bc.name, func(b *testing.B) {
					for b.Loop() {
						w := httptest.NewRecorder()
						r := httptest.NewRequest("GET", "/console/events?"+bc.query, nil)
						r.AddCookie(cookies[0])
						c.ServeHTTP(w, r)
						if w.Code != 200 || !strings.Contains(w.Body.String(), `class="st-`) {
							b.Fatalf("GET /console/events?%s = %d without events", bc.query, w.Code)
						}
					}
				})
			}
		})
	}
}
