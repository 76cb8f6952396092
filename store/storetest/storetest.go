// Package storetest opens migrated databases for other packages' tests
// (internal/dbtest, which store's own tests import, cannot import store),
// as net/http/httptest serves net/http's.
package storetest

import (
	"context"
	"testing"

	"github.com/payhook/payhook/store"
)

// Migrated opens the database at dbURL with payhook's schema migrated,
// closed when the test ends. Tests that run a job queue migrate River's
// tables on it too (jobs.Migrate).
func Migrated(t testing.TB, dbURL string) *store.DB {
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
	return db
}
