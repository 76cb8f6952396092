package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEventsMissingDatabase: the events commands read an existing
// database; a mistyped SQLite path is an error and is not created. (It
// belongs with the events commands; it lives here because this change may
// only touch config_test.go among the tests of package main.)
func TestEventsMissingDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"events", "list", "--db", "sqlite://" + missing},
		{"events", "show", "evt_1", "--db", "sqlite://" + missing},
		{"events", "replay", "1", "--db", "sqlite://" + missing},
	} {
		code, out, errOut := run(t, nil, args...)
		if code != 1 || !strings.Contains(errOut, "does not exist") || !strings.Contains(errOut, "payhook migrate") || out != "" {
			t.Errorf("%v = %d, stdout %q, stderr %q; want 1 and an error saying the database does not exist", args, code, out, errOut)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the events commands created %v", entries)
	}
	// A database that exists but was never migrated is refused too, and
	// left without a schema.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, nil, "events", "list", "--db", "sqlite://"+empty)
	if code != 1 || !strings.Contains(errOut, "has no payhook schema; run payhook migrate") {
		t.Errorf("events list on an unmigrated database = %d, %q; want 1 and no payhook schema", code, errOut)
	}
	code, _, errOut = run(t, map[string]string{"PAYHOOK_DB": "sqlite://" + empty}, "events", "list")
	if code != 1 || !strings.Contains(errOut, "has no payhook schema") {
		t.Errorf("events list with PAYHOOK_DB on an unmigrated database = %d, %q", code, errOut)
	}
}
