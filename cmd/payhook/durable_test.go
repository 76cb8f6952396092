package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// testEnv is the environment of a payhook the tests run in-process: env,
// and PAYHOOK_UNSAFE_DURABILITY=1 unless env sets it, since the test
// PostgreSQL cluster (scripts/pg.sh) runs with fsync=off for speed.
func testEnv(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "PAYHOOK_UNSAFE_DURABILITY" {
			return "1"
		}
		return ""
	}
}

// TestServeRefusesNonDurable: serve refuses a database on which an
// acknowledged event could be lost (the test cluster's fsync=off on
// PostgreSQL) with an error that names the setting and the way out, and
// starts there with --unsafe-durability or PAYHOOK_UNSAFE_DURABILITY=1,
// logging it; on a durable database it starts, and logs the flag if given.
// store's TestCheckDurable covers each setting.
func TestServeRefusesNonDurable(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		durable := db.CheckDurable(context.Background()) == nil
		db.Close()
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_UNSAFE_DURABILITY": "",
			"PAYHOOK_DEMO_SECRET_FILE": filepath.Join(t.TempDir(), "demo.secret")}
		for _, tc := range []struct {
			name   string
			env    string
			args   []string
			starts bool
			log    string
		}{
			{"as it is", "", nil, durable, map[bool]string{true: "", false: "fsync=off"}[durable]},
			{"--unsafe-durability", "", []string{"--unsafe-durability"}, true, "started with --unsafe-durability"},
			{"PAYHOOK_UNSAFE_DURABILITY=1", "1", nil, true, "started with --unsafe-durability"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				env["PAYHOOK_UNSAFE_DURABILITY"] = tc.env
				var stdout, stderr syncBuffer
				m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(env)}
				p, err := startInProcess(context.Background(), m, tc.args...)
				if err == nil {
					p.stop()
				}
				errOut := stderr.String()
				if started := err == nil; started != tc.starts {
					t.Fatalf("started %v (%v); want %v\n%s", started, err, tc.starts, errOut)
				}
				if !tc.starts && !strings.Contains(errOut, "--unsafe-durability") {
					t.Errorf("refused without naming --unsafe-durability:\n%s", errOut)
				}
				if !tc.starts {
					// Refused before writing anything: no migration, no
					// demo secret.
					if _, err := os.Stat(env["PAYHOOK_DEMO_SECRET_FILE"]); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("refused, yet the demo secret's file was written (%v)", err)
					}
					db, err := store.Open(context.Background(), dbURL)
					if err != nil {
						t.Fatal(err)
					}
					migrated, err := db.HasSchema(context.Background())
					db.Close()
					if err != nil || migrated {
						t.Errorf("refused, yet the database was migrated (%v, %v)", migrated, err)
					}
				}
				if tc.log != "" && !strings.Contains(errOut, tc.log) {
					t.Errorf("log without %q:\n%s", tc.log, errOut)
				}
				if tc.log == "" && strings.Contains(errOut, "unsafe") {
					t.Errorf("a durable database started with a word of unsafe durability:\n%s", errOut)
				}
			})
		}
	})
}
