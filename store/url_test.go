package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/payhook/payhook"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		engine  Engine
		target  string
		wantErr bool
	}{
		{"sqlite:///var/lib/payhook/payhook.db", SQLite, "/var/lib/payhook/payhook.db", false},
		{"sqlite://payhook.db", SQLite, "payhook.db", false},
		{"sqlite://data/p.db", SQLite, "data/p.db", false},
		{"./local.db", SQLite, "./local.db", false},
		{"postgres://u:p@127.0.0.1:5432/payhook", Postgres, "postgres://u:p@127.0.0.1:5432/payhook", false},
		{"postgresql://127.0.0.1/payhook", Postgres, "postgresql://127.0.0.1/payhook", false},
		{"sqlite://", "", "", true},
		{"mysql://127.0.0.1/x", "", "", true},
		{"sqlite:relative.db", "", "", true},
		{"postgresql:payhook", "", "", true},
		{"postgres:/x", "", "", true},
		{"data/a:b.db", SQLite, "data/a:b.db", false},
	} {
		engine, target, err := parseURL(tc.in)
		if engine != tc.engine || target != tc.target || (err != nil) != tc.wantErr {
			t.Errorf("parseURL(%q) = %q, %q, %v; want %q, %q, error %v", tc.in, engine, target, err, tc.engine, tc.target, tc.wantErr)
		}
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("postgres://payhook:hunter2@127.0.0.1/db"); got != "postgres://payhook:xxxxx@127.0.0.1/db" {
		t.Errorf("redact = %q", got)
	}
}

// TestOpenBadURL: a URL Open cannot use is an error wrapping
// payhook.ErrConfig that shows the URL without its password.
func TestOpenBadURL(t *testing.T) {
	for _, raw := range []string{
		"mysql://app:s3cret@db.internal/shop",
		"mysql://app:s3cret@db.internal/%zz",
		"postgresql:app:s3cret@db.internal",
		"sqlite://",
	} {
		_, err := Open(context.Background(), raw)
		if !errors.Is(err, payhook.ErrConfig) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v; want an error wrapping ErrConfig, without the password", raw, err)
		}
	}
}
