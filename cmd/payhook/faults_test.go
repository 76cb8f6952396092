package main

// The fault suite: payhook serve as a real process (this test binary run
// as payhook, see TestMain) receives a simulator storm while the test
// kills it, stops its database or fills its disk. Every test checks the
// inbox's promise through the fault: nothing acknowledged is lost, nothing
// is stored or applied twice, everything acknowledged is processed once the
// fault is gone, and the billing state equals the provider's.
//
// The short versions run in the normal suite; PAYHOOK_FAULTS=long (make
// faults) runs them bigger: more kills, larger storms. With
// PAYHOOK_FAULTS_REPORT=FILE each test appends its figures to FILE as a
// row of a Markdown table (docs/reliability.md).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// faultScale sizes a fault test: the storm's size, and how many times the
// fault is injected.
type faultScale struct {
	size   float64
	faults int
}

// scale returns the short size (the normal suite) or, with
// PAYHOOK_FAULTS=long, the long one.
func scale(short, long faultScale) faultScale {
	if os.Getenv("PAYHOOK_FAULTS") == "long" {
		return long
	}
	return short
}

// TestFaultSIGKILL kills payhook serve with SIGKILL several times under a
// storm and restarts it at once: every acknowledged event is stored (each
// checked while payhook is dead, before a redelivery could hide a loss),
// stored once, processed once, and the billing state is the provider's.
func TestFaultSIGKILL(t *testing.T) {
	t.Parallel()
	sc := scale(faultScale{size: 0.2, faults: 2}, faultScale{size: 1, faults: 10})
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		f := newFault(t, "SIGKILL", engine, dbtest.URL(t, engine))
		srv := f.start()
		st := f.storm(srv.url(), sc.size, 11)
		every := stormAcks(sc.size) / (sc.faults + 1)
		for i := range sc.faults {
			if !f.waitAcks(st, (i+1)*every) {
				break
			}
			srv.signal(syscall.SIGKILL)
			f.checkAckedStored("after SIGKILL")
			f.kills++
			srv.restart()
			f.lastFault = time.Now()
		}
		f.finish(st, sc.faults, processingStall)
	})
}

// TestFaultSIGTERM stops payhook serve with SIGTERM under a storm: it
// exits 0 having stored every delivery it acknowledged; restarted, it
// takes the rest of the storm.
func TestFaultSIGTERM(t *testing.T) {
	t.Parallel()
	sc := scale(faultScale{size: 0.2, faults: 1}, faultScale{size: 1, faults: 4})
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		f := newFault(t, "SIGTERM", engine, dbtest.URL(t, engine))
		srv := f.start()
		st := f.storm(srv.url(), sc.size, 12)
		every := stormAcks(sc.size) / (sc.faults + 1)
		for i := range sc.faults {
			if !f.waitAcks(st, (i+1)*every) {
				break
			}
			if err := srv.signal(syscall.SIGTERM); err != nil {
				t.Errorf("payhook exited with %v after SIGTERM, want 0\n%s", err, srv.logTail())
			}
			f.checkAckedStored("after SIGTERM")
			f.kills++
			srv.restart()
			f.lastFault = time.Now()
		}
		f.finish(st, sc.faults, processingStall)
	})
}

// TestFaultPostgresDown stops the PostgreSQL server under a storm (a
// private cluster, so no other test sees it) and starts it again: while
// it is down every delivery is answered 503, nothing else; once it is
// back, everything acknowledged is stored and processed and the
// provider's retries deliver the rest.
func TestFaultPostgresDown(t *testing.T) {
	t.Parallel()
	sc := scale(faultScale{size: 0.2, faults: 1}, faultScale{size: 1, faults: 3})
	pg := startPrivatePostgres(t)
	f := newFault(t, "PostgreSQL down", "postgres", pg.dsn)
	srv := f.start()
	st := f.storm(srv.url(), sc.size, 13)
	every := stormAcks(sc.size) / (sc.faults + 1)
	for i := range sc.faults {
		if !f.waitAcks(st, (i+1)*every) {
			break
		}
		pg.run("halt")
		f.rec.setPhase("down")
		// The storm may have been acknowledged whole before the server
		// went down: then only a delivery's retries, minutes apart, would
		// meet it, until the provider gave up on it. Deliver events of our
		// own while it is down, until 20 were answered.
		if !f.probe(srv.url(), func() bool { return f.rec.answered("down") >= 20 }, 40) {
			t.Fatalf("fewer than 20 answers while PostgreSQL is down after 40 probes: %s", f.rec.progress())
		}
		f.rec.setPhase("up") // before: a delivery answered once it is back is not "down"
		pg.run("resume")
		f.kills++
		f.lastFault = time.Now()
	}
	f.checkOnly("down", http.StatusServiceUnavailable)
	f.finish(st, sc.faults, processingStall)
}

// TestFaultDiskFull fills the filesystem of payhook's SQLite database (a
// small tmpfs the test mounts) under a storm: deliveries are answered 200
// only when stored, 503 otherwise, the database passes PRAGMA
// integrity_check while full, and once space returns everything
// acknowledged is stored and processed.
func TestFaultDiskFull(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("TestFaultDiskFull mounts a tmpfs and needs root (CI runs as root): run it as root to fill a filesystem")
	}
	sc := scale(faultScale{size: 0.2, faults: 1}, faultScale{size: 1, faults: 3})
	dir := mountTmpfs(t, "24m")
	dbURL := "sqlite://" + filepath.Join(dir, "payhook.db")
	f := newFault(t, "disk full", "sqlite", dbURL)
	srv := f.start()
	st := f.storm(srv.url(), sc.size, 14)
	every := stormAcks(sc.size) / (sc.faults + 1)
	for i := range sc.faults {
		if !f.waitAcks(st, (i+1)*every) {
			break
		}
		filler := fillFilesystem(t, dir)
		answered := f.rec.answered("full") // by the fills before
		f.rec.setPhase("full")
		// The storm may have been acknowledged whole before the disk
		// filled: then only a delivery's retries, minutes apart, would meet
		// it, until the provider gave up on it. SQLite's WAL may also still
		// have room for some commits. Deliver events of our own while the
		// disk is full, until 20 were answered and one was refused.
		if !f.probe(srv.url(), func() bool {
			return f.rec.answered("full") >= answered+20 && f.rec.count("full", http.StatusServiceUnavailable) > 0
		}, 5000) {
			t.Fatalf("not 20 answers and a refusal while the disk is full after 5000 probes: %s", f.rec.progress())
		}
		f.checkIntegrity(dbURL, "while the disk is full")
		f.rec.setPhase("space")
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		f.kills++
		f.lastFault = time.Now()
	}
	f.checkOnly("full", http.StatusOK, http.StatusServiceUnavailable)
	f.finish(st, sc.faults, processingStall)
	f.checkIntegrity(dbURL, "after the storm")
}

// TestFaultTwoInstances runs two payhook serve on one PostgreSQL database
// and spreads a storm's deliveries over both, so that copies of one event
// reach both at once: each event is stored once and processed once, with
// one job each (or none: a batch deletes the jobs it applies).
func TestFaultTwoInstances(t *testing.T) {
	t.Parallel()
	sc := scale(faultScale{size: 0.3}, faultScale{size: 1})
	f := newFault(t, "two instances", "postgres", dbtest.URL(t, "postgres"))
	a, b := f.start(), f.start()
	f.rec.targets = []string{a.addr, b.addr}
	st := f.storm(a.url(), sc.size, 15)
	f.finish(st, 0, processingStall)
	if err := oneJobEach(f.db()); err != nil {
		t.Error(err)
	}
	both := f.rec.ackedByBoth()
	for _, addr := range f.rec.targets {
		if f.rec.perTarget[addr] == 0 {
			t.Errorf("instance %s acknowledged nothing", addr)
		}
	}
	if both == 0 {
		t.Error("no event was acknowledged by both instances: the storm did not test the race between them")
	}
	f.fig.Note = fmt.Sprintf("acked %d + %d by the two; %d events acked by both", f.rec.perTarget[a.addr], f.rec.perTarget[b.addr], both)
}

// stormAcks is about how many deliveries the storm scenario gets
// acknowledged at size: the kills are spread over them.
func stormAcks(size float64) int { return max(20, int(1600*size)) }

// fault is one fault test: payhook processes behind a recorder of every
// delivery, a storm, and the figures.
type fault struct {
	t      *testing.T
	name   string
	engine string
	dbURL  string
	env    []string
	secret string
	rec    *recorder
	kills  int
	// lastFault is when the last fault ended (restart, database back,
	// space back).
	lastFault time.Time
	started   []*child
	fig       figures
	dbOnce    sync.Once
	store     *store.DB
	lost      map[string]bool
}

// figures are what a fault test reports.
type figures struct {
	Fault, Engine                                     string
	Faults, Sent, Acked, Stored, Processed, Duplicate int
	Lost, Doubled                                     int
	Recovered                                         time.Duration
	Note                                              string
}

func newFault(t *testing.T, name, engine, dbURL string) *fault {
	t.Helper()
	f := &fault{t: t, name: name, engine: engine, dbURL: dbURL, lost: map[string]bool{},
		rec: newRecorder()}
	fl := flavour.Billete()
	f.secret = fl.NewSecret()
	config := filepath.Join(t.TempDir(), "payhook.yaml")
	// probe is a second source of the same provider for the test's own
	// deliveries (probe), kept out of the storm's figures.
	err := os.WriteFile(config, fmt.Appendf(nil, "sources:\n  - name: billete\n    provider: %[1]s\n    secrets: [\"${SECRET}\"]\n"+
		"  - name: probe\n    provider: %[1]s\n    secrets: [\"${SECRET}\"]\n"+
		"processing:\n  retry_base: 20ms\n  retry_max: 500ms\n  max_attempts: 1000\n", fl.Provider()), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.env = []string{"PAYHOOK_DB=" + dbURL, "PAYHOOK_CONFIG=" + config, "SECRET=" + f.secret,
		"PAYHOOK_UNSAFE_DURABILITY=1"} // the test clusters run with fsync=off
	t.Cleanup(func() {
		if f.store != nil {
			f.store.Close()
		}
	})
	return f
}

// db is the test's own connection to payhook's database.
func (f *fault) db() *store.DB {
	f.dbOnce.Do(func() {
		db, err := store.Open(context.Background(), f.dbURL)
		if err != nil {
			f.t.Fatal(err)
		}
		f.store = db
	})
	return f.store
}

// start starts a payhook serve on a free loopback port.
func (f *fault) start() *child {
	c := &child{t: f.t, addr: freeLoopbackAddr(f.t), env: f.env,
		log: filepath.Join(f.t.TempDir(), fmt.Sprintf("serve-%d.log", len(f.started)))}
	f.started = append(f.started, c)
	f.t.Cleanup(func() {
		c.stop()
		if f.t.Failed() {
			f.t.Logf("log of payhook serve on %s:\n%s", c.addr, c.logTail())
		}
	})
	c.restart()
	return c
}

// storm plays the storm scenario against target in the background.
func (f *fault) storm(target string, size float64, seed int64) *storm {
	st := &storm{done: make(chan struct{})}
	client := &http.Client{Transport: f.rec, Timeout: deliver.DefaultTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	go func() {
		defer close(st.done)
		st.res, _, st.err = sim.Run(context.Background(), "storm", sim.RunConfig{
			Target: target + "/webhooks/billete", Secret: f.secret, Flavour: flavour.Billete(), Seed: seed,
			TimeScale: 500, Size: size, Client: client, Logger: discardLogger()})
	}()
	return st
}

// storm is a storm under way.
type storm struct {
	done chan struct{}
	res  *sim.Result
	err  error
}

func (s *storm) finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// waitAcks waits until n deliveries were acknowledged; false if the storm
// ended first.
func (f *fault) waitAcks(st *storm, n int) bool {
	f.t.Helper()
	waitProgress(f.t, fmt.Sprintf("%d acknowledged deliveries", n), func() (bool, string) {
		return st.finished() || f.rec.acks() >= n, f.rec.progress()
	})
	return f.rec.acks() >= n
}

// probe delivers fresh webhook_endpoint.test events (billete's mapping
// ignores them) to the source probe through the recorder until enough
// says so, at most most of them, and reports whether enough said so.
func (f *fault) probe(target string, enough func() bool, most int) bool {
	f.t.Helper()
	fl := flavour.Billete()
	client := &http.Client{Transport: f.rec, Timeout: deliver.DefaultTimeout}
	for i := 0; !enough() && i < most; i++ {
		now := time.Now()
		ev := flavour.Event{ID: fmt.Sprintf("evt_probe_%d_%d", f.kills, i), Type: "webhook_endpoint.test", CreatedAt: now,
			Environment: "test", Data: map[string]any{"id": "we_probe"}}
		body, err := fl.Body(ev, ev.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		h, err := fl.Sign([]string{f.secret}, ev, ev.ID, body, now)
		if err != nil {
			f.t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, target+"/webhooks/probe", bytes.NewReader(body))
		if err != nil {
			f.t.Fatal(err)
		}
		maps.Copy(req.Header, h)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	return enough()
}

// checkOnly fails the test if a delivery sent in phase got an answer
// other than the given statuses (or none).
func (f *fault) checkOnly(phase string, statuses ...int) {
	f.t.Helper()
	for status, n := range f.rec.statuses(phase) {
		if !slices.Contains(statuses, status) {
			f.t.Errorf("while %s: %d deliveries answered %d (0: no answer), want only %v; all: %v",
				phase, n, status, statuses, f.rec.statuses(phase))
		}
	}
}

// checkAckedStored checks, while no payhook runs, that every event
// acknowledged so far is stored: a redelivery later would hide a loss.
func (f *fault) checkAckedStored(when string) {
	f.t.Helper()
	stored := f.storedIDs()
	for _, id := range f.rec.ackedIDs() {
		if !stored[id] && !f.lost[id] {
			f.lost[id] = true
			f.t.Errorf("%s: event %s was acknowledged but is not stored", when, id)
		}
	}
}

func (f *fault) storedIDs() map[string]bool {
	f.t.Helper()
	rows, err := f.db().SQL.Query(`SELECT event_id FROM payhook_events`) // the probes' too
	if err != nil {
		f.t.Fatalf("list stored events: %v", err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			f.t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// checkIntegrity runs SQLite's PRAGMA integrity_check.
func (f *fault) checkIntegrity(dbURL, when string) {
	f.t.Helper()
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		f.t.Fatalf("%s: open: %v", when, err)
	}
	defer db.Close()
	var res []string
	rows, err := db.SQL.Query(`PRAGMA integrity_check`)
	if err != nil {
		f.t.Fatalf("%s: integrity_check: %v", when, err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		res = append(res, s)
	}
	if strings.Join(res, "\n") != "ok" {
		f.t.Errorf("%s: PRAGMA integrity_check = %q, want ok", when, res)
	} else {
		f.t.Logf("%s: PRAGMA integrity_check = ok", when)
	}
}

// finish waits for the storm to end and for every acknowledged event to
// be processed (failing when nothing moved for stall), then checks
// exactly once and the billing state, and reports the figures.
func (f *fault) finish(st *storm, faults int, stall time.Duration) {
	t := f.t
	t.Helper()
	waitProgress(t, "the storm", func() (bool, string) { return st.finished(), f.rec.progress() })
	if st.err != nil {
		t.Fatalf("storm: %v", st.err)
	}
	if f.kills < faults {
		t.Errorf("the storm ended after %d of %d faults: make it bigger or fault sooner", f.kills, faults)
	}
	res := st.res
	// At time scale 500 the provider retries a delivery for 5 minutes.
	if res.Stats.GaveUp > 0 {
		t.Fatalf("the provider gave up %d deliveries after retrying them for 5 minutes: payhook answered no 2xx (%s)", res.Stats.GaveUp, f.rec.progress())
	}
	rep, err := waitProcessed(context.Background(), f.db(), "billete", res, stall)
	if err != nil {
		t.Fatal(err)
	}
	f.fig = figures{Fault: f.name, Engine: f.engine, Faults: f.kills, Sent: f.rec.sent(), Acked: f.rec.acks(),
		Stored: rep.Stored, Processed: rep.Processed + rep.Ignored, Duplicate: f.rec.duplicates()}
	if !f.lastFault.IsZero() {
		f.fig.Recovered = time.Since(f.lastFault).Round(time.Second)
	}
	if !rep.ExactlyOnce() {
		t.Errorf("%+v", rep)
	}
	stored := f.storedIDs()
	for _, id := range f.rec.ackedIDs() {
		if !stored[id] {
			f.lost[id] = true
		}
	}
	f.fig.Lost = len(f.lost)
	if f.fig.Lost > 0 {
		t.Errorf("%d acknowledged events are not stored", f.fig.Lost)
	}
	diffs, err := compareBilling(context.Background(), f.db(), "billete", res.Expected)
	if err != nil {
		t.Fatal(err)
	}
	f.fig.Doubled = len(diffs)
	for _, phase := range []string{"down", "full"} {
		if n := f.rec.statuses(phase); len(n) > 0 {
			f.fig.Note = strings.TrimSpace(fmt.Sprintf("%s answers while %s: %v (%d of the 503s after %v)",
				f.fig.Note, phase, n, f.rec.lateAnswers(phase), storeTimeout))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("billing state differs from the provider's in %d places:\n%s", len(diffs), strings.Join(diffs[:min(len(diffs), 15)], "\n"))
	}
	t.Cleanup(f.report)
}

// report logs the figures and appends them to $PAYHOOK_FAULTS_REPORT.
func (f *fault) report() {
	g := f.fig
	status := "pass"
	if f.t.Failed() {
		status = "FAIL"
	}
	row := fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n",
		g.Fault, g.Engine, g.Faults, g.Sent, g.Acked, g.Stored, g.Processed, g.Duplicate, g.Lost, g.Doubled,
		g.Recovered, status, g.Note)
	f.t.Logf("deliveries: %s", f.rec.progress())
	f.t.Logf("fault | engine | faults | sent | acked | stored | processed | duplicates | lost | billing diffs | all processed after the last fault | result | note\n%s", row)
	if path := os.Getenv("PAYHOOK_FAULTS_REPORT"); path != "" {
		file, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			f.t.Errorf("report: %v", err)
			return
		}
		defer file.Close()
		file.WriteString(row)
	}
}

// child is payhook serve in its own process: this test binary run as
// payhook (TestMain), on a fixed address so that a restart takes the
// deliveries meant for the process that died.
type child struct {
	t    *testing.T
	addr string
	env  []string
	log  string
	mu   sync.Mutex
	proc *proc
}

// proc is one run of a child.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how it exited, once exited is closed
}

func (c *child) url() string { return "http://" + c.addr }

// restart starts the process and returns once it answers /healthz.
func (c *child) restart() {
	c.t.Helper()
	logf, err := os.OpenFile(c.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"PAYHOOK_TEST_AS_MAIN=1",
		"PAYHOOK_TEST_ARGS=serve --addr " + c.addr}, c.env...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
	client := &http.Client{Timeout: 5 * time.Second}
	waitProgress(c.t, "payhook serve to answer /healthz", func() (bool, string) {
		select {
		case <-p.exited:
			return true, ""
		default:
		}
		resp, err := client.Get(c.url() + "/healthz")
		if err != nil {
			return false, "starting"
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "starting"
	})
	select {
	case <-p.exited:
		c.t.Fatalf("payhook serve exited at start (%v):\n%s", p.err, c.logTail())
	default:
	}
}

// signal sends sig and waits for the process to exit, returning how it
// exited (nil for status 0).
func (c *child) signal(sig syscall.Signal) error {
	c.t.Helper()
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	// serve's shutdown is bounded by shutdownTimeout; past that, it is stuck.
	select {
	case <-p.exited:
		return p.err
	case <-time.After(shutdownTimeout + stallLimit):
		c.t.Fatalf("payhook serve did not exit %v after %v", shutdownTimeout+stallLimit, sig)
		return nil
	}
}

// stop kills the process if it runs.
func (c *child) stop() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.exited
}

// logTail returns the last lines of the child's log, after the first
// panic it logged if any (net/http recovers a handler's panic and closes
// the connection: a delivery with no answer).
func (c *child) logTail() string {
	b, _ := os.ReadFile(c.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	tail := strings.Join(lines[max(0, len(lines)-40):], "\n")
	for i, l := range lines[:max(0, len(lines)-40)] {
		if strings.Contains(l, "panic") {
			return fmt.Sprintf("first panic (line %d):\n%s\n...\n%s", i+1, strings.Join(lines[i:min(i+30, len(lines)-40)], "\n"), tail)
		}
	}
	return tail
}

// recorder is the storm's HTTP transport: it counts every delivery by the
// phase of the test when it was sent and answered, and by its answer, remembers which
// events were acknowledged (payhook's answer names the event), and with
// several targets spreads the deliveries over them in turn.
type recorder struct {
	next    http.RoundTripper
	targets []string

	mu        sync.Mutex
	phase     string
	turn      int
	nSent     int
	nAcked    int
	nDup      int
	byPhase   map[string]map[int]int
	late503   map[string]int             // 503s that took the store timeout or longer, by phase
	noAnswer  map[string]int             // why deliveries had no answer (status 0), by error
	acked     map[string]map[string]bool // event id → targets that acknowledged it
	perTarget map[string]int
}

func newRecorder() *recorder {
	return &recorder{next: http.DefaultTransport, phase: "up", byPhase: map[string]map[int]int{}, late503: map[string]int{},
		noAnswer: map[string]int{},
		acked:    map[string]map[string]bool{}, perTarget: map[string]int{}}
}

func (r *recorder) setPhase(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase = p
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	phase := r.phase
	r.nSent++
	if len(r.targets) > 0 {
		req = req.Clone(req.Context())
		req.URL.Host = r.targets[r.turn%len(r.targets)]
		req.Host = req.URL.Host
		r.turn++
	}
	r.mu.Unlock()
	sent := time.Now()
	resp, err := r.next.RoundTrip(req)
	status := 0
	var answer struct {
		Status  string `json:"status"`
		EventID string `json:"event_id"`
	}
	why := ""
	if err == nil {
		status = resp.StatusCode
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			status, why = 0, "reading the answer: "+rerr.Error()
		} else if status/100 == 2 {
			json.Unmarshal(body, &answer)
		}
	} else {
		why = err.Error()
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			why = ue.Err.Error() // without the URL, so that errors group
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if why != "" {
		r.noAnswer[why]++
	}
	// A delivery counts in a phase when it was sent and answered in it;
	// one that straddles two (the database came back meanwhile) in both.
	if r.phase != phase {
		phase += "→" + r.phase
	}
	if r.byPhase[phase] == nil {
		r.byPhase[phase] = map[int]int{}
	}
	r.byPhase[phase][status]++
	if status == http.StatusServiceUnavailable && time.Since(sent) >= storeTimeout {
		r.late503[phase]++
	}
	if status/100 == 2 {
		r.nAcked++
		r.perTarget[req.URL.Host]++
		if answer.Status == "duplicate" {
			r.nDup++
		}
		if answer.EventID != "" {
			if r.acked[answer.EventID] == nil {
				r.acked[answer.EventID] = map[string]bool{}
			}
			r.acked[answer.EventID][req.URL.Host] = true
		}
	}
	return resp, err
}

// storeTimeout is the receiver's default StoreTimeout, which payhook serve
// keeps: a 503 should come within it, not after it.
const storeTimeout = 5 * time.Second

// lateAnswers counts the 503s of deliveries sent in phase that took
// storeTimeout or longer (a figure, not a check: the machine's speed adds
// to it).
func (r *recorder) lateAnswers(phase string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late503[phase]
}

func (r *recorder) acks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nAcked
}

func (r *recorder) sent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nSent
}

func (r *recorder) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nDup
}

func (r *recorder) progress() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf("%d sent, %d acknowledged, answers by phase %v", r.nSent, r.nAcked, r.byPhase)
	if len(r.noAnswer) > 0 {
		s += fmt.Sprintf("; no answer: %v", r.noAnswer)
	}
	return s
}

// answered counts the deliveries sent in phase that were answered.
func (r *recorder) answered(phase string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.byPhase[phase] {
		n += c
	}
	return n
}

func (r *recorder) count(phase string, status int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byPhase[phase][status]
}

func (r *recorder) statuses(phase string) map[int]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[int]int{}
	for k, v := range r.byPhase[phase] {
		m[k] = v
	}
	return m
}

func (r *recorder) ackedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.acked))
	for id := range r.acked {
		ids = append(ids, id)
	}
	return ids
}

func (r *recorder) ackedByBoth() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, by := range r.acked {
		if len(by) > 1 {
			n++
		}
	}
	return n
}

// privatePostgres is a PostgreSQL cluster of the test's own, started
// with scripts/pg.sh, that the test may stop and start.
type privatePostgres struct {
	t     *testing.T
	dsn   string
	state string
	port  int
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	// A port of its own, away from the clusters of other test runs, which
	// could take it while this one is halted, and below Linux's ephemeral
	// ports (32768–60999): in them, an outbound connection of the test's
	// clients could take it while the cluster is halted, and its restart
	// failed "Address already in use" (seen in CI on port 48420).
	pg := &privatePostgres{t: t, state: filepath.Join(t.TempDir(), "pg", "state"), port: 20000 + rand.IntN(10000)}
	out := pg.run("start")
	pg.dsn = strings.TrimSpace(out)
	t.Cleanup(func() { pg.run("stop") })
	if !strings.HasPrefix(pg.dsn, "postgres://") {
		t.Fatalf("pg.sh start printed %q, want a DSN", out)
	}
	return pg
}

// run runs scripts/pg.sh cmd on the test's cluster and returns its stdout.
func (pg *privatePostgres) run(cmd string) string {
	pg.t.Helper()
	c := exec.Command(filepath.Join("..", "..", "scripts", "pg.sh"), cmd)
	c.Env = append(os.Environ(), "PAYHOOK_PG_STATE="+pg.state, fmt.Sprintf("PAYHOOK_PG_PORT=%d", pg.port))
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		pg.t.Fatalf("scripts/pg.sh %s: %v\n%s", cmd, err, stderr.String())
	}
	return string(out)
}

// mountTmpfs mounts a tmpfs of size on a new directory, unmounted at the
// end of the test.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "payhook-full-")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "payhook-full", dir).CombinedOutput(); err != nil {
		os.Remove(dir)
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
			return
		}
		os.Remove(dir)
	})
	return dir
}

// fillFilesystem writes a file in dir until the filesystem is full and
// returns its path.
func fillFilesystem(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := file.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last bytes too
		for {
			if _, err := file.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}
