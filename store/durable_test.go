package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestCheckDurable: payhook's own settings are durable; each setting that
// lets a commit return before it is on disk is named in an error wrapping
// ErrNotDurable: SQLite synchronous below FULL, PostgreSQL
// synchronous_commit=off on payhook's connections, and fsync=off, which
// the test cluster runs with (scripts/pg.sh) unless PAYHOOK_PG_DURABLE=1.
func TestCheckDurable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		db.SQL.SetMaxOpenConns(1) // the SET below holds for the one connection
		var want []string
		if db.Engine == store.Postgres {
			var fsync string
			if err := db.SQL.QueryRowContext(ctx, `SHOW fsync`).Scan(&fsync); err != nil {
				t.Fatal(err)
			}
			if fsync == "off" {
				want = append(want, "fsync=off")
			}
		}
		check := func(want []string) {
			t.Helper()
			err := db.CheckDurable(ctx)
			if len(want) == 0 {
				if err != nil {
					t.Fatalf("CheckDurable = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, store.ErrNotDurable) {
				t.Fatalf("CheckDurable = %v; want ErrNotDurable naming %q", err, want)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CheckDurable = %v; want it to name %q", err, w)
				}
			}
		}
		check(want)
		lower := `PRAGMA synchronous = NORMAL`
		if db.Engine == store.Postgres {
			lower = `SET synchronous_commit = off`
		}
		if _, err := db.SQL.ExecContext(ctx, lower); err != nil {
			t.Fatal(err)
		}
		if db.Engine == store.Postgres {
			check(append(want, "synchronous_commit=off"))
		} else {
			check([]string{"synchronous=1, below FULL"})
		}
	})
}
