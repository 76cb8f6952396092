package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// TestMigrateSaysWhatTheDatabaseHas: payhook migrate says what it
// applied, that nothing was left to apply, and names the migrations of a
// newer payhook the database has (this binary runs on them, as an
// older instance of a rolling upgrade or a rolled back binary does), and
// serve logs them at start. An older binary used to say "0 payhook
// migrations applied []" on a newer schema and serve nothing at all, so
// that a rollback looked like any other start.
func TestMigrateSaysWhatTheDatabaseHas(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_UNSAFE_DURABILITY": "1"}
		if code, out, errOut := run(t, env, "migrate"); code != 0 || !strings.Contains(out, "payhook migrations applied [0001_events ") {
			t.Fatalf("migrate of an empty database = %d, %q, %s; want the migrations it applied", code, out, errOut)
		}
		if code, out, errOut := run(t, env, "migrate"); code != 0 || !strings.Contains(out, "no payhook migration to apply") ||
			strings.Contains(out, "newer") {
			t.Fatalf("migrate again = %d, %q, %s; want nothing to apply", code, out, errOut)
		}

		// A newer payhook migrated the database since.
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.SQL.ExecContext(ctx, `INSERT INTO payhook_schema_migrations (version, name, applied_at)
			VALUES (9999, '9999_of_a_newer_payhook', CURRENT_TIMESTAMP)`)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(t, env, "migrate")
		if code != 0 || !strings.Contains(out, "no payhook migration to apply") ||
			!strings.Contains(out, "migrations of a newer payhook") || !strings.Contains(out, "[9999_of_a_newer_payhook]") {
			t.Fatalf("migrate of a newer schema = %d, %q, %s; want it to name the newer migration", code, out, errOut)
		}

		cfg := filepath.Join(t.TempDir(), "payhook.yaml")
		os.WriteFile(cfg, []byte("sources:\n  - name: s\n    provider: billete\n    secrets: [\"whsec_c2VjcmV0LWZyb20tZW52\"]\n"), 0o600)
		env["PAYHOOK_CONFIG"] = cfg
		s := startServer(t, env)
		if log := s.stderr.String(); !strings.Contains(log, "migrations of a newer payhook") || !strings.Contains(log, "newer=9999_of_a_newer_payhook") {
			t.Errorf("serve on a newer schema logged:\n%s\nwant a warning naming 9999_of_a_newer_payhook", log)
		}
	})
}
