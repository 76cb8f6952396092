package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc, want string
		err             bool
	}{
		{"markers", "# T\n\nintro\n\n" + Begin + "\nold\n" + End + "\n\n## kept\n", "# T\n\nintro\n\n" + Begin + "\nnew\n" + End + "\n\n## kept\n", false},
		{"none: after the first paragraph", "# T\n\nintro\n\n## kept\n", "# T\n\nintro\n\n" + Begin + "\nnew\n" + End + "\n\n## kept\n", false},
		{"no paragraph", "# T", "# T\n" + Begin + "\nnew\n" + End + "\n", false},
		{"begin only", "# T\n\n" + Begin + "\nold\n", "", true},
		{"end before begin", End + "\n" + Begin, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replace(tc.doc, "new\n")
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("replace(%q) = %q, %v; want %q, error %v", tc.doc, got, err, tc.want, tc.err)
			}
		})
	}
}

// TestRun writes the section from a run's files twice: the second run
// replaces the first, the rest of the file stays.
func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"run.json": `{"results":[{"target":"floor","concurrency":64,"acks_per_sec":1000,"stored":-1,"events":10,"latency":{"p99":5000000}},
			{"target":"peer","concurrency":64,"acks_per_sec":250,"stored":-1,"events":10,"errors":{"503":2},"vs_floor":{"acks_per_sec":0.25}}]}`,
		"env.json":     `{"start":"2026-12-01 15:00 UTC","nproc":"2","postgres":"PostgreSQL 15.18 (fsync=on)"}`,
		"scale.json":   `[{"figure":"database bytes per stored event","target":"postgres","value":"900 B"}]`,
		"commands.txt": "payhook bench --floor\n",
		"doc.md":       "# Benchmarks\n\nintro\n\n## kept\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := filepath.Join(dir, "doc.md")
	for range 2 {
		if err := run(doc, dir); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(doc)
	got := string(b)
	for _, want := range []string{"| peer | 250 | 25.0% |", "2× 503", "| database bytes per stored event | postgres | 900 B |",
		"payhook bench --floor", "fsync=on", "## kept"} {
		if !strings.Contains(got, want) {
			t.Errorf("document lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, Begin) != 1 || strings.Count(got, "## kept") != 1 {
		t.Errorf("the section or the kept part twice:\n%s", got)
	}
}

func TestRunMissingFile(t *testing.T) {
	t.Parallel()
	if err := run(filepath.Join(t.TempDir(), "doc.md"), t.TempDir()); err == nil {
		t.Error("run without run.json = nil error; want one")
	}
}
