package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
)

// A migration that waits for a table's lock does not hold every other
// statement on that table behind it. 0012's DROP INDEX waits on
// PostgreSQL for every transaction using payhook_events, one that only
// reads it too (a pg_dump taking the backup deploy.md asks for, a long
// query), and the statements that came after it queue behind its wait:
// an older instance's acks were refused for as long as the reader ran.
// The migration gives up waiting after MigrationLockWait and tries
// again, so an event is stored meanwhile; it is applied once the reader
// is gone.
func TestMigrationWaitingForALockLetsAcksThrough(t *testing.T) {
	wait, pause := MigrationLockWait, MigrationRetryPause
	MigrationLockWait, MigrationRetryPause = 100*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { MigrationLockWait, MigrationRetryPause = wait, pause })
	const drop = "0012_drop_replaced_event_indexes"
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// The schema of a release before 0012, as an older instance runs it.
		ms, err := Migrations(db.Engine)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ms, func(m Migration) bool { return m.Name == drop })
		if i < 0 {
			t.Fatalf("no migration %s", drop)
		}
		for _, m := range ms[:i] {
			if _, err := db.applyMigration(ctx, m); err != nil {
				t.Fatalf("apply %s: %v", m.Name, err)
			}
		}
		insert := func(ctx context.Context, id string) error {
			_, err := db.SQL.ExecContext(ctx, `INSERT INTO payhook_events
				(source, event_id, type, received_at, payload, status, enqueued_at)
				VALUES ('shop', $1, 'payment.succeeded', $2, $3, 'received', $2)`,
				id, db.TimeValue(time.Now()), []byte(`{}`))
			return err
		}
		if err := insert(ctx, "evt_before"); err != nil {
			t.Fatal(err)
		}

		// A transaction reading the table, open throughout the migration.
		reader, err := db.Reader().SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Rollback()
		var n int
		if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM payhook_events`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("read: %d events, %v", n, err)
		}

		waited := make(chan string, 1)
		type result struct {
			applied []string
			err     error
		}
		done := make(chan result, 1)
		go func() {
			applied, err := db.MigrateWaiting(ctx, func(name string, err error) { waited <- name })
			done <- result{applied, err}
		}()
		if db.Engine == Postgres {
			select {
			case name := <-waited:
				if name != drop {
					t.Errorf("waiting named %s; want %s", name, drop)
				}
			case r := <-done:
				t.Fatalf("Migrate = %v, %v while a transaction read payhook_events; want it to wait", r.applied, r.err)
			}
		}

		// An ack while the migration waits for the reader. Without a bound
		// of time (the machine may be slow): queued behind a migration
		// that waits for the reader, it would wait for ever.
		if err := insert(ctx, "evt_during"); err != nil {
			t.Fatalf("an event could not be stored while %s waited for a reader: %v", drop, err)
		}

		if err := reader.Rollback(); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil || len(r.applied) == 0 || r.applied[0] != drop {
			t.Fatalf("Migrate = %v, %v; want %s applied", r.applied, r.err, drop)
		}
		var events int
		if err := db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM payhook_events`).Scan(&events); err != nil || events != 2 {
			t.Fatalf("%d events stored (%v); want 2", events, err)
		}
		if err := db.CheckSchema(ctx); err != nil {
			t.Fatal(fmt.Errorf("after the migration: %w", err))
		}
	})
}

// NewerMigrations names the migrations applied by a newer payhook, and
// none on a database this build migrated or one without a schema.
func TestNewerMigrations(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if newer, err := db.NewerMigrations(ctx); err != nil || newer != nil {
			t.Fatalf("NewerMigrations(no schema) = %v, %v; want none", newer, err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if newer, err := db.NewerMigrations(ctx); err != nil || newer != nil {
			t.Fatalf("NewerMigrations(migrated) = %v, %v; want none", newer, err)
		}
		for _, v := range []int{10001, 10000} {
			if _, err := db.SQL.ExecContext(ctx, `INSERT INTO payhook_schema_migrations (version, name, applied_at)
				VALUES ($1, $2, CURRENT_TIMESTAMP)`, v, fmt.Sprintf("%d_newer", v)); err != nil {
				t.Fatal(err)
			}
		}
		if newer, err := db.NewerMigrations(ctx); err != nil || !slices.Equal(newer, []string{"10000_newer", "10001_newer"}) {
			t.Fatalf("NewerMigrations(newer) = %v, %v; want [10000_newer 10001_newer]", newer, err)
		}
		if err := db.CheckSchema(ctx); err != nil {
			t.Fatalf("CheckSchema(newer) = %v; want nil: this build's migrations are all there", err)
		}
	})
}
