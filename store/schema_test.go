package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
)

func TestCheckSchema(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.CheckSchema(ctx)
		if !errors.Is(err, payhook.ErrNotFound) || !strings.Contains(err.Error(), "has no payhook schema; run payhook migrate") {
			t.Fatalf("CheckSchema(fresh) = %v; want ErrNotFound saying to run payhook migrate", err)
		}
		if _, err := OpenExisting(ctx, dbURL); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("OpenExisting(fresh) = %v; want ErrNotFound", err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.CheckSchema(ctx); err != nil {
			t.Fatalf("CheckSchema(migrated) = %v; want nil", err)
		}
		existing, err := OpenExisting(ctx, dbURL)
		if err != nil {
			t.Fatalf("OpenExisting(migrated) = %v; want nil", err)
		}
		existing.Close()

		// A schema behind the embedded migrations.
		ms, _ := Migrations(db.Engine)
		last := ms[len(ms)-1]
		if _, err := db.SQL.ExecContext(ctx, `DELETE FROM payhook_schema_migrations WHERE version = $1`, last.Version); err != nil {
			t.Fatal(err)
		}
		err = db.CheckSchema(ctx)
		if !errors.Is(err, payhook.ErrNotFound) || !strings.Contains(err.Error(), "missing "+last.Name) {
			t.Fatalf("CheckSchema(behind) = %v; want ErrNotFound naming %s", err, last.Name)
		}
	})
}

func TestOpenExistingMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	_, err := OpenExisting(context.Background(), "sqlite://"+path)
	if !errors.Is(err, payhook.ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("OpenExisting(missing file) = %v; want ErrNotFound saying it does not exist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenExisting created %s (stat: %v)", path, err)
	}
}

func TestRedactQueryPassword(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://127.0.0.1/db?password=hunter2":                       "postgres://127.0.0.1/db?password=xxxxx",
		"postgres://u@127.0.0.1/db?sslmode=disable&password=hunter2&x=1": "postgres://u@127.0.0.1/db?sslmode=disable&password=xxxxx&x=1",
		"postgres://u:p@127.0.0.1/db?pass%77ord=hunter2":                 "postgres://u:xxxxx@127.0.0.1/db?password=xxxxx",
		"postgres://127.0.0.1/db?sslmode=disable":                        "postgres://127.0.0.1/db?sslmode=disable",
		"postgres://u:hunter2@127.0.0.1:bad/db":                          "postgres://(unparsable url, hidden)",
		"sqlite://payhook.db":                                            "sqlite://payhook.db",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q; want %q", in, got, want)
		}
	}
}
