// Package dbtest gives tests a fresh, migrated-on-demand database URL on
// every engine payhook supports, so each storage test runs on SQLite and on
// PostgreSQL.
//
// PostgreSQL comes from PAYHOOK_TEST_POSTGRES, a URL to a server where the
// user may create databases; scripts/test.sh starts a throwaway cluster and
// sets it. Without it PostgreSQL tests fail rather than skip: a storage test
// that silently ran on one engine would prove half of what it claims.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// EnvPostgres names the variable holding the admin URL of the test server.
const EnvPostgres = "PAYHOOK_TEST_POSTGRES"

// Engines lists the engines every storage test runs on.
var Engines = []string{"sqlite", "postgres"}

// Each runs f as a subtest per engine with a fresh, empty database URL.
// The engines' subtests run in parallel with each other.
func Each(t *testing.T, f func(t *testing.T, dbURL string)) {
	t.Helper()
	EachEngine(t, func(t *testing.T, engine string) { f(t, URL(t, engine)) })
}

// EachEngine runs f as a subtest per engine, for tests that need several
// databases (see URL). The engines' subtests run in parallel.
func EachEngine(t *testing.T, f func(t *testing.T, engine string)) {
	t.Helper()
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			f(t, engine)
		})
	}
}

// URL returns the URL of a fresh, empty database of the engine, dropped
// when the test ends.
func URL(t testing.TB, engine string) string {
	t.Helper()
	switch engine {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "payhook.db")
	case "postgres":
		return postgresURL(t)
	}
	t.Fatalf("dbtest: unknown engine %q", engine)
	return ""
}

func postgresURL(t testing.TB) string {
	admin := os.Getenv(EnvPostgres)
	if admin == "" {
		t.Fatalf("dbtest: %s is not set; run the tests with scripts/test.sh, which starts a throwaway PostgreSQL", EnvPostgres)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("dbtest: parse %s: %v", EnvPostgres, err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "payhook_test_" + hex.EncodeToString(b)
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", EnvPostgres, err)
	}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		db.Close()
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		defer db.Close()
		if _, err := db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
