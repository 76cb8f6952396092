package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
)

// The statements that look for a few events among many use the index
// made for them, on both engines, as payhook runs them: SQLite without
// statistics, and a status written in the statement (a generic plan of
// PostgreSQL cannot use a partial index for a parameter).
func TestEventQueryPlans(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		// Many processed events, a few of each other status.
		at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		if _, err := db.SQL.ExecContext(ctx, `INSERT INTO payhook_events
			(source, event_id, type, received_at, payload, status, enqueued_at)
			SELECT 'shop', 'evt_' || n, 'payment.succeeded', $1, $2,
				CASE n % 500 WHEN 1 THEN 'received' WHEN 2 THEN 'failed' WHEN 3 THEN 'ignored' ELSE 'processed' END, $1
			FROM (`+series(db.Engine, 5000)+`) AS s`, db.TimeValue(at), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		// PostgreSQL's autovacuum analyzes a table that grows; payhook
		// never runs ANALYZE on SQLite, whose planner must choose without
		// statistics.
		if db.Engine == Postgres {
			if _, err := db.SQL.ExecContext(ctx, `ANALYZE`); err != nil {
				t.Fatal(err)
			}
		}
		list := func(f Filter) string {
			where, _ := db.eventWhere(f)
			return `SELECT id FROM payhook_events` + where + ` ORDER BY id DESC LIMIT 100`
		}
		for _, tc := range []struct {
			name, query string
			index       string // one of these (received events are in two partial indexes)
			args        []any
			inOrder     bool // reads the index in the order it wants, no sort
		}{
			{"the sweep", db.requeueStale(), "payhook_events_received_enqueued_at",
				[]any{db.TimeValue(at), db.TimeValue(at), 10}, true},
			{"failed events", list(Filter{Status: payhook.StatusFailed}), "payhook_events_unprocessed_status_id", nil, false},
			{"received events", list(Filter{Status: payhook.StatusReceived}), "payhook_events_unprocessed_status_id payhook_events_received_enqueued_at", nil, false},
			{"ignored events", list(Filter{Status: payhook.StatusIgnored}), "payhook_events_unprocessed_status_id", nil, false},
			{"the oldest waiting event", `SELECT MIN(id) FROM payhook_events WHERE status = 'received'`,
				"payhook_events_unprocessed_status_id payhook_events_received_enqueued_at", nil, false},
			{"a provider's event id", list(Filter{EventID: "evt_7"}), "payhook_events_event_id_source", []any{"evt_7"}, false},
			{"an event id of a source", `SELECT id FROM payhook_events WHERE source = $1 AND event_id = $2`,
				"payhook_events_event_id_source", []any{"shop", "evt_7"}, false},
		} {
			plan := explain(t, db, tc.query, tc.args)
			if !slices.ContainsFunc(strings.Fields(tc.index), func(index string) bool { return strings.Contains(plan, index) }) {
				t.Errorf("%s: the plan does not use %s:\n%s", tc.name, tc.index, plan)
			}
			// The sweep reads its oldest events in the index's order, not
			// every waiting event to sort them.
			if tc.inOrder && (strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "Sort")) {
				t.Errorf("%s sorts the events it looks at:\n%s", tc.name, plan)
			}
		}
		counts, err := db.CountByStatus(ctx)
		if want := map[payhook.Status]int{payhook.StatusReceived: 10, payhook.StatusFailed: 10,
			payhook.StatusIgnored: 10, payhook.StatusProcessed: 4970}; err != nil || fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("CountByStatus = %v, %v; want %v", counts, err, want)
		}
	})
}

// series returns a SELECT of the numbers 1 to n.
func series(engine Engine, n int) string {
	if engine == Postgres {
		return fmt.Sprintf(`SELECT generate_series(1, %d) AS n`, n)
	}
	return fmt.Sprintf(`WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < %d) SELECT n FROM c`, n)
}

// explain returns the plan of query with args (EXPLAIN plans an UPDATE
// without running it).
func explain(t *testing.T, db *DB, query string, args []any) string {
	t.Helper()
	ctx := context.Background()
	prefix := "EXPLAIN QUERY PLAN "
	if db.Engine == Postgres {
		prefix = "EXPLAIN "
	}
	rows, err := db.SQL.QueryContext(ctx, prefix+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, fmt.Sprint(vals[len(vals)-1]))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
