package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestStmtCache: a SQLite connection prepares a statement once and lends
// it again; while its rows are still open, the same query gets a
// statement of its own and both read their rows; past stmtCacheSize the
// least recently used statements go. The cache is SQLite's only:
// PostgreSQL's driver keeps its own.
func TestStmtCache(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cached := func() (n int) {
		conn.Raw(func(dc any) error { n = len(dc.(*cachingConn).byQuery); return nil })
		return n
	}
	const q = `SELECT value FROM json_each('[1,2]') ORDER BY value`
	before := cached()
	for range 3 {
		var v int
		if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil || v != 1 {
			t.Fatalf("%s = %d, %v; want 1", q, v, err)
		}
	}
	if got := cached(); got != before+1 {
		t.Errorf("%d statements cached after one query run three times; want %d", got, before+1)
	}
	outer, err := conn.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var sum int
	for outer.Next() {
		var a int
		if err := outer.Scan(&a); err != nil {
			t.Fatal(err)
		}
		inner, err := conn.QueryContext(ctx, q) // the cached statement is in use
		if err != nil {
			t.Fatal(err)
		}
		for inner.Next() {
			var b int
			if err := inner.Scan(&b); err != nil {
				t.Fatal(err)
			}
			sum += a * b
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if sum != 9 { // (1+2)*(1+2)
		t.Errorf("nested rows of the same query sum to %d; want 9", sum)
	}
	// A statement whose use failed leaves the cache; the next use prepares
	// it again, and one that succeeds stays.
	const ins = `INSERT INTO t (k) VALUES ($1)`
	if _, err := conn.ExecContext(ctx, `CREATE TEMP TABLE t (k INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	has := func(q string) (ok bool) {
		conn.Raw(func(dc any) error { _, ok = dc.(*cachingConn).byQuery[q]; return nil })
		return ok
	}
	if _, err := conn.ExecContext(ctx, ins, 1); err != nil || !has(ins) {
		t.Fatalf("first insert: %v, cached %v; want no error, cached", err, has(ins))
	}
	if _, err := conn.ExecContext(ctx, ins, 1); err == nil || has(ins) {
		t.Fatalf("second insert of key 1: %v, cached %v; want a constraint error, not cached", err, has(ins))
	}
	if _, err := conn.ExecContext(ctx, ins, 2); err != nil || !has(ins) {
		t.Fatalf("insert of key 2: %v, cached %v; want no error, cached again", err, has(ins))
	}
	for i := range stmtCacheSize + 10 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("SELECT %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := cached(); got != stmtCacheSize {
		t.Errorf("%d statements cached; want at most %d", got, stmtCacheSize)
	}
}
