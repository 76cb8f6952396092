package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// demoSecretFile is where serve without a config keeps its demo source's
// secret when the database is not a file (PostgreSQL): the working
// directory. PAYHOOK_DEMO_SECRET_FILE names another.
const demoSecretFile = "payhook-demo.secret"

// demoSecretPath is the file of the demo secret for the database dbURL:
// beside a SQLite file (payhook.db → payhook.db.demo-secret), else
// demoSecretFile; PAYHOOK_DEMO_SECRET_FILE overrides both. It is "" for
// a URL no database has (opening it fails next).
func (m *Main) demoSecretPath(dbURL string) string {
	if p := m.Getenv("PAYHOOK_DEMO_SECRET_FILE"); p != "" {
		return p
	}
	switch scheme, _, ok := strings.Cut(dbURL, "://"); {
	case scheme == "postgres" || scheme == "postgresql":
		return demoSecretFile
	case ok && scheme != "sqlite":
		return ""
	}
	path := strings.TrimPrefix(dbURL, "sqlite://")
	path, _, _ = strings.Cut(path, "?")
	return path + ".demo-secret"
}

// loadDemoSecret returns the demo secret kept in path, making it (mode
// 0600) on the first start, so that a restart keeps the secret the
// sender was given. The file is created exclusively: two instances
// starting at once end with the one secret. A file that does not hold a
// secret, or that others may read, is an error naming it, never replaced.
func loadDemoSecret(path string) (string, error) {
	key := make([]byte, 24)
	rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, err = f.WriteString(secret + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return "", fmt.Errorf("write the demo secret to %s: %w", path, err)
		}
		return secret, nil
	case !errors.Is(err, fs.ErrExist):
		return "", fmt.Errorf("keep the demo secret: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("read the demo secret: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("demo secret file %s may be read by others (mode %04o): chmod 600 %s, or remove it for a new secret",
			path, info.Mode().Perm(), path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the demo secret: %w", err)
	}
	secret = string(bytes.TrimSpace(raw))
	if key, ok := strings.CutPrefix(secret, "whsec_"); !ok || !validBase64(key) {
		return "", fmt.Errorf("demo secret file %s does not hold a secret (whsec_ and base64); remove it for a new one", path)
	}
	return secret, nil
}

func validBase64(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && len(b) > 0
}
