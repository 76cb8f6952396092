package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestForeignTables: payhook's tables are not foreign, an application's
// table is, and on PostgreSQL neither are the views and tables of an
// extension (pg_stat_statements, which a hosting service or a DBA may
// install in every new database): they belong to the extension, not to
// an application, and a database holding only them and payhook's is one
// of payhook's own. Before, demo --db and bench --db refused such a
// database as "another application's".
func TestForeignTables(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		ctx := context.Background()
		app := "customers"
		if db.Engine == store.Postgres {
			app = "public.customers"
			var available bool
			if err := db.SQL.QueryRowContext(ctx,
				`SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_stat_statements')`).Scan(&available); err != nil {
				t.Fatal(err)
			}
			if !available {
				t.Fatal("pg_stat_statements is not available (PostgreSQL's contrib modules)")
			}
			if _, err := db.SQL.ExecContext(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
				t.Fatal(err)
			}
		}
		if foreign, err := db.ForeignTables(ctx); err != nil || len(foreign) != 0 {
			t.Fatalf("ForeignTables of payhook's tables (and an extension's) = %v, %v; want none", foreign, err)
		}
		if _, err := db.SQL.ExecContext(ctx, `CREATE TABLE customers (id INTEGER PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		if foreign, err := db.ForeignTables(ctx); err != nil || !slices.Equal(foreign, []string{app}) {
			t.Fatalf("ForeignTables with an application's table = %v, %v; want [%s]", foreign, err, app)
		}
	})
}
