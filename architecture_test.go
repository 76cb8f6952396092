package payhook_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The direction of imports, as docs/architecture.md draws it: outer
// packages import the root, the root imports nothing of ours; only cmd
// wires the simulator and the server together. Only non-test imports
// count: tests may drive the simulator against a store.
//
// Patterns are relative to the module: "" is the root package, "x/..." is
// x and everything under it. The first rule whose pkg matches a package
// applies; every package must match one, so a new top-level package
// states its place here.
var importRules = []importRule{
	{"", nil, "the root holds the domain types every other package imports"},
	{"internal/dbtest", nil, "test support, standard library and drivers only"},
	{"internal/...", []string{"", "internal/..."}, "helpers shared by providers"},
	{"store", []string{"", "internal/..."}, "storage knows the root's types, nothing above it"},
	{"store/storetest", []string{"store"}, "test support: a migrated database for other packages' tests"},
	{"groupcommit", []string{"", "internal/..."}, "it batches behind the root's Inbox interface"},
	{"receiver", []string{"", "internal/..."}, "the webhook handler sees only the root's Source and Inbox"},
	{"jobs", []string{"", "store", "internal/..."}, "the queue stores and runs events; handlers are injected"},
	{"jobs/jobsui", []string{"jobs"}, "River's web UI over the queue, apart so that importing jobs does not link it"},
	{"provider/...", []string{"", "internal/...", "provider/..."}, "adapters verify and read; they never store"},
	{"outbox", []string{"", "store", "internal/..."}, "facts told after commit; their sinks are injected or stdlib"},
	{"billing", []string{"", "store", "outbox", "internal/..."}, "billing state: facts in, rows and outbox facts out"},
	{"billing/mapping", []string{"", "billing", "internal/..."}, "a mapping only reads the payload: no storage, no queue, no provider API"},
	{"billing/...", []string{"", "billing/...", "store", "outbox", "jobs", "provider/...", "internal/..."},
		"mapping and processing turn events into billing facts; they never serve HTTP"},
	{"reconcile", []string{"", "billing/...", "store", "jobs", "provider/...", "internal/..."},
		"backfill and reconciliation store through the root's Inbox and compare with billing state; they never serve HTTP"},
	{"api", []string{"", "billing/...", "store", "internal/..."}, "the HTTP API over billing's views"},
	{"metrics", []string{"", "store", "outbox", "internal/..."}, "counters fed by hooks, gauges read from the store at scrape time"},
	{"console", []string{"", "api", "billing/...", "outbox", "store", "jobs", "internal/..."}, "the web console over billing's and the outbox's views and the queue's replay"},
	{"sim/...", []string{"", "sim/...", "provider/...", "internal/..."}, "the simulated provider knows nothing of the server"},
	{"bench", []string{"", "sim/...", "provider/...", "internal/..."}, "the load generator signs as providers do and reads counts through database/sql"},
	{"cmd/...", []string{"..."}, "the binary wires everything"},
}

// importRule says what the packages matching pkg may import of ours.
type importRule struct {
	pkg string
	may []string // our packages it may import directly
	why string
}

// testOnly are packages that exist for tests: no non-test code imports them.
var testOnly = []string{"internal/dbtest", "internal/stripemock", "provider/providertest", "store/storetest"}

// serverParts and simParts: no package but cmd may depend on both, even
// through others.
var (
	serverParts = []string{"store", "jobs/...", "receiver", "groupcommit", "billing/...", "reconcile", "api", "outbox", "console", "metrics"}
	simParts    = []string{"sim/..."}
)

// thirdParty says which of our packages alone may import a library
// directly (prefixes of import paths).
var thirdParty = []struct {
	prefix string
	only   []string
	why    string
}{
	{"github.com/riverqueue/", []string{"jobs/..."}, "jobs is the only package that knows River"},
	{"riverqueue.com/", []string{"jobs/jobsui"}, "River's web UI is linked only into a program that serves it"},
	{"github.com/jackc/pgx/", []string{"store", "internal/dbtest"}, "the store translates database errors"},
	{"modernc.org/sqlite", []string{"store", "internal/dbtest"}, "the store translates database errors"},
	{"go.yaml.in/yaml/", []string{"cmd/..."}, "configuration files are read only in cmd"},
	{"github.com/prometheus/", []string{"metrics"}, "metrics is the only package that knows Prometheus; others call its hooks through func fields"},
}

const module = "github.com/payhook/payhook"

// goPackage is what `go list -json` says of one package.
type goPackage struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// TestImportDirection fails when a package of the module imports what its
// layer should not (see importRules and docs/architecture.md).
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; want the whole module", len(pkgs))
	}
	for _, v := range importViolations(pkgs) {
		t.Error(v)
	}
}

// TestImportViolations checks the checker: each case breaks one rule.
func TestImportViolations(t *testing.T) {
	pkg := func(rel string, imports ...string) goPackage {
		p := goPackage{ImportPath: abs(rel)}
		for _, i := range imports {
			if !strings.Contains(i, ".") {
				i = abs(i)
			}
			p.Imports = append(p.Imports, i)
			p.Deps = append(p.Deps, i)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pkgs []goPackage
		want string // in one of the violations; "" for none
	}{
		{"a sound layout", []goPackage{pkg(""), pkg("store", ""), pkg("billing", "", "store"), pkg("cmd/payhook", "sim", "store")}, ""},
		{"root imports ours", []goPackage{pkg("", "store")}, "the root package imports store"},
		{"root imports a library", []goPackage{pkg("", "github.com/x/y")}, "standard library"},
		{"billing imports the receiver", []goPackage{pkg("billing/mapping", "receiver")}, "billing/mapping imports receiver"},
		{"sim imports the store", []goPackage{pkg("sim/flavour", "store")}, "sim/flavour imports store"},
		{"sim and server through a third package", []goPackage{{ImportPath: abs("provider/x"), Deps: []string{abs("sim"), abs("store")}}}, "both sim and store"},
		{"a package without a rule", []goPackage{pkg("inbox2", "")}, "no rule"},
		{"River outside jobs", []goPackage{pkg("store", "github.com/riverqueue/river")}, "River"},
		{"River's web UI in jobs itself", []goPackage{pkg("jobs", "riverqueue.com/riverui")}, "River's web UI"},
		{"test support in production code", []goPackage{pkg("jobs", "internal/dbtest")}, "test support"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := importViolations(tc.pkgs)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("importViolations = %q; want none", got)
			case tc.want != "" && !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tc.want) }):
				t.Errorf("importViolations = %q; want one containing %q", got, tc.want)
			}
		})
	}
}

// importViolations returns one line per broken rule.
func importViolations(pkgs []goPackage) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := ours(p.ImportPath)
		if !ok {
			continue
		}
		i := slices.IndexFunc(importRules, func(r importRule) bool { return match(r.pkg, rel) })
		if i < 0 {
			out = append(out, fmt.Sprintf("%s has no rule in importRules (architecture_test.go): give it its place", show(rel)))
			continue
		}
		rule := importRules[i]
		for _, imp := range p.Imports {
			r, ours := ours(imp)
			switch {
			case ours && matchAny(testOnly, r):
				out = append(out, fmt.Sprintf("%s imports %s, test support, outside its tests", show(rel), r))
			case ours && !matchAny(rule.may, r):
				out = append(out, fmt.Sprintf("%s imports %s: %s", show(rel), show(r), rule.why))
			case !ours && rel == "" && strings.Contains(strings.Split(imp, "/")[0], "."):
				out = append(out, fmt.Sprintf("the root package imports %s: it uses the standard library only", imp))
			case !ours:
				for _, tp := range thirdParty {
					if strings.HasPrefix(imp, tp.prefix) && !matchAny(tp.only, rel) {
						out = append(out, fmt.Sprintf("%s imports %s: %s", show(rel), imp, tp.why))
					}
				}
			}
		}
		if match("cmd/...", rel) {
			continue
		}
		var sim, server string
		for _, d := range append([]string{p.ImportPath}, p.Deps...) {
			r, ok := ours(d)
			switch {
			case !ok:
			case sim == "" && matchAny(simParts, r):
				sim = r
			case server == "" && matchAny(serverParts, r):
				server = r
			}
		}
		if sim != "" && server != "" {
			out = append(out, fmt.Sprintf("%s depends on both %s and %s: only cmd wires the simulator and the server", show(rel), sim, server))
		}
	}
	return out
}

// ours returns the module-relative name of an import path of the module.
func ours(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

func abs(rel string) string {
	if rel == "" {
		return module
	}
	return module + "/" + rel
}

// show names a module-relative package in a message.
func show(rel string) string {
	if rel == "" {
		return "the root package"
	}
	return rel
}

// match reports whether the module-relative package rel matches pattern:
// "x" is x, "x/..." is x and the packages under it, "..." is any.
func match(pattern, rel string) bool {
	if pattern == "..." {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == prefix || strings.HasPrefix(rel, prefix+"/")
	}
	return rel == pattern
}

func matchAny(patterns []string, rel string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, rel) })
}

// docRef is a `file.go: Function` or `file.go: Type.Method` reference of
// docs/architecture.md, which may wrap across lines.
var docRef = regexp.MustCompile("`([A-Za-z0-9_./]+\\.go):\\s+([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?`")

// TestArchitectureDocPath fails when docs/architecture.md names a
// function that its file does not declare: the path of one event stays
// true as code moves.
func TestArchitectureDocPath(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	refs := docRef.FindAllStringSubmatch(string(doc), -1)
	if len(refs) < 15 {
		t.Fatalf("docs/architecture.md names %d functions; want the whole path of an event", len(refs))
	}
	decls := map[string]map[string]bool{} // file → "F" and "T.M"
	for _, ref := range refs {
		file, name := ref[1], ref[2]
		if ref[3] != "" {
			name += "." + ref[3]
		}
		if decls[file] == nil {
			decls[file] = declared(t, file)
		}
		if !decls[file][name] {
			t.Errorf("docs/architecture.md names %s: %s, which %s does not declare", file, name, file)
		}
	}
}

// declared returns the functions and methods ("T.M") file declares, nil
// when it cannot be parsed.
func declared(t *testing.T, file string) map[string]bool {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("docs/architecture.md names %s: %v", file, err)
		return map[string]bool{}
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fn.Name.Name
		if fn.Recv != nil && len(fn.Recv.List) == 1 {
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			switch x := typ.(type) {
			case *ast.IndexExpr:
				typ = x.X
			case *ast.IndexListExpr:
				typ = x.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		out[name] = true
	}
	return out
}
