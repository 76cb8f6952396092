package jobs_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// TestMigrateFromSeveralInstancesAtOnce starts the migrations of several
// instances on one fresh database at the same moment, as N payhook serve
// starting together behind a load balancer do: every one must succeed.
// River's migrator alone checks which versions exist and then applies the
// rest without a lock, so without jobs.Migrate's own serialisation all
// but one fail with "relation already exists".
func TestMigrateFromSeveralInstancesAtOnce(t *testing.T) {
	t.Parallel()
	const instances, rounds = 4, 3
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		for round := range rounds {
			url := dbtest.URL(t, engine)
			ctx := context.Background()
			dbs := make([]*store.DB, instances)
			for i := range dbs {
				db, err := store.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				dbs[i] = db
			}
			errs := make([]error, instances)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, db := range dbs {
				wg.Go(func() {
					<-start
					if _, err := db.Migrate(ctx); err != nil {
						errs[i] = err
						return
					}
					errs[i] = jobs.Migrate(ctx, db)
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("round %d, instance %d: %v", round, i, err)
				}
			}
			if err := dbs[0].CheckSchema(ctx); err != nil {
				t.Errorf("round %d: schema after concurrent migrations: %v", round, err)
			}
		}
	})
}

// TestMigrateLockOutlivesIdleTimeout: jobs.Migrate's lock, held in a
// transaction left idle while River's migrator works on other
// connections, is exempt from store.IdleInTransaction: with the pool's
// idle timeout at 200 ms and the migration held up (an index to rebuild
// behind a writer's lock on river_job), the lock is still held after its
// session has been idle three times as long. Without the exemption the
// server ended the session and released the lock halfway, and another
// instance could migrate at once.
func TestMigrateLockOutlivesIdleTimeout(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		if !strings.HasPrefix(dbURL, "postgres") {
			return // SQLite migrates under its one writer, with no lock of this kind
		}
		ctx := context.Background()
		setup, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer setup.Close()
		if _, err := setup.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := jobs.Migrate(ctx, setup); err != nil {
			t.Fatal(err)
		}
		if _, err := setup.SQL.ExecContext(ctx, `DROP INDEX payhook_river_job_first_tries`); err != nil {
			t.Fatal(err)
		}
		btx, err := setup.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer btx.Rollback()
		if _, err := btx.ExecContext(ctx, `LOCK TABLE river_job IN ROW EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		sep := "?"
		if strings.Contains(dbURL, "?") {
			sep = "&"
		}
		inst, err := store.Open(ctx, dbURL+sep+"idle_in_transaction_session_timeout=200")
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		done := make(chan error, 1)
		go func() { done <- jobs.Migrate(ctx, inst) }()
		// Until the lock's session has been idle 600 ms by the server's
		// clock, or the lock, once taken, is gone.
		seen := false
		for {
			var held, idleLong int
			if err := setup.SQL.QueryRowContext(ctx, `SELECT count(*),
				count(*) FILTER (WHERE a.state = 'idle in transaction' AND now() - a.state_change > interval '600 milliseconds')
				FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()`).Scan(&held, &idleLong); err != nil {
				t.Fatal(err)
			}
			if idleLong > 0 {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("the migration returned while held up: %v", err)
			default:
			}
			if seen && held == 0 {
				t.Fatal("the migration lock was released while the migration still ran")
			}
			seen = seen || held > 0
		}
		if err := btx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestMigrateAgainWaitsForNoWriter: jobs.Migrate on a database migrated
// already (every start of serve but the first, every payhook migrate run
// again) waits for no transaction writing river_job. CREATE INDEX IF NOT
// EXISTS takes the table's SHARE lock before it finds the index there: a
// start waited for the instances' writing transactions (an idle one up
// to store.IdleInTransaction), and every ack of every instance, each
// writing its event's job, queued behind it.
func TestMigrateAgainWaitsForNoWriter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		if !strings.HasPrefix(dbURL, "postgres") {
			return // SQLite has one writer, whose lock any migration waits for
		}
		ctx := context.Background()
		setup, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer setup.Close()
		if _, err := setup.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := jobs.Migrate(ctx, setup); err != nil {
			t.Fatal(err)
		}
		writer, err := setup.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Rollback()
		if _, err := writer.ExecContext(ctx, `LOCK TABLE river_job IN ROW EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		// The instance's sessions wait for no lock: with the fix it asks
		// for none, so however slow the machine it gets through; one that
		// waited for the writer fails at once, rather than pass once the
		// server ends the idle writer (store.IdleInTransaction, 30 s).
		sep := "?"
		if strings.Contains(dbURL, "?") {
			sep = "&"
		}
		inst, err := store.Open(ctx, dbURL+sep+"lock_timeout=1")
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		if err := jobs.Migrate(ctx, inst); err != nil {
			t.Fatalf("jobs.Migrate of a migrated database, a transaction writing river_job open: %v", err)
		}
	})
}

// TestMigrateMakesIndexesBesideAnotherSchemas: jobs.Migrate makes its
// indexes on river_job when a schema further on the search_path holds an
// index of the same name (another payhook's tables, or those left where
// payhook ran before). CREATE INDEX IF NOT EXISTS looks in river_job's
// own schema; the check before it must too, or this schema's river_job
// is left without them.
func TestMigrateMakesIndexesBesideAnotherSchemas(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		if !strings.HasPrefix(dbURL, "postgres") {
			return // SQLite has no schemas
		}
		ctx := context.Background()
		setup, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer setup.Close()
		for _, stmt := range []string{
			`CREATE SCHEMA elsewhere`,
			`CREATE TABLE elsewhere.river_job (id bigint)`,
			`CREATE INDEX payhook_river_job_first_tries ON elsewhere.river_job (id)`,
		} {
			if _, err := setup.SQL.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		sep := "?"
		if strings.Contains(dbURL, "?") {
			sep = "&"
		}
		inst, err := store.Open(ctx, dbURL+sep+"search_path=public,elsewhere")
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		if _, err := inst.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := jobs.Migrate(ctx, inst); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := setup.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pg_indexes
			WHERE schemaname = 'public' AND tablename = 'river_job' AND indexname LIKE 'payhook_river_job_%'`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%d of payhook's indexes on public.river_job (%v); want 2", n, err)
		}
	})
}
