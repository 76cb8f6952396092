package dst

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/cmd/payhook/checkdb"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/receiver"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/check"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// Fixed parts of every run.
const (
	sourceName = "dst"
	target     = "http://payhook.dst/webhooks/" + sourceName
	apiKey     = "sk_test_dstdstdstdstdstdstdstdst"
	// bound is how long after its first 2xx an event may wait to be
	// processed, in simulated time, whatever the faults: the worst
	// retries of the queue's backoff below, a crash's rescue and sweep.
	bound = 2 * time.Hour
	// horizon ends a run that has not settled: a failure.
	horizon = 24 * time.Hour
)

// start is the simulated time every run begins at.
var start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// plan is what one seed chose: the story's size and every fault.
type plan struct {
	size                  float64
	drop, dup, burst      float64
	delay                 time.Duration
	skew                  time.Duration
	apiFail, stmtFail     float64
	crashes               []int // statement numbers
	afterCommits          []int // commit numbers
	maxBatch              int
	loseAnswersAfterCrash bool
	conc                  concPlan // drawn from its own stream (newConcPlan)
}

func newPlan(rng *rand.Rand) plan {
	p := plan{
		size:     0.015 + rng.Float64()*0.035,
		drop:     rng.Float64() * 0.1,
		dup:      rng.Float64() * 0.4,
		burst:    rng.Float64() * 0.3,
		delay:    time.Duration(rng.Int64N(int64(10 * time.Minute))),
		skew:     time.Duration(rng.Int64N(int64(4*time.Minute))) - 2*time.Minute,
		apiFail:  rng.Float64() * 0.2,
		maxBatch: 1 + rng.IntN(8),
	}
	if rng.IntN(2) == 0 {
		p.stmtFail = rng.Float64() * 0.01
	}
	for range rng.IntN(3) {
		p.crashes = append(p.crashes, 1+rng.IntN(1500))
	}
	for range rng.IntN(3) {
		p.afterCommits = append(p.afterCommits, 1+rng.IntN(150))
	}
	p.loseAnswersAfterCrash = rng.IntN(2) == 0
	return p
}

func (p plan) String() string {
	return fmt.Sprintf("size %.3f drop %.2f dup %.2f burst %.2f delay %s skew %s api-fail %.2f stmt-fail %.4f "+
		"crashes at statements %v and after commits %v, answers lost at a crash %v, batches up to %d, %s",
		p.size, p.drop, p.dup, p.burst, p.delay.Round(time.Second), p.skew.Round(time.Second), p.apiFail, p.stmtFail,
		p.crashes, p.afterCommits, p.loseAnswersAfterCrash, p.maxBatch, p.conc)
}

// opener opens the run's database with the faults in front of it, and
// says how to snapshot the rows for the digest.
type opener struct {
	engine store.Engine
	open   func(f *faults) *sql.DB
	// portable: the faults of the model both engines play alike
	// (faults.portable).
	portable bool
	// late makes each statement take that much longer (PostgreSQL only:
	// inside the bubble a sleep is simulated time), as a busy server
	// does.
	late time.Duration
}

// harness is one seeded run.
type harness struct {
	t      testing.TB
	seed   int64
	plan   plan
	rng    *rand.Rand // the harness's own draws: batches, answers lost
	now    time.Time
	op     opener
	faults *faults
	ctx    context.Context

	db    *store.DB
	queue *jobs.Queue
	// queue2 is the second instance's, when the seed runs two.
	queue2 *jobs.Queue
	conc   concPlan
	crng   *rand.Rand // the draws of concurrency: instances, interleavings
	rounds int        // step rounds of two instances
	frozen *frozen    // an instance frozen mid-job, if any
	recv   http.Handler
	src    payhook.Source
	prov   *sim.Provider
	api    *apiTransport
	lister adapter.EventLister

	sender *sender
	// acked holds the provider's event ids answered 2xx, with the time of
	// the first.
	acked map[string]time.Time
	// done counts the attempts that ended each event's processing
	// (jobs.Config.OnDone): more than one is an event processed twice.
	done map[string]int
	// sink is the application's after-commit effect, told each fact.
	sink *sink
	// violation is the first broken invariant seen inside payhook's
	// code, raised after the step (see violate).
	violation string
	crashes   int
	rescued   int
	steps     int
	logs      *dbtest.Buffer // written by the throttled loggers' timers too
	// stepEvery spaces the runs of jobs (0: whenever one is due), so that
	// jobs wait together and a batch takes several (the odd seeds, which
	// process in batches); nextSteps is when they run next.
	stepEvery time.Duration
	nextSteps time.Time
}

// Now is payhook's clock (River's too): the harness's time in whole
// milliseconds, which both engines store exactly. River's SQLite driver
// keeps milliseconds and PostgreSQL microseconds, each rounding; at the
// nanosecond a job stamped now was due at once on one engine and 1 ms
// later on the other, and the engines ran different interleavings (seed 42).
func (h *harness) Now() time.Time { return h.now.Truncate(time.Millisecond) }

// advance moves the simulated time on.
func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

// outcome is what a run ends with.
type outcome struct {
	digest   string // every table's rows (SQLite: row ids and times included)
	dump     string // what digest hashes
	business string // the state by business ids, the same on both engines
	events   int
	crashes  int
	rescued  int
	steps    int // queue steps
	points   int // fault points passed (faults.n)
}

// runSeed plays one seed to its end and checks every invariant; it fails
// t with the command that replays the seed.
func runSeed(t testing.TB, seed int64, op opener) outcome {
	t.Helper()
	out, err := tryRunSeed(t, seed, op)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryRunSeed is runSeed returning the broken invariant, if any.
func tryRunSeed(t testing.TB, seed int64, op opener) (out outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	return playSeed(t, seed, op), nil
}

func playSeed(t testing.TB, seed int64, op opener) outcome {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xd57))
	h := &harness{t: t, seed: seed, plan: newPlan(rng), rng: rng, now: start, op: op, ctx: context.Background(),
		acked: map[string]time.Time{}, done: map[string]int{}, logs: &dbtest.Buffer{}}
	h.faults = &faults{crashAt: map[int]bool{}, afterCommit: map[int]bool{}, fail: h.plan.stmtFail, rng: rand.New(rand.NewPCG(uint64(seed), 0xfa17)),
		portable: op.portable, late: op.late}
	running.Store(h.faults)
	for _, n := range h.plan.crashes {
		h.faults.crashAt[n] = true
	}
	for _, n := range h.plan.afterCommits {
		h.faults.afterCommit[n] = true
	}
	if seed%2 == 1 && !op.portable {
		// Not where both engines must run alike: a batch's statements
		// differ by engine, and so would the points where faults strike.
		h.stepEvery = time.Duration(1+seed/2%4) * 10 * time.Second
	}
	h.conc, h.crng = newConcPlan(seed)
	h.plan.conc = h.conc
	sp, srng := newSinkPlan(seed)
	h.sink = &sink{h: h, plan: sp, rng: srng, told: map[string]int{}}
	h.sender = &sender{h: h, rng: rand.New(rand.NewPCG(uint64(seed), 0x5e7d))}
	h.api = &apiTransport{h: h, rng: rand.New(rand.NewPCG(uint64(seed), 0xa91))}
	h.open()
	if bugSchema != "" {
		if _, err := h.db.SQL.ExecContext(h.ctx, bugSchema); err != nil {
			h.fatalf("the schema of the bug put back: %v", err)
		}
	}
	defer func() {
		if h.frozen != nil {
			h.frozen.abandon()
		}
		if h.db != nil {
			h.db.Close()
		}
	}()
	var secretSeed [32]byte
	binary.LittleEndian.PutUint64(secretSeed[:], uint64(seed))
	res, _, err := sim.Run(h.ctx, "storm", sim.RunConfig{
		Target: target, Seed: seed, Rand: rand.NewChaCha8(secretSeed), Size: h.plan.size, APIKey: apiKey,
		Sender: h.sender, Clock: provClock{h}, Started: func(p *sim.Provider) { h.prov = p },
		Secret: secret(seed),
	})
	if err != nil {
		h.fatalf("play the story: %v", err)
	}
	h.faults.mu.Lock()
	h.faults.armed = true
	h.faults.mu.Unlock()

	// Backfill as soon as the deliveries have ended, as a periodic
	// backfill would, not once every job is done: an event waiting for one
	// only backfill brings must not wait for it to the end of its tries.
	h.settle(true)
	h.backfill()
	h.settle(false)
	// A backfill's window ends at payhook's now; an event the provider
	// stamped later on its own clock, ahead by the skew, is the next
	// periodic run's (seed 178 lost a dropped chargeback when it was
	// the last). That next run, once the skew has passed:
	if h.plan.skew > 0 {
		h.advance(h.plan.skew + time.Second)
		h.backfill()
		h.settle(false)
	}

	h.faults.mu.Lock()
	h.faults.armed = false
	h.faults.mu.Unlock()
	exp := res.Expected
	for i := range exp.Events {
		_, exp.Events[i].Delivered = h.acked[exp.Events[i].ID]
	}
	h.checkFinal(exp)
	dg, dump := h.digest()
	return outcome{digest: dg, dump: dump, business: h.business(exp), events: len(exp.Events), crashes: h.crashes, rescued: h.rescued,
		steps: h.steps, points: h.faults.n}
}

// bugSchema is a change of the schema that a bug put back needs
// (bugs_test.go), run at the start of each seed.
var bugSchema string

// secret is the endpoint's signing secret of a seed; the receiver's
// source is configured with it before the story creates the endpoint.
func secret(seed int64) string {
	var b [32]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed)^0x5ec7)
	return flavour.Billete().NewSecretFrom(rand.NewChaCha8(b))
}

// failure is a broken invariant, raised by fatalf and recovered by
// tryRunSeed.
type failure struct{ msg string }

func (h *harness) fatalf(format string, args ...any) {
	panic(failure{fmt.Sprintf("seed %d: %s\nplan: %s\nat %s after %d steps, %d crashes\nreplay: %s\nlast logs:\n%s",
		h.seed, fmt.Sprintf(format, args...), h.plan, h.now.Sub(start), h.steps, h.crashes, replay(h.seed, h.op.portable),
		tail(h.logs.String(), 3000))})
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// replay is the one command that replays seed (portable: the run of
// TestDSTPostgres, on both engines).
func replay(seed int64, portable bool) string {
	if portable {
		return fmt.Sprintf("PAYHOOK_RACE=0 scripts/test.sh -run 'TestDSTPostgres$' ./internal/dst -seed %d -v", seed)
	}
	return fmt.Sprintf("go test ./internal/dst -run 'TestDST$' -seed %d -v", seed)
}

// open opens the database (as it was committed) and builds payhook over it:
// the queue, never started (the harness steps it), and the receiver,
// whose store calls the harness batches.
func (h *harness) open() {
	h.db = &store.DB{SQL: h.op.open(h.faults), Engine: h.op.engine, URL: "dst"}
	if h.op.engine == store.SQLite {
		// One connection, as payhook serve has; two instances park one
		// each at once, and the harness reads beside them.
		h.db.SQL.SetMaxOpenConns(1 + 3*(h.conc.instances-1))
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	v, err := provider.New(provider.Options{Provider: "billete", Secrets: []string{secret(h.seed)}})
	if err != nil {
		h.fatalf("verifier: %v", err)
	}
	client, err := provider.NewClient("billete", adapter.ClientConfig{BaseURL: "http://sim.dst", Key: apiKey,
		HTTP: &http.Client{Transport: h.api}})
	if err != nil {
		h.fatalf("api client: %v", err)
	}
	h.src = payhook.Source{Name: sourceName, Provider: "billete", Environment: sim.EnvTest, Verifier: v, Fetch: client.Fetch}
	if h.seed%2 == 1 {
		// Without API credentials: events are applied from their
		// payloads, in batches (jobs/batch.go), as payhook serve does by
		// default.
		h.src.Fetch = nil
	}
	box, err := outbox.New(outbox.Config{DB: h.db, Now: h.Now, Logger: log})
	if err != nil {
		h.fatalf("outbox: %v", err)
	}
	if err := h.sink.add(box); err != nil {
		h.fatalf("outbox: %v", err)
	}
	sources := []payhook.Source{h.src}
	if h.seed%4 == 0 {
		// Beside a source of another application that never fetches: the
		// queue then asks whose events it reads first (FetchSource), and
		// each event of this one is locked by a batch that puts it back
		// and runs it alone.
		sources = append(sources, payhook.Source{Name: "other", Provider: "billete", Verifier: v})
	}
	qc, err := process.New(process.Config{DB: h.db, Sources: sources, Now: h.Now, Logger: log, Outbox: box})
	if err != nil {
		h.fatalf("process: %v", err)
	}
	qc.StampWithNow = true
	// 25 attempts over 100 simulated minutes: longer than the provider's
	// retries, so that an event whose predecessor only backfill brings
	// (a "not seen yet") outlives the wait, as it does with the
	// production's three weeks (seed 241 failed one).
	qc.MaxAttempts = 25
	qc.Backoff = func(n int) time.Duration { return time.Duration(n) * 20 * time.Second }
	qc.DeliveryBackoff = qc.Backoff
	qc.JobTimeout = 30 * time.Second
	// A batch's time is this machine's (jobs/batch.go: batchOver, and the
	// last batch's time per event that bounds the next one's room), which
	// stands still inside the bubble but not on PostgreSQL: a batch of
	// seed 9 slower than BatchTime there left the next one room for none,
	// and the engines ran apart (40 fault points). Neither bound binds in
	// simulated time, so on both engines none does.
	qc.BatchTime, qc.BusyBatchTime = horizon, horizon
	qc.OnDone = func(ev *payhook.Event, status payhook.Status, _ time.Duration) {
		if status == payhook.StatusFailed {
			return
		}
		if h.done[ev.EventID]++; h.done[ev.EventID] > 1 {
			// Raised after the step: the queue recovers a panic here.
			h.violate("event %s processed %d times (now %s)", ev.EventID, h.done[ev.EventID], status)
		}
	}
	h.queue, err = jobs.New(h.db, qc)
	if err != nil {
		h.fatalf("queue: %v", err)
	}
	if h.conc.instances > 1 {
		if h.queue2, err = jobs.New(h.db, qc); err != nil {
			h.fatalf("queue: %v", err)
		}
	}
	h.recv, err = receiver.New(receiver.Config{Sources: []payhook.Source{h.src}, Inbox: batcherInbox{}, Now: h.Now,
		Logger: log, StoreTimeout: time.Hour})
	if err != nil {
		h.fatalf("receiver: %v", err)
	}
	h.lister = client.(adapter.EventLister)
}

// crashed reopens the database after a crash, from what was committed,
// and checks the invariants that hold at every instant.
func (h *harness) crashed() bool {
	if !h.faults.isCrashed() {
		return false
	}
	h.crashes++
	fmt.Fprintf(h.logs, "--- crash %d at statement %d, %s\n", h.crashes, h.faults.n, h.now.Sub(start))
	if h.frozen != nil {
		h.frozen.abandon() // the whole machine went down
		h.frozen = nil
	}
	h.db.Close()
	h.faults.mu.Lock()
	h.faults.crashed = false
	h.faults.mu.Unlock()
	h.open()
	h.unarmed(func() { h.checkAlways("after crash") })
	return true
}

// unarmed runs f with the store's faults off: the harness's own reads.
func (h *harness) unarmed(f func()) {
	h.faults.mu.Lock()
	was := h.faults.armed
	h.faults.armed = false
	h.faults.mu.Unlock()
	defer func() {
		h.faults.mu.Lock()
		h.faults.armed = was
		h.faults.mu.Unlock()
	}()
	f()
}

// settle runs deliveries, jobs and sweeps until nothing is left to do,
// or, when deliveriesOnly, until no delivery is left.
func (h *harness) settle(deliveriesOnly bool) {
	nextSweep := h.now
	for {
		if h.now.Sub(start) > horizon {
			h.fatalf("not settled after %s: %d deliveries pending, %d events waiting", horizon, len(h.sender.queue), h.waiting())
		}
		if h.frozen != nil && !h.now.Before(h.frozen.until) {
			h.thaw()
		}
		if due := h.sender.due(); len(due) > 0 {
			h.deliver(due)
			h.crashed()
		}
		if !h.now.Before(h.nextSteps) {
			for range 200 {
				if h.nextJob().After(h.now) {
					break // nothing due: spare Step its two queries
				}
				if !h.step() {
					break
				}
			}
			h.nextSteps = h.now.Add(h.stepEvery)
		}
		w := h.waiting()
		if w > 0 && !h.now.Before(nextSweep) {
			if !h.conc.sweepFirst {
				h.rescue()
			}
			if _, err := h.queue.Sweep(h.ctx); err != nil && !h.crashed() {
				fmt.Fprintf(h.logs, "sweep: %v\n", err)
			}
			if h.conc.sweepFirst {
				h.rescue()
			}
			nextSweep = h.now.Add(15 * time.Second)
		}
		if len(h.sender.queue) == 0 && (deliveriesOnly || w == 0 && h.frozen == nil) {
			return
		}
		// Wake at the next thing due: a delivery, or, while work waits in
		// the database, a job's schedule or the next sweep.
		wake := h.now.Add(horizon)
		if len(h.sender.queue) > 0 {
			wake = h.sender.queue[0].due
		}
		if h.frozen != nil {
			wake = minTime(wake, h.frozen.until)
		}
		if w > 0 {
			wake = minTime(wake, nextSweep, maxTime(h.nextJob(), h.nextSteps))
		}
		h.now = maxTime(wake, h.now.Add(time.Millisecond))
	}
}

// step runs the oldest due job on each instance, the two at once when
// there are two, and reports whether one ran (or a crash ended it).
func (h *harness) step() bool {
	var ran [2]bool
	var errs [2]error
	if h.conc.instances == 1 {
		h.steps++
		ran[0], errs[0] = h.queue.Step(h.ctx)
	} else {
		h.steps += 2
		h.rounds++
		freezeAt := h.conc.freezes[h.rounds]
		if h.frozen != nil {
			freezeAt = -1 // one frozen at a time
		}
		ice := together(h.ctx, h.crng, freezeAt,
			func(ctx context.Context) { ran[0], errs[0] = h.queue.Step(ctx) },
			func(ctx context.Context) { ran[1], errs[1] = h.queue2.Step(ctx) })
		if ice != nil {
			ice.until = h.now.Add(h.conc.freezeFor)
			h.frozen = ice
			fmt.Fprintf(h.logs, "--- instance %d frozen at %s until %s\n", ice.a.id+1, h.now.Sub(start), ice.until.Sub(start))
		}
	}
	h.checkViolation()
	if h.crashed() {
		return true
	}
	for _, err := range errs {
		if err != nil {
			fmt.Fprintf(h.logs, "step: %v\n", err)
		}
	}
	return ran[0] || ran[1]
}

// thaw lets the frozen instance go on from where it froze.
func (h *harness) thaw() {
	f := h.frozen
	h.frozen = nil
	fmt.Fprintf(h.logs, "--- instance %d thawed at %s\n", f.a.id+1, h.now.Sub(start))
	f.thaw()
	h.checkViolation()
	h.crashed()
}

// rescue is River's rescuer, which a stepped queue does not run: a job
// running for longer than the queue's RescueAfter (JobTimeout + 15s) was
// left by a dead process and is retried at once, or discarded after its
// last attempt.
func (h *harness) rescue() {
	h.unarmed(func() {
		rows, err := h.db.SQL.QueryContext(h.ctx, `SELECT id, attempted_at, attempt, max_attempts FROM river_job
			WHERE state = 'running' ORDER BY id`)
		if err != nil {
			h.fatalf("rescue: %v", err)
		}
		type stuck struct {
			id    int64
			final bool
		}
		var ids []stuck
		for rows.Next() {
			var id int64
			var at time.Time
			var attempt, most int
			if err := rows.Scan(&id, &at, &attempt, &most); err != nil {
				h.fatalf("rescue: %v", err)
			}
			if at.Before(h.now.Add(-45 * time.Second)) {
				ids = append(ids, stuck{id, attempt >= most})
			}
		}
		rows.Close()
		h.rescued += len(ids)
		for _, s := range ids {
			q := `UPDATE river_job SET state = 'retryable', scheduled_at = attempted_at WHERE id = $1`
			if s.final {
				q = `UPDATE river_job SET state = 'discarded', finalized_at = attempted_at WHERE id = $1`
			}
			if _, err := h.db.SQL.ExecContext(h.ctx, q, s.id); err != nil {
				h.fatalf("rescue job %d: %v", s.id, err)
			}
		}
	})
}

// nextJob is when the next job is due, far away when none is.
func (h *harness) nextJob() time.Time {
	at := h.now.Add(horizon)
	h.unarmed(func() {
		err := h.db.SQL.QueryRowContext(h.ctx, `SELECT scheduled_at FROM river_job
			WHERE state IN ('available', 'retryable', 'scheduled') ORDER BY scheduled_at LIMIT 1`).Scan(&at)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			h.fatalf("next job: %v", err)
		}
	})
	return at
}

func minTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.Before(m) {
			m = t
		}
	}
	return m
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// waiting counts what is left to do in the database: events still
// received, deliveries pending, facts untold, and jobs due, to be due, or
// left running by a crash (which the rescuer retries).
func (h *harness) waiting() int {
	var n int
	h.unarmed(func() {
		err := h.db.SQL.QueryRowContext(h.ctx, `SELECT
			(SELECT count(*) FROM payhook_events WHERE status = 'received') +
			(SELECT count(*) FROM payhook_deliveries WHERE status = 'pending') +
			(SELECT count(*) FROM payhook_untold_facts) +
			(SELECT count(*) FROM river_job WHERE state IN ('available', 'retryable', 'scheduled', 'running'))`).Scan(&n)
		if err != nil {
			h.fatalf("count waiting work: %v", err)
		}
	})
	return n
}

// backfill lists the provider's events and stores those missing (the
// dropped ones, those whose retries gave up), as payhook backfill does.
func (h *harness) backfill() {
	for try := 0; ; try++ {
		_, err := reconcile.Backfill(h.ctx, reconcile.BackfillConfig{
			DB: h.db, Inbox: h.queue, Source: h.src, Envelope: billeteEnvelope(), Lister: h.lister,
			Now: h.Now, Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Sleep:       func(ctx context.Context, d time.Duration) error { h.advance(d); return nil },
			MaxAttempts: 20,
		})
		if err == nil {
			return
		}
		h.crashed()
		if try == 20 {
			h.fatalf("backfill: %v", err)
		}
		h.advance(time.Minute)
	}
}

func billeteEnvelope() func([]byte) (payhook.Envelope, error) {
	a, _ := provider.Lookup("billete")
	return a.Envelope
}

// deliver makes the due attempts as concurrent requests: each goes through
// the receiver up to its store call, the harness forms the group commit's
// batches from them in an order of its own (by event, body and attempt),
// and the answers go back to the sender in the attempts' order.
func (h *harness) deliver(due []*attempt) {
	type answer struct {
		i      int
		status int
	}
	arrivals := make(chan *ingestCall)
	answers := make(chan answer)
	for i, a := range due {
		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(a.body))
		req.Header = a.header.Clone()
		ctx := context.WithValue(req.Context(), arrivalsKey{}, arrival{arrivals, i})
		go func() {
			rec := httptest.NewRecorder()
			h.recv.ServeHTTP(rec, req.WithContext(ctx))
			answers <- answer{i, rec.Code}
		}()
	}
	var calls []*ingestCall
	status := make([]int, len(due))
	finished := 0
	for len(calls)+finished < len(due) {
		select {
		case c := <-arrivals:
			calls = append(calls, c)
		case a := <-answers:
			status[a.i], finished = a.status, finished+1
		}
	}
	// Copies of one delivery (a burst) have one body: the attempt's
	// order, not the goroutines' arrival, says which copy goes first.
	slices.SortFunc(calls, func(a, b *ingestCall) int {
		return cmp.Or(cmp.Compare(a.ev.EventID, b.ev.EventID), bytes.Compare(a.ev.Payload, b.ev.Payload),
			cmp.Compare(a.attempt, b.attempt))
	})
	crashedAt := -1
	if h.conc.instances > 1 {
		// Each delivery reaches one of the two instances, as behind a
		// load balancer; each forms its own batches.
		var mine [2][]*ingestCall
		for _, c := range calls {
			i := h.crng.IntN(2)
			mine[i] = append(mine[i], c)
		}
		instance := func(q *jobs.Queue, calls []*ingestCall) func(context.Context) {
			return func(ctx context.Context) {
				for len(calls) > 0 {
					n := min(len(calls), 1+h.crng.IntN(h.plan.maxBatch))
					h.ingest(ctx, q, calls[:n])
					calls = calls[n:]
				}
			}
		}
		together(h.ctx, h.crng, -1, instance(h.queue, mine[0]), instance(h.queue2, mine[1]))
		if h.faults.isCrashed() {
			crashedAt = finished
		}
		calls = nil
	}
	for len(calls) > 0 {
		n := min(len(calls), 1+h.rng.IntN(h.plan.maxBatch))
		batch := calls[:n]
		calls = calls[n:]
		h.ingest(h.ctx, h.queue, batch)
		if crashedAt < 0 && h.faults.isCrashed() {
			crashedAt = finished
		}
	}
	for finished < len(due) {
		a := <-answers
		status[a.i], finished = a.status, finished+1
	}
	lose := crashedAt >= 0 && h.plan.loseAnswersAfterCrash
	for i, a := range due {
		ok := status[i]/100 == 2 && !lose
		if ok {
			if _, seen := h.acked[a.ev.ID]; !seen {
				h.acked[a.ev.ID] = h.now
			}
		}
		h.sender.answered(a, ok)
	}
}

// ingest stores one batch with one Ingest call, as the group committer
// does: the same event twice in a batch is stored once and both are
// answered; a failure answers the whole batch with it.
func (h *harness) ingest(ctx context.Context, q *jobs.Queue, batch []*ingestCall) {
	var evs []*payhook.Event
	first := map[string]int{}
	for _, c := range batch {
		if _, dup := first[c.ev.EventID]; !dup {
			first[c.ev.EventID] = len(evs)
			evs = append(evs, c.ev)
		}
	}
	inserted, err := q.Ingest(ctx, evs)
	for _, c := range batch {
		i := first[c.ev.EventID]
		if err != nil {
			c.reply <- ingestResult{err: err}
			continue
		}
		c.reply <- ingestResult{inserted: inserted[i] && evs[i] == c.ev}
	}
}

type arrivalsKey struct{}

// arrival is what a request's context carries to the inbox: where its
// store call goes, and the index of its attempt in the deliveries due.
type arrival struct {
	calls   chan *ingestCall
	attempt int
}

// ingestCall is one receiver's store call, held until the harness
// batches it.
type ingestCall struct {
	ev      *payhook.Event
	attempt int
	reply   chan ingestResult
}

type ingestResult struct {
	inserted bool
	err      error
}

// batcherInbox is the receiver's inbox: it hands each event to the
// harness (through the request's context) and waits for its batch.
type batcherInbox struct{}

func (batcherInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	a := ctx.Value(arrivalsKey{}).(arrival)
	out := make([]bool, len(evs))
	for i, ev := range evs {
		c := &ingestCall{ev: ev, attempt: a.attempt, reply: make(chan ingestResult, 1)}
		a.calls <- c
		r := <-c.reply
		if r.err != nil {
			return nil, r.err
		}
		out[i] = r.inserted
	}
	return out, nil
}

// provClock is the provider's clock: the harness's, skewed.
type provClock struct{ h *harness }

func (c provClock) Now() time.Time { return c.h.now.Add(c.h.plan.skew) }

func (provClock) AfterFunc(time.Duration, func()) deliver.Timer {
	panic("dst: the provider's deliveries are the harness's; no timer runs")
}

// apiTransport serves the provider's API in process, failing a share of
// the calls as the seed says (a 503, or a timeout).
type apiTransport struct {
	h   *harness
	rng *rand.Rand
}

func (a *apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if act, _ := req.Context().Value(actorKey{}).(*actor); act != nil && act.s.ice == nil && !act.s.thawed &&
		a.h.crng.Float64() < a.h.conc.fetchFreeze {
		// Frozen in the middle of its call to the provider, after its
		// look at the event and before its claim.
		act.freezeMe = true
		if err := gate(req.Context()); err != nil {
			return nil, err
		}
	}
	if a.rng.Float64() < a.h.plan.apiFail {
		if a.rng.IntN(2) == 0 {
			return nil, fmt.Errorf("dst: provider API timed out: %w", context.DeadlineExceeded)
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
			Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"error":"dst"}`)), Request: req}, nil
	}
	rec := httptest.NewRecorder()
	a.h.prov.Handler().ServeHTTP(rec, req)
	res := rec.Result()
	res.Request = req
	return res, nil
}

// attempt is one delivery attempt the sender will make.
type attempt struct {
	due      time.Time
	seq      int
	t        deliver.Target
	ev       flavour.Event
	delivery string
	n        int
	body     []byte
	header   http.Header
	// dup: a duplicate is still to come after the first 2xx.
	dup bool
}

// sender is the provider's delivery engine under the harness: at least
// once, with the seed's drops, delays (which reorder), bursts and
// duplicates, and a retry schedule on simulated time.
type sender struct {
	h     *harness
	rng   *rand.Rand
	queue []*attempt // by due, then seq
	seq   int
}

func (s *sender) Send(t deliver.Target, ev flavour.Event) {
	p := s.h.plan
	if s.rng.Float64() < p.drop {
		return // only the events API finds it
	}
	copies := 1
	if s.rng.Float64() < p.burst {
		copies = 2 + s.rng.IntN(3)
	}
	due := s.h.now.Add(time.Duration(s.rng.Int64N(int64(p.delay) + 1)))
	dup := s.rng.Float64() < p.dup
	for c := range copies {
		s.schedule(&attempt{due: due, t: t, ev: ev, delivery: fmt.Sprintf("dlv_%d_%d", ev.Seq, c), n: 1, dup: dup && c == 0})
	}
}

func (s *sender) schedule(a *attempt) {
	s.seq++
	a.seq = s.seq
	i := sort.Search(len(s.queue), func(i int) bool {
		q := s.queue[i]
		return q.due.After(a.due) || (q.due.Equal(a.due) && q.seq > a.seq)
	})
	s.queue = slices.Insert(s.queue, i, a)
}

// due takes the attempts due now and signs them.
func (s *sender) due() []*attempt {
	n := 0
	for n < len(s.queue) && !s.queue[n].due.After(s.h.now) {
		n++
	}
	out := slices.Clone(s.queue[:n])
	s.queue = s.queue[n:]
	for _, a := range out {
		body, err := a.t.Flavour.Body(a.ev, a.delivery)
		if err != nil {
			s.h.fatalf("render %s: %v", a.ev.ID, err)
		}
		hdr, err := a.t.Flavour.Sign(a.t.Secrets(), a.ev, a.delivery, body, provClock{s.h}.Now())
		if err != nil {
			s.h.fatalf("sign %s: %v", a.ev.ID, err)
		}
		a.body, a.header = body, hdr
	}
	return out
}

// answered schedules what follows an attempt: a retry (up to 8 attempts,
// then the delivery gives up and only the events API finds the event), or
// the duplicate delivery of an acknowledged one.
func (s *sender) answered(a *attempt, ok bool) {
	switch {
	case ok && a.dup:
		s.schedule(&attempt{due: s.h.now.Add(time.Duration(1 + s.rng.Int64N(int64(30*time.Minute)))), t: a.t, ev: a.ev,
			delivery: a.delivery + "_dup", n: 1})
	case ok:
	case a.n < 8:
		s.schedule(&attempt{due: s.h.now.Add(time.Duration(30<<(a.n-1)) * time.Second), t: a.t, ev: a.ev,
			delivery: a.delivery, n: a.n + 1, dup: a.dup})
	}
}

func (s *sender) Log(string) []deliver.Attempt { return nil }

func (s *sender) Resend(string, deliver.Target) error { return errors.New("dst: no resend") }

// checkAlways checks what holds at every instant, crashes included:
// every event answered 2xx is stored, and nothing is stored twice.
func (h *harness) checkAlways(when string) {
	stored := map[string]bool{}
	evs, err := checkdb.Receiver{DB: h.db, Source: sourceName}.Events(h.ctx)
	if err != nil {
		h.fatalf("%s: list events: %v", when, err)
	}
	for _, ev := range evs {
		if stored[ev.EventID] {
			h.fatalf("%s: event %s stored twice", when, ev.EventID)
		}
		stored[ev.EventID] = true
	}
	for id := range h.acked {
		if !stored[id] {
			h.fatalf("%s: event %s was answered 2xx and is not stored", when, id)
		}
	}
	h.checkFacts(when, false)
	h.checkWaiting(when)
	for _, q := range doubled {
		var what string
		var n int
		err := h.db.SQL.QueryRowContext(h.ctx, q).Scan(&what, &n)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			h.fatalf("%s: %s: %v", when, q, err)
		}
		h.fatalf("%s: %s %d times (%s)", when, what, n, q)
	}
}

// checkWaiting checks that every event still waiting to be processed
// has a job that will run it: an event is stored with its job, put back
// to received with one (a replay), and a batch leaves the jobs of the
// events it does not apply as they were. The sweep would find an event
// left without one, SweepAge later: that it does not have to is checked
// here.
func (h *harness) checkWaiting(when string) {
	jobEvent := `CAST(j.args->>'event_id' AS BIGINT)`
	if h.op.engine == store.SQLite {
		jobEvent = `json_extract(j.args, '$.event_id')`
	}
	var id string
	err := h.db.SQL.QueryRowContext(h.ctx, `SELECT e.event_id FROM payhook_events e
		WHERE e.status = 'received' AND NOT EXISTS (SELECT 1 FROM river_job j
			WHERE j.kind = 'payhook_process_event' AND `+jobEvent+` = e.id
				AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled'))
		ORDER BY e.id LIMIT 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return
	}
	if err != nil {
		h.fatalf("%s: events waiting without a job: %v", when, err)
	}
	h.fatalf("%s: event %s is waiting to be processed and has no job that will run it", when, id)
}

// doubled are queries that find what was applied twice: each returns a
// row (what, count) for the first thing doubled.
var doubled = []string{
	`SELECT source || ' ' || event_id, count(*) FROM payhook_events GROUP BY source, event_id HAVING count(*) > 1 LIMIT 1`,
	`SELECT source || ' ' || ref, count(*) FROM payhook_payments GROUP BY source, ref HAVING count(*) > 1 LIMIT 1`,
	`SELECT source || ' ' || fact_key, count(*) FROM payhook_ledger_postings GROUP BY source, fact_key HAVING count(*) > 1 LIMIT 1`,
	// A fact once per business fact: its id, and its (type, subject) for
	// the types whose key is the subject.
	`SELECT fact_id, count(*) FROM payhook_facts GROUP BY fact_id HAVING count(*) > 1 LIMIT 1`,
	`SELECT type || ' ' || subject, count(*) FROM payhook_facts WHERE type NOT IN ('subscription.updated', 'alert.raised')
		GROUP BY source, type, subject HAVING count(*) > 1 LIMIT 1`,
	`SELECT 'delivery of fact ' || fact || ' to ' || sink, count(*) FROM payhook_deliveries GROUP BY fact, sink HAVING count(*) > 1 LIMIT 1`,
}

// checkFinal checks a settled run: checkAlways, every acked event
// processed within the bound, and the billing state equal to the
// provider's (sim/check: events, payments, orders, subscriptions, a
// ledger summing to zero).
func (h *harness) checkFinal(exp sim.Expected) {
	h.checkAlways("at the end")
	h.checkFacts("at the end", true)
	evs, err := checkdb.Receiver{DB: h.db, Source: sourceName}.Events(h.ctx)
	if err != nil {
		h.fatalf("list events: %v", err)
	}
	byID := map[string]*payhook.Event{}
	for _, ev := range evs {
		byID[ev.EventID] = ev
	}
	for _, e := range exp.Events {
		at, ok := h.acked[e.ID]
		ev := byID[e.StoredID]
		if !ok || ev == nil || ev.Status != payhook.StatusProcessed {
			continue
		}
		if took := ev.ProcessedAt.Sub(at); took > bound {
			h.fatalf("event %s processed %s after its first 2xx; the bound is %s", e.StoredID, took, bound)
		}
	}
	h.checkJobs(evs)
	diffs, err := check.Compare(h.ctx, checkdb.Receiver{DB: h.db, Source: sourceName}, exp)
	if err != nil {
		h.fatalf("compare with the provider: %v", err)
	}
	if len(diffs) > 0 {
		lines := make([]string, len(diffs))
		for i, d := range diffs {
			lines[i] = d.String()
		}
		h.fatalf("%d differences with the provider's state:\n%s", len(diffs), strings.Join(lines, "\n"))
	}
}

// checkJobs checks that no event's job failed for good while its event
// was processed: a job run again (rescued after a crash) must find its
// event claimed already and change nothing.
func (h *harness) checkJobs(evs []*payhook.Event) {
	byRow := map[int64]*payhook.Event{}
	for _, ev := range evs {
		byRow[ev.ID] = ev
	}
	rows, err := h.db.SQL.QueryContext(h.ctx, `SELECT id, args FROM river_job
		WHERE kind = 'payhook_process_event' AND state = 'discarded' ORDER BY id`)
	if err != nil {
		h.fatalf("list discarded jobs: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var args []byte
		if err := rows.Scan(&id, &args); err != nil {
			h.fatalf("list discarded jobs: %v", err)
		}
		var a struct {
			EventID int64 `json:"event_id"`
		}
		json.Unmarshal(args, &a)
		if ev := byRow[a.EventID]; ev != nil && ev.Status != payhook.StatusFailed {
			h.fatalf("job %d of event %s (%s) failed every attempt: a run of a processed event did not find it claimed",
				id, ev.EventID, ev.Status)
		}
	}
}

// unhashed are the tables left out of the digest: migration bookkeeping,
// stamped with the database's clock when the template was made, and
// River's SQLite stand-in for NOTIFY, whose created_at is a column
// default, datetime('now'), that River's Test.Time does not reach (River
// v0.51.2; payhook never listens, its rows are nobody's state).
var unhashed = map[string]bool{"payhook_schema_migrations": true, "river_migration": true, "payhook_ready": true,
	"river_notification": true}

// digest hashes every row of every table, in row id order: on SQLite two
// runs of one seed give the same one.
func (h *harness) digest() (string, string) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
	if h.op.engine == store.Postgres {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
	}
	var tables []string
	rows, err := h.db.SQL.QueryContext(h.ctx, q)
	if err != nil {
		h.fatalf("digest: %v", err)
	}
	for rows.Next() {
		var name string
		rows.Scan(&name)
		if !unhashed[name] && !strings.HasPrefix(name, "sqlite_") {
			tables = append(tables, name)
		}
	}
	rows.Close()
	var all strings.Builder
	for _, table := range tables {
		order := "rowid"
		if h.op.engine == store.Postgres {
			order = "1"
		}
		rows, err := h.db.SQL.QueryContext(h.ctx, `SELECT * FROM `+table+` ORDER BY `+order)
		if err != nil {
			h.fatalf("digest %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		fmt.Fprintf(&all, "table %s\n", table)
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				h.fatalf("digest %s: %v", table, err)
			}
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				fmt.Fprintf(&all, "%v|", v)
			}
			all.WriteByte('\n')
		}
		rows.Close()
	}
	sum := sha256.Sum256([]byte(all.String()))
	return hex.EncodeToString(sum[:]), all.String()
}

// business describes the final state by business ids: the events with
// their status, and what sim/check compares, as one string that both
// engines must agree on for one seed.
func (h *harness) business(exp sim.Expected) string {
	r := checkdb.Receiver{DB: h.db, Source: sourceName}
	var b strings.Builder
	evs, _ := r.Events(h.ctx)
	slices.SortFunc(evs, func(a, b *payhook.Event) int { return cmp.Compare(a.EventID, b.EventID) })
	for _, ev := range evs {
		fmt.Fprintf(&b, "event %s %s %s\n", ev.EventID, ev.Type, ev.Status)
	}
	for _, p := range exp.Payments {
		got, err := r.Payment(h.ctx, p.ID)
		fmt.Fprintf(&b, "payment %s %+v %v\n", p.ID, got, err)
	}
	for _, o := range exp.Orders {
		got, err := r.Order(h.ctx, o.ID)
		fmt.Fprintf(&b, "order %s %+v %v\n", o.ID, got, err)
	}
	for _, s := range exp.Subscriptions {
		got, err := r.Subscription(h.ctx, s.ID)
		fmt.Fprintf(&b, "subscription %s %s %s %v %v\n", s.ID, got.Status, got.Plan, got.Ended, err)
	}
	bal, _ := r.Balances(h.ctx)
	for _, cur := range slices.Sorted(maps.Keys(bal)) {
		fmt.Fprintf(&b, "balance %s %+v\n", cur, bal[cur])
	}
	return b.String()
}
