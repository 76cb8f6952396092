package process_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// open opens the database at dbURL with payhook's and the job queue's
// tables, closed when the test ends.
func open(t testing.TB, dbURL string) *store.DB {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

// config returns the processing of sources on db at the fixed time now,
// its logs discarded.
func config(t testing.TB, db *store.DB, sources []payhook.Source, now time.Time) jobs.Config {
	t.Helper()
	cfg, err := process.New(process.Config{DB: db, Sources: sources, Now: func() time.Time { return now },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestNewWithoutDatabase(t *testing.T) {
	t.Parallel()
	if _, err := process.New(process.Config{}); !errors.Is(err, payhook.ErrConfig) {
		t.Fatalf("New without DB: %v; want an error wrapping payhook.ErrConfig", err)
	}
}
