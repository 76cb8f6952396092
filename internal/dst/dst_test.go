package dst

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

var (
	seeds   = flag.Int("seeds", 0, "how many seeds TestDST runs, from -first (default 100, 5 under -race)")
	first   = flag.Int64("first", 1, "the first seed TestDST runs")
	oneSeed = flag.Int64("seed", 0, "run only this seed (replay)")
	pgSeeds = flag.Int("pg-seeds", 0, "how many seeds TestDSTPostgres runs on both engines (default 3, 2 under -race)")
)

// orDefault is n, or the default for the build: under the race detector
// a run costs ~8 times its CPU (~2 CPU-s a seed), and the suite runs
// with it; scripts/test.sh plays the many seeds in a pass without it.
//
// Seeds run in parallel under the race detector too: it once reported
// encoding/json's type cache, filled by whichever testing/synctest bubble
// first encodes a type, as a race between bubbles, but only while all of
// modernc.org was left uninstrumented; scripts/test.sh now leaves out
// only modernc.org/sqlite/lib (no report in 23 SQLite and 6 PostgreSQL
// seeds, 2026-12-01).
func orDefault(n, plain, race int) int {
	switch {
	case n > 0:
		return n
	case raceEnabled:
		return race
	}
	return plain
}

// regressions are seeds that once found a bug (put back on purpose, see
// bugs_test.go), run by TestDST whatever -seeds says.
var regressions = []int64{
	17,  // found ack-before-commit when first put back (a commit that failed answered 2xx); the harness has changed since, and the bug test now finds it first at seed 13
	241, // a chargeback_won whose chargeback only backfill brought outlived 12 attempts
	178, // a dropped chargeback the provider stamped after the backfill's end (payhook's now; its clock 56 s ahead)
}

// pgRegressions are seeds on which the engines once ended apart, run by
// TestDSTPostgres whatever -pg-seeds says.
var pgRegressions = []int64{
	42, // faults at statement numbers, which the engines count apart: a different invoice of a reused chain reference credited
	13, // a job stamped at the nanosecond, due 1 ms later on one engine: one step more on SQLite
}

// withRegressions is list (n seeds from -first) and the regression seeds
// it leaves out; list alone when -seed replays one.
func withRegressions(list, regressions []int64) []int64 {
	if *oneSeed != 0 {
		return list
	}
	n := int64(len(list))
	for _, r := range regressions {
		if r < *first || r >= *first+n {
			list = append(list, r)
		}
	}
	return list
}

// seedList is the seeds a test runs: -seed alone, or n from -first.
func seedList(n int) []int64 {
	if *oneSeed != 0 {
		return []int64{*oneSeed}
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = *first + int64(i)
	}
	return out
}

// TestDST runs the seeds on SQLite inside a testing/synctest bubble and
// checks every invariant after each run and at each crash.
func TestDST(t *testing.T) {
	for _, seed := range withRegressions(seedList(orDefault(*seeds, 100, 5)), regressions) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			out := runSQLite(t, seed, false)
			if testing.Verbose() {
				t.Logf("seed %d: %d events, %d crashes, %d jobs rescued, digest %s", seed, out.events, out.crashes, out.rescued, out.digest[:16])
			}
		})
	}
}

// TestDSTReplaysExactly runs seeds twice: every table ends byte for byte
// the same, row ids, attempts and timestamps included. River draws the
// nonce of each unique insert from crypto/rand, which the test seeds too
// (process-wide, so these runs are not parallel).
func TestDSTReplaysExactly(t *testing.T) {
	for _, seed := range seedList(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cryptotest.SetGlobalRandom(t, uint64(seed))
			a := runSQLite(t, seed, false)
			cryptotest.SetGlobalRandom(t, uint64(seed))
			b := runSQLite(t, seed, false)
			if a.digest != b.digest {
				t.Fatalf("seed %d: digests %s and %s differ (first difference: %s); replay: %s",
					seed, a.digest, b.digest, firstDiff(a.dump, b.dump), replay(seed, false))
			}
		})
	}
}

// TestDSTPostgres runs the same seeds on PostgreSQL (outside the bubble:
// its connections are real sockets) and SQLite, with the faults both
// engines play alike (faults.portable): the same final state by business
// ids.
func TestDSTPostgres(t *testing.T) {
	for _, seed := range withRegressions(seedList(orDefault(*pgSeeds, 3, 2)), pgRegressions) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			bothEngines(t, seed, 0)
		})
	}
}

// TestDSTPostgresSlowServer is TestDSTPostgres with a PostgreSQL that
// takes 10 ms more over each statement, as on a busy CI host: what the
// queue decides must not follow this machine's clock, which stands still
// in SQLite's bubble. Seeds 9 and 13 ran apart so, every time, while a
// batch's room followed the last batch's time (until 2026-12-03, when
// seed 9 failed TestDSTPostgres once in about ten CI runs).
func TestDSTPostgresSlowServer(t *testing.T) {
	seeds := []int64{9, 13}
	if *oneSeed != 0 {
		seeds = []int64{*oneSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			bothEngines(t, seed, 10*time.Millisecond)
		})
	}
}

// bothEngines runs seed on PostgreSQL, each statement late by late, and
// on SQLite, and fails unless both ran alike and ended in the same state.
func bothEngines(t *testing.T, seed int64, late time.Duration) {
	op := postgresOpener(t, seed%2 == 0)
	op.late = late
	pg := runSeed(t, seed, op)
	lite := runSQLite(t, seed, true)
	if testing.Verbose() {
		t.Logf("seed %d: %d events; postgres %d crashes, %d jobs rescued; sqlite %d crashes, %d jobs rescued",
			seed, pg.events, pg.crashes, pg.rescued, lite.crashes, lite.rescued)
	}
	// One interleaving: the same steps, fault points and crashes.
	if pg.steps != lite.steps || pg.points != lite.points || pg.crashes != lite.crashes || pg.rescued != lite.rescued {
		t.Errorf("seed %d: the engines ran apart: postgres %d steps, %d fault points, %d crashes, %d jobs rescued; sqlite %d, %d, %d, %d",
			seed, pg.steps, pg.points, pg.crashes, pg.rescued, lite.steps, lite.points, lite.crashes, lite.rescued)
	}
	if pg.business != lite.business {
		t.Fatalf("seed %d: the engines end in different states:\npostgres:\n%s\nsqlite:\n%s", seed, pg.business, lite.business)
	}
}

// runSQLite runs seed on a copy of the migrated template, in a bubble,
// with the portable faults or those of every statement.
func runSQLite(t *testing.T, seed int64, portable bool) outcome {
	var out outcome
	path := filepath.Join(t.TempDir(), "payhook.db")
	copyFile(t, sqliteTemplate(t), path)
	op := sqliteOpener(path)
	op.portable = portable
	synctest.Test(t, func(t *testing.T) {
		out = runSeed(t, seed, op)
	})
	return out
}

// trySQLite is runSQLite returning the broken invariant instead.
func trySQLite(t *testing.T, seed int64) error {
	var err error
	path := filepath.Join(t.TempDir(), "payhook.db")
	copyFile(t, sqliteTemplate(t), path)
	synctest.Test(t, func(t *testing.T) {
		_, err = tryRunSeed(t, seed, sqliteOpener(path))
	})
	return err
}

func sqliteOpener(path string) opener {
	return opener{engine: store.SQLite, open: func(f *faults) *sql.DB {
		return openFaulty(&sqliteDriver, sqliteDSN(path), f)
	}}
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// sqliteDSN is the store's DSN but for synchronous(OFF): the simulation
// crashes the process, not the machine, and every commit fsynced would
// cost more than the rest of a run.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=busy_timeout(10000)" +
		"&_pragma=foreign_keys(1)&_txlock=immediate"
}

var template struct {
	once sync.Once
	path string
	err  error
}

// sqliteTemplate is a migrated SQLite database, made once per test
// binary: each run starts from a copy.
func sqliteTemplate(t *testing.T) string {
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "payhook-dst-")
		if err != nil {
			template.err = err
			return
		}
		template.path = filepath.Join(dir, "template.db")
		template.err = migrate(template.path)
	})
	if template.err != nil {
		t.Fatal(template.err)
	}
	return template.path
}

func migrate(url string) error {
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	if err := jobs.Migrate(ctx, db); err != nil {
		return err
	}
	if db.Engine == store.SQLite {
		_, err = db.SQL.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	return err
}

func TestMain(m *testing.M) {
	code := m.Run()
	if template.path != "" {
		os.RemoveAll(filepath.Dir(template.path))
	}
	os.Exit(code)
}

func copyFile(t *testing.T, from, to string) {
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// postgresOpener is a fresh migrated PostgreSQL database with the faults
// in front of pgx's database/sql driver. With emptyStats, its tables are
// analyzed while empty, as autovacuum's ANALYZE leaves them when it runs
// while work is done as fast as it comes (a busy host, a long run):
// PostgreSQL then plans as for tables of a row, in nested loops that run
// a subquery again for each row. A run is short, and otherwise the tables
// are never analyzed: a statement whose result depends on its plan (an IN
// (SELECT ... LIMIT 1 FOR UPDATE SKIP LOCKED) that deleted every row old
// enough, seed 8 at 2837452) failed once in CI and never in a replay.
func postgresOpener(t *testing.T, emptyStats bool) opener {
	url := dbtest.URL(t, "postgres")
	if err := migrate(url); err != nil {
		t.Fatal(err)
	}
	if emptyStats {
		db, err := store.Open(context.Background(), url)
		if err == nil {
			// What ANALYZE leaves of a table that held a row: set
			// directly, as no table holds one yet (the test cluster's
			// role is a superuser).
			_, err = db.SQL.Exec(`UPDATE pg_class SET reltuples = 1, relpages = 1
				WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace`)
			db.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["timezone"] = "UTC"
	name := stdlib.RegisterConnConfig(cfg)
	t.Cleanup(func() { stdlib.UnregisterConnConfig(name) })
	return opener{engine: store.Postgres, portable: true, open: func(f *faults) *sql.DB {
		db := openFaulty(stdlib.GetDefaultDriver(), name, f)
		db.SetMaxOpenConns(8)
		return db
	}}
}

// firstDiff is the first line where two dumps differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	table := ""
	for i := range min(len(al), len(bl)) {
		if strings.HasPrefix(al[i], "table ") {
			table = al[i]
		}
		if al[i] != bl[i] {
			return fmt.Sprintf("%s, line %d:\n%s\n%s", table, i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines, then %d", len(al), len(bl))
}
