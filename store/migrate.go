package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations
var migrationFS embed.FS

// migrationLock is the PostgreSQL advisory lock key that serialises
// concurrent migrations from several payhook instances.
const migrationLock = 0x70617968 // "payh"

// Migration is one embedded schema version.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations of the engine, in order.
func Migrations(engine Engine) ([]Migration, error) {
	dir := path.Join("migrations", string(engine))
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations of %s: %w", engine, err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", name)
		}
		body, err := fs.ReadFile(migrationFS, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// MigrationLockWait bounds, on PostgreSQL, how long one try of a
// migration waits for a lock on a table another transaction holds. A
// migration's DDL waits for every transaction using its table (a DROP
// INDEX even for those only reading it: a pg_dump, a long query), and
// while it waits every later statement on that table, an older
// instance's acks and processing included, queues behind it: a wait
// without bound refused every delivery for as long as the longest of
// those transactions ran. Past the bound the try is rolled back and
// made again MigrationRetryPause later, so the others' statements wait
// at most this long at a time.
var MigrationLockWait = time.Second

// MigrationRetryPause is the pause between two tries of a migration that
// gave up waiting for a lock (MigrationLockWait).
var MigrationRetryPause = time.Second

// Migrate applies the embedded migrations not applied yet, each in its own
// transaction, and returns the names of those it applied. Concurrent calls
// from several instances are safe: on PostgreSQL they take an advisory lock,
// on SQLite the write lock serialises them. On PostgreSQL a migration that
// waits for a table's lock is tried again until it gets it or ctx ends
// (MigrationLockWait).
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	return db.MigrateWaiting(ctx, nil)
}

// MigrateWaiting is Migrate, calling waiting (if not nil) the first time
// each migration gives up waiting for a lock another transaction holds,
// with the error, before it tries again: an operator can then end that
// transaction, or know why the migration takes long.
func (db *DB) MigrateWaiting(ctx context.Context, waiting func(migration string, err error)) ([]string, error) {
	ms, err := Migrations(db.Engine)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range ms {
		for try := 1; ; try++ {
			done, err := db.applyMigration(ctx, m)
			if err != nil && db.Engine == Postgres && IsLockTimeout(err) && ctx.Err() == nil {
				if try == 1 && waiting != nil {
					waiting(m.Name, err)
				}
				select {
				case <-ctx.Done():
					return applied, fmt.Errorf("migrate %s to %s: waited for a lock another transaction holds: %w", db.URL, m.Name, ctx.Err())
				case <-time.After(MigrationRetryPause):
				}
				continue
			}
			if err != nil {
				return applied, fmt.Errorf("migrate %s to %s: %w", db.URL, m.Name, err)
			}
			if done {
				applied = append(applied, m.Name)
			}
			break
		}
	}
	return applied, nil
}

func (db *DB) applyMigration(ctx context.Context, m Migration) (applied bool, err error) {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if db.Engine == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return false, err
		}
		// Set once the advisory lock is held: another instance's migration
		// is waited for as long as it takes.
		if err := db.LockTimeoutTx(ctx, tx, MigrationLockWait); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS payhook_schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return false, err
	}
	var one int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM payhook_schema_migrations WHERE version = $1`, m.Version).Scan(&one); err {
	case nil:
		return false, tx.Rollback()
	case sql.ErrNoRows:
	default:
		return false, err
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO payhook_schema_migrations (version, name, applied_at) VALUES ($1, $2, CURRENT_TIMESTAMP)`,
		m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// NewerMigrations returns the names of the migrations the database has
// applied that this build does not embed, in order: those of a newer
// payhook, which an older binary leaves alone and runs on (a rolling
// upgrade's older instances, a rollback of the binary; docs/deploy.md,
// Upgrades). Nil for a database without a payhook schema.
func (db *DB) NewerMigrations(ctx context.Context) ([]string, error) {
	ok, err := db.HasSchema(ctx)
	if err != nil || !ok {
		return nil, err
	}
	ms, err := Migrations(db.Engine)
	if err != nil {
		return nil, err
	}
	known := make(map[int]bool, len(ms))
	for _, m := range ms {
		known[m.Version] = true
	}
	applied, err := db.appliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	var versions []int
	for v := range applied {
		if !known[v] {
			versions = append(versions, v)
		}
	}
	sort.Ints(versions)
	var newer []string
	for _, v := range versions {
		newer = append(newer, applied[v])
	}
	return newer, nil
}

// appliedMigrations returns the migrations recorded in the database's
// payhook_schema_migrations, name by version.
func (db *DB) appliedMigrations(ctx context.Context) (map[int]string, error) {
	rows, err := db.SQL.QueryContext(ctx, `SELECT version, name FROM payhook_schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read the migrations of %s: %w", db.URL, err)
	}
	defer rows.Close()
	applied := map[int]string{}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return nil, fmt.Errorf("read the migrations of %s: %w", db.URL, err)
		}
		applied[v] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the migrations of %s: %w", db.URL, err)
	}
	return applied, nil
}
