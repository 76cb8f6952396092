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

// Migrate applies the embedded migrations not applied yet, each in its own
// transaction, and returns the names of those it applied. Concurrent calls
// from several instances are safe: on PostgreSQL they take an advisory lock,
// on SQLite the write lock serialises them.
func (db *DB) Migrate(ctx context.Context) ([]string, error) {
	ms, err := Migrations(db.Engine)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range ms {
		done, err := db.applyMigration(ctx, m)
		if err != nil {
			return applied, fmt.Errorf("migrate %s to %s: %w", db.URL, m.Name, err)
		}
		if done {
			applied = append(applied, m.Name)
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
