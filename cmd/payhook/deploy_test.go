package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
)

// The files docs/deploy.md describes, relative to this package.
const (
	dockerfilePath = "../../Dockerfile"
	unitPath       = "../../deploy/payhook.service"
)

// goBuildAsDockerfile runs the Dockerfile's go build line (its RUN
// CGO_ENABLED=0 go build ..., -o pointed into dir) in the module root and
// returns the binary's path.
func goBuildAsDockerfile(dir string) (string, error) {
	d, err := readDockerfile(dockerfilePath)
	if err != nil {
		return "", err
	}
	env, args, err := d.goBuild()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "payhook")
	for i, a := range args {
		if a == "-o" {
			args[i+1] = bin
		}
	}
	// go test puts its own toolchain first on the PATH of the tests.
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("find the go command: %w", err)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), env...)
	if gitCommit() != "" {
		// As in the image, whose Go has no GOFLAGS: a machine's
		// -buildvcs=false (go env -w) would leave the commit out.
		flags := slices.DeleteFunc(strings.Fields(os.Getenv("GOFLAGS")), func(f string) bool { return strings.HasPrefix(f, "-buildvcs") })
		cmd.Env = append(cmd.Env, "GOFLAGS="+strings.Join(append(flags, "-buildvcs=auto"), " "))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", strings.Join(env, " "), strings.Join(cmd.Args, " "), err, out)
	}
	return bin, nil
}

// gitCommit is the commit of the checkout the tests run in, "" if git
// cannot tell.
func gitCommit() string {
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(head))
}

// dockerfile is the part of a Dockerfile the tests read: its instructions
// in order, continuation lines joined.
type dockerfile struct {
	instructions [][2]string // {"RUN", "CGO_ENABLED=0 go build ..."}
}

func readDockerfile(path string) (*dockerfile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read Dockerfile: %w", err)
	}
	d := &dockerfile{}
	var line string
	for l := range strings.Lines(string(raw)) {
		l = strings.TrimSpace(l)
		if line == "" && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(l, `\`); ok {
			line += cont + " "
			continue
		}
		line += l
		op, rest, _ := strings.Cut(line, " ")
		d.instructions = append(d.instructions, [2]string{strings.ToUpper(op), strings.TrimSpace(rest)})
		line = ""
	}
	return d, nil
}

// all returns the arguments of every instruction op.
func (d *dockerfile) all(op string) []string {
	var out []string
	for _, in := range d.instructions {
		if in[0] == op {
			out = append(out, in[1])
		}
	}
	return out
}

// goBuild returns the environment and the go arguments of the RUN line
// that builds payhook.
func (d *dockerfile) goBuild() (env, args []string, err error) {
	for _, run := range d.all("RUN") {
		f := strings.Fields(run)
		i := slices.Index(f, "go")
		if i < 0 || i+1 >= len(f) || f[i+1] != "build" {
			continue
		}
		if slices.Contains(f, "&&") || slices.Contains(f, ";") {
			return nil, nil, fmt.Errorf("Dockerfile: keep the go build on a RUN line of its own: %q", run)
		}
		env, args = f[:i], f[i+1:]
		if j := slices.Index(args, "-o"); j < 0 || j+1 >= len(args) {
			return nil, nil, fmt.Errorf("Dockerfile: the go build line has no -o FILE: %q", run)
		}
		return env, args, nil
	}
	return nil, nil, fmt.Errorf("Dockerfile: no RUN ... go build line")
}

// TestDockerfile checks what docs/deploy.md promises of the image: a
// multi-stage build of a static binary (CGO_ENABLED=0), a non-root user,
// the SQLite database in a volume, and serve as the default command.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	d, err := readDockerfile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := d.goBuild()
	if err != nil {
		t.Fatal(err)
	}
	last := func(op string) string {
		all := d.all(op)
		if len(all) == 0 {
			return ""
		}
		return all[len(all)-1]
	}
	raw, err := os.ReadFile("../../.dockerignore")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	ignored := strings.Fields(string(raw))
	var dbPath string
	if m := regexp.MustCompile(`PAYHOOK_DB=sqlite://(\S+)`).FindStringSubmatch(strings.Join(d.all("ENV"), " ")); m != nil {
		dbPath = m[1]
	}
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"several stages (FROM ... AS build, then the image)", len(d.all("FROM")) >= 2},
		{"the build has CGO_ENABLED=0", slices.Contains(env, "CGO_ENABLED=0")},
		{"the image runs as a non-root USER", last("USER") != "" && !slices.Contains([]string{"root", "0", "0:0", "root:root"}, last("USER"))},
		{"ENV PAYHOOK_DB is a SQLite file", dbPath != ""},
		{"the SQLite file is in a VOLUME", dbPath != "" && slices.ContainsFunc(d.all("VOLUME"), func(v string) bool {
			return strings.HasPrefix(dbPath, strings.TrimSuffix(v, "/")+"/")
		})},
		{"the default command is serve", strings.Contains(last("CMD"), `"serve"`)},
		{"a build context with .git (.dockerignore), for the commit payhook version prints", !slices.ContainsFunc(ignored,
			func(p string) bool { return strings.Trim(p, "/*") == ".git" })},
	} {
		if !c.ok {
			t.Errorf("Dockerfile: want %s", c.what)
		}
	}
}

// unitFile is a systemd unit: the values of each key, per section.
type unitFile map[string]map[string][]string

func readUnit(path string) (unitFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read unit: %w", err)
	}
	u, section := unitFile{}, ""
	for l := range strings.Lines(string(raw)) {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = strings.Trim(l, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				return nil, fmt.Errorf("%s: not KEY=VALUE in a section: %q", path, l)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u, nil
}

// get returns the last value of key in section, as systemd takes it.
func (u unitFile) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// TestSystemdUnit checks deploy/payhook.service: the settings
// docs/deploy.md relies on, then systemd's own parser, when
// systemd-analyze is on the machine.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	u, err := readUnit(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := time.ParseDuration(u.get("Service", "TimeoutStopSec"))
	if err != nil {
		t.Errorf("TimeoutStopSec: %v", err)
	}
	var env []string
	for _, e := range u["Service"]["Environment"] {
		env = append(env, strings.Fields(e)...)
	}
	state := "/var/lib/" + u.get("Service", "StateDirectory") + "/"
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"ExecStart runs payhook serve", strings.HasSuffix(u.get("Service", "ExecStart"), "payhook serve")},
		{"DynamicUser=yes", u.get("Service", "DynamicUser") == "yes"},
		{"a StateDirectory", u.get("Service", "StateDirectory") != ""},
		{"the SQLite file in the state directory", slices.ContainsFunc(env, func(e string) bool {
			p, ok := strings.CutPrefix(e, "PAYHOOK_DB=sqlite://")
			return ok && strings.HasPrefix(p, state)
		})},
		{"Restart=on-failure or always", slices.Contains([]string{"on-failure", "always"}, u.get("Service", "Restart"))},
		{"no limit on restarts while the database is away", u.get("Unit", "StartLimitIntervalSec") == "0"},
		{"KillSignal=SIGTERM, which serve drains on", u.get("Service", "KillSignal") == "SIGTERM"},
		{fmt.Sprintf("TimeoutStopSec above serve's shutdown bound %v", shutdownTimeout), stop > shutdownTimeout},
		{"WantedBy=multi-user.target", u.get("Install", "WantedBy") == "multi-user.target"},
	} {
		if !c.ok {
			t.Errorf("%s: want %s", unitPath, c.what)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit's syntax is not checked by systemd")
	}
	// verify checks that ExecStart's program exists: point it at an
	// executable that does (this test binary), in a copy of the unit.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(unitPath)
	copied := regexp.MustCompile(`(?m)^ExecStart=\S+`).ReplaceAll(raw, []byte("ExecStart="+self))
	path := filepath.Join(t.TempDir(), "payhook.service")
	if err := os.WriteFile(path, copied, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	// verify exits 0 on unknown keys and bad values: it only warns, naming
	// the file. Warnings about other units of the machine are not ours.
	var ours []string
	for l := range strings.Lines(string(out)) {
		if strings.Contains(l, "payhook.service") {
			ours = append(ours, strings.TrimSpace(l))
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	}
}

// TestDeployBinary builds payhook as the Dockerfile does, checks that it is
// static, and runs it as docs/deploy.md does: configured by environment
// (PAYHOOK_CONFIG, PAYHOOK_DB, PAYHOOK_ADDR, a secret as ${VAR}), several
// instances started at once on one PostgreSQL (one on SQLite), each ready,
// each taking a signed event from the binary's own send, the event
// processed, an online SQLite backup (VACUUM INTO) holding it, and each
// instance stopped by SIGTERM (one of PostgreSQL's by SIGHUP) with exit
// status 0.
func TestDeployBinary(t *testing.T) {
	t.Parallel()
	// The image cannot be built here (no Docker engine); the binary it
	// would hold can, with the same command line.
	bin, err := goBuildAsDockerfile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if static, err := isStatic(bin); err != nil || !static {
		t.Fatalf("%s is not a static binary (static %v, %v)", bin, static, err)
	}
	// Built from a git checkout (as the image is: .dockerignore keeps
	// .git), it names its commit.
	if commit := gitCommit(); commit != "" {
		out, err := exec.Command(bin, "version").Output()
		if want := "commit " + commit; err != nil || !strings.Contains(string(out), want) {
			t.Errorf("payhook version = %q, %v; want it to name %q", out, err, want)
		}
	}
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		instances := map[string]int{"sqlite": 1, "postgres": 3}[engine]
		dbURL := dbtest.URL(t, engine)
		dir := t.TempDir()
		config := filepath.Join(dir, "payhook.yaml")
		if err := os.WriteFile(config, []byte("sources:\n  - name: shop\n    provider: billete\n    environment: test\n    secrets: [\"${SHOP_SECRET}\"]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		const secret = "whsec_ZGVwbG95LXRlc3Qtc2VjcmV0LTEyMzQ1Njc4"
		env := []string{"PAYHOOK_CONFIG=" + config, "PAYHOOK_DB=" + dbURL, "PAYHOOK_ADDR=127.0.0.1:0", "SHOP_SECRET=" + secret}
		if engine == "postgres" {
			env = append(env, "PAYHOOK_UNSAFE_DURABILITY=1") // the test cluster runs with fsync=off
		}

		// All start together: their migrations race on a fresh database.
		procs := make([]*deployed, instances)
		for i := range procs {
			procs[i] = startDeployed(t, bin, dir, env)
		}
		for i, p := range procs {
			p.waitReady(t)
			id := fmt.Sprintf("evt_deploy_%s_%d", engine, i)
			if out, err := p.run(env, "send", "--url", "http://"+p.addr+"/webhooks/shop", "--secret", secret, "--id", id); err != nil {
				t.Fatalf("instance %d: payhook send: %v\n%s", i, err, out)
			}
			waitProgress(t, "event "+id+" processed", func() (bool, string) {
				out, err := p.run(env, "events", "show", "--json", id)
				var ev struct {
					Status   string `json:"status"`
					Attempts int    `json:"attempts"`
				}
				if err != nil || json.Unmarshal(out, &ev) != nil {
					return false, fmt.Sprintf("events show: %v %s", err, out)
				}
				return ev.Status == "processed", fmt.Sprintf("status %s after %d attempts", ev.Status, ev.Attempts)
			})
		}
		if engine == "sqlite" {
			checkOnlineBackup(t, procs[0], dbURL, dir)
		}
		for i, p := range procs {
			sig := syscall.SIGTERM
			if i == 1 {
				sig = syscall.SIGHUP // a closed terminal stops it the same way
			}
			if err := p.stop(sig); err != nil {
				t.Errorf("instance %d: %v\n%s", i, err, p.log.String())
			}
		}
	})
}

// checkOnlineBackup takes the backup docs/deploy.md gives for SQLite,
// VACUUM INTO, while payhook serves, and reads it with payhook itself.
func checkOnlineBackup(t *testing.T, p *deployed, dbURL, dir string) {
	t.Helper()
	backup := filepath.Join(dir, "backup.db")
	// The sqlite driver is the one payhook registers (package store).
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(dbURL, "sqlite://")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`VACUUM INTO ?`, backup); err != nil {
		t.Fatalf("VACUUM INTO: %v", err)
	}
	out, err := p.run(nil, "events", "list", "--db", "sqlite://"+backup)
	if err != nil || !strings.Contains(string(out), "evt_deploy_sqlite_0") {
		t.Fatalf("events list on the backup: %v\n%s", err, out)
	}
}

// isStatic reports whether the ELF file asks for no dynamic loader.
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return false, nil
		}
	}
	return true, nil
}

// deployed is one payhook serve process started from the built binary.
type deployed struct {
	bin, dir string
	cmd      *exec.Cmd
	log      *syncBuffer // its stderr
	addr     string
	// listening gets the address once serve logs it.
	listening chan string
	exited    chan error
}

// listening is serve's log line that names the address it listens on.
var listening = regexp.MustCompile(`msg="payhook serving" addr=(\S+)`)

func startDeployed(t *testing.T, bin, dir string, env []string) *deployed {
	t.Helper()
	p := &deployed{bin: bin, dir: dir, log: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Dir = dir
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Stdout = io.Discard
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(p.log, sc.Text())
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("log of payhook serve:\n%s", p.log.String())
		}
	})
	p.listening = addr
	return p
}

// cleanEnv is the test's environment without payhook's variables, so
// that only what a test sets configures the binary.
func cleanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "PAYHOOK_") })
}

// waitReady waits until serve listens and GET /readyz answers 200.
func (p *deployed) waitReady(t *testing.T) {
	t.Helper()
	waitProgress(t, "payhook serve listening", func() (bool, string) {
		select {
		case p.addr = <-p.listening:
			return true, ""
		case err := <-p.exited:
			t.Fatalf("payhook serve exited before listening: %v", err)
		default:
		}
		return false, fmt.Sprintf("%d bytes of log", len(p.log.String()))
	})
	client := &http.Client{Timeout: 5 * time.Second}
	waitProgress(t, "/readyz of "+p.addr, func() (bool, string) {
		resp, err := client.Get("http://" + p.addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("%s %s", resp.Status, bytes.TrimSpace(body))
	})
}

// run runs another command of the binary with env and returns its stdout.
func (p *deployed) run(env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stallLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Dir = p.dir
	cmd.Env = append(cleanEnv(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

// stop sends sig and returns an error unless payhook exits 0 within its
// shutdown bound and a stall limit.
func (p *deployed) stop(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%v: %w", sig, err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			return fmt.Errorf("payhook exited with %v after %v, want 0", err, sig)
		}
		return nil
	case <-time.After(shutdownTimeout + stallLimit):
		return fmt.Errorf("payhook did not exit within %v of %v", shutdownTimeout+stallLimit, sig)
	}
}
