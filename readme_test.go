package payhook_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMELibraryIsExample: the README's library section is Example
// with the imports of example_test.go, copied from that file, so the
// snippet a user copies compiles and runs.
func TestREADMELibraryIsExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	imports := regexp.MustCompile(`(?s)\nimport \(\n.*?\n\)\n`).Find(src)
	example := regexp.MustCompile(`(?s)\nfunc Example\(\) \{\n.*?\n\}\n`).Find(src)
	_, section, _ := strings.Cut(string(readme), "\n## The library\n")
	_, block, _ := strings.Cut(section, "```go\n")
	block, _, _ = strings.Cut(block, "```\n")
	if imports == nil || example == nil || block == "" {
		t.Fatalf("no imports or func Example in example_test.go, or no go block in the README's library section")
	}
	want := string(imports[1:]) + string(example)
	if block != want {
		t.Errorf("the README's library section differs from example_test.go; copy its imports and Example (to the closing brace) there.\nREADME:\n%s\nexample_test.go:\n%s", block, want)
	}
}
