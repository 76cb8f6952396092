package process_test

import (
	"context"
	"errors"
	"github.com/payhook/payhook/store/storetest"
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
	db := storetest.Migrated(t, dbURL)
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

// running returns the job queue of pc (its logs discarded) with River's
// workers running, polling every 10 ms and sweeping hourly, stopped when
// the test ends.
func running(t *testing.T, pc process.Config) *jobs.Queue {
	t.Helper()
	pc.Logger = slog.New(slog.DiscardHandler)
	cfg, err := process.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SweepInterval, cfg.PollInterval = time.Hour, 10*time.Millisecond
	q, err := jobs.New(pc.DB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop(context.Background()) })
	return q
}

func TestNewWithoutDatabase(t *testing.T) {
	t.Parallel()
	if _, err := process.New(process.Config{}); !errors.Is(err, payhook.ErrConfig) {
		t.Fatalf("New without DB: %v; want an error wrapping payhook.ErrConfig", err)
	}
}

// TestNewRefusesBadSources: a source that no event of could be applied
// (no name, a name taken twice, a provider with no mapping, such as a
// misspelt one, an environment its events do not say) is refused by New, not found out by every event failing
// its attempts for weeks.
func TestNewRefusesBadSources(t *testing.T) {
	t.Parallel()
	db := &store.DB{Engine: store.SQLite} // not used: New refuses first
	for name, sources := range map[string][]payhook.Source{
		"no name":          {{Provider: "stripe"}},
		"twice":            {{Name: "shop", Provider: "stripe"}, {Name: "shop", Provider: "paddle"}},
		"unknown provider": {{Name: "shop", Provider: "Stripe"}},
		"no provider":      {{Name: "shop"}},
		"environment":      {{Name: "hooks", Provider: "hmac", Environment: "live"}},
	} {
		if _, err := process.New(process.Config{DB: db, Sources: sources}); !errors.Is(err, payhook.ErrConfig) {
			t.Errorf("%s: New = %v; want an error wrapping payhook.ErrConfig", name, err)
		}
	}
	if _, err := process.New(process.Config{DB: db, Sources: []payhook.Source{{Name: "shop", Provider: "stripe", Environment: "live"},
		{Name: "hooks", Provider: "hmac"}}}); err != nil {
		t.Fatalf("New with good sources = %v", err)
	}
}
