// Package bench is payhook's load generator: it sends validly signed
// webhook deliveries to a target at a fixed concurrency (closed loop: each
// of C senders sends its next delivery when the last one is answered) or
// at a fixed rate (open loop: deliveries leave on a schedule, whatever
// the answers), and measures what a provider would see: acknowledgements
// per second, the latency of each acknowledgement, errors by status, and,
// when the target's database is given, how long until every acknowledged
// event has been processed (the drain).
//
// Every run of a Phase sends Events distinct events, each once, and
// Duplicates deliveries that repeat one of them, spread evenly among the
// others: a provider's retries. A payhook target answers both 200 and
// stores each event once.
//
// In rate mode a delivery's latency counts from the moment the schedule
// said it should leave, not from when it left, so a target that falls
// behind is charged for the wait (no coordinated omission). Percentiles
// are exact: every latency is kept and sorted.
//
// The generator is built in rather than taken from a load library: it
// needs a closed-loop mode, exact p99.9 and per-delivery signing, and
// this is less code than adapting one that has none of them.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Target is what a phase sends to.
type Target struct {
	// Name labels the target in results ("floor", "sqlite", ...).
	Name string
	// URL is the webhook URL deliveries are posted to.
	URL string
	// URLs, if set, replaces URL with several: each delivery goes to the
	// next in turn, as a load balancer spreads a provider's deliveries
	// over several instances of one payhook.
	URLs []string
	// DB, if set, is the target's database (payhook's schema, on either
	// engine): Run then waits for the drain and counts the events stored.
	// Nil (the floor, a target given only by URL) skips both.
	DB *sql.DB
	// Source is the source name the target stores events under; needed
	// with DB.
	Source string
	// Metrics, if set, is the URL of the target's /metrics (one payhook
	// instance's): Run reads its group commits' time before and after the
	// deliveries, for Result.InCommits.
	Metrics string
	// Release, if set with DB, starts the target's processing, held until
	// then: Run calls it once every delivery of the load is answered, so
	// that the drain that follows measures processing alone, with no
	// delivery to acknowledge (Result.ProcessedAlone). Called at most
	// once: a held target takes one load.
	Release func()
}

// Phase is one load applied to a target.
type Phase struct {
	// Provider is whose deliveries are sent: stripe, paddle, standard or
	// billete (Providers).
	Provider string
	// Kind is the event sent (Kinds); "" is a completed checkout.
	Kind string
	// Secret signs the deliveries; the target's source must hold it.
	Secret string
	// Events is how many distinct events are sent. Must be positive.
	Events int
	// Duplicates is how many more deliveries repeat an event already
	// sent; 0 or more.
	Duplicates int
	// Concurrency, if positive, is the number of closed-loop senders.
	Concurrency int
	// Rate, if positive, is the deliveries per second of the open loop.
	// Exactly one of Concurrency and Rate is set.
	Rate float64
	// Timeout bounds one delivery. Default 30 s.
	Timeout time.Duration
	// Interval is the width of a Timeline sample. Default 1 s.
	Interval time.Duration
	// Stall is how long the drain may see no progress before Run gives
	// up waiting for it. Default 1 min.
	Stall time.Duration
	// Progress, if set, is called with the number of deliveries answered
	// so far, from any goroutine, then once with the total.
	Progress func(done int)
	// Client sends the deliveries. Default: a client keeping enough idle
	// connections for the concurrency.
	Client *http.Client
}

// Latency holds the percentiles of the acknowledgements' latencies.
type Latency struct {
	P50  time.Duration `json:"p50"`
	P90  time.Duration `json:"p90"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p99_9"`
	Max  time.Duration `json:"max"`
}

// Sample is one interval of a run.
type Sample struct {
	// At is the interval's end, from the start of the run.
	At time.Duration `json:"at"`
	// AcksPerSec is the acknowledgements answered in the interval, per second.
	AcksPerSec float64 `json:"acks_per_sec"`
	// P99 is the 99th percentile of their latencies (0 when there were none).
	P99 time.Duration `json:"p99"`
}

// Result is what one phase measured.
type Result struct {
	Target      string  `json:"target"`
	Provider    string  `json:"provider"`
	Kind        string  `json:"kind,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	// Sent counts the deliveries sent: Events + Duplicates.
	Sent       int `json:"sent"`
	Events     int `json:"events"`
	Duplicates int `json:"duplicates"`
	// Acked counts the deliveries answered 2xx.
	Acked int `json:"acked"`
	// AckedEvents counts the distinct events with a delivery answered 2xx:
	// each must be stored once.
	AckedEvents int `json:"acked_events"`
	// Errors counts the other answers by status code, and deliveries that
	// got no answer under "transport".
	Errors map[string]int `json:"errors,omitempty"`
	// Elapsed runs from the first delivery to the last answer.
	Elapsed    time.Duration `json:"elapsed"`
	AcksPerSec float64       `json:"acks_per_sec"`
	Latency    Latency       `json:"latency"`
	// Stored counts the events of this phase in the target's database,
	// -1 without one.
	Stored int `json:"stored"`
	// Drain runs from the first delivery until no event of the source was
	// waiting to be processed; 0 without a database.
	Drain time.Duration `json:"drain,omitempty"`
	// HeldWaiting and ProcessedAlone are measured with Target.Release:
	// the events waiting when processing was released, and how many of
	// them were processed per second from then until none waited.
	HeldWaiting    int64   `json:"held_waiting,omitempty"`
	ProcessedAlone float64 `json:"processed_alone_per_sec,omitempty"`
	// InCommits is the time the target spent in its group commits per
	// second of Elapsed (payhook_groupcommit_commit_duration_seconds),
	// with Target.Metrics; 0 without. Near the number of its committers
	// (1 on SQLite, 3 on PostgreSQL) they never rest: only bigger batches
	// or cheaper commits acknowledge more.
	InCommits float64 `json:"in_commits,omitempty"`
	// LoadAvg is the machine's load average when the phase ended, if the
	// caller records it: figures from a busy machine are noisier.
	LoadAvg string `json:"load_avg,omitempty"`
	// VsFloor holds the figures as ratios of the floor's (Compare).
	VsFloor *Ratios `json:"vs_floor,omitempty"`
	// Timeline has one sample per Interval.
	Timeline []Sample `json:"timeline"`
}

// answer is what one delivery got.
type answer struct {
	end    time.Duration // when the answer came, from the start
	lat    time.Duration
	status int // 0: no answer
}

// Run applies the phase to the target and returns what it measured. Each
// Run uses fresh event ids, so phases can follow one another against the
// same database. It returns an error for an invalid phase, when the
// context ends, or when the drain stalls; errors of single deliveries are
// counted in the result, not returned.
func Run(ctx context.Context, t Target, p Phase) (*Result, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if t.URL == "" && len(t.URLs) == 0 {
		return nil, fmt.Errorf("bench: target %s has no URL", t.Name)
	}
	if t.DB != nil && t.Source == "" {
		return nil, fmt.Errorf("bench: target %s has a database but no source", t.Name)
	}
	if t.Release != nil && t.DB == nil {
		return nil, fmt.Errorf("bench: target %s holds its processing but has no database to drain", t.Name)
	}
	p.Timeout = cmpOr(p.Timeout, 30*time.Second)
	p.Interval = cmpOr(p.Interval, time.Second)
	p.Stall = cmpOr(p.Stall, time.Minute)
	client := p.Client
	if client == nil {
		conns := max(p.Concurrency, 256)
		client = &http.Client{Transport: &http.Transport{
			MaxIdleConns: conns, MaxIdleConnsPerHost: conns, DisableCompression: true, IdleConnTimeout: time.Minute,
		}}
	}
	gen, err := newEvents(p.Provider, p.Kind, p.Secret, time.Now())
	if err != nil {
		return nil, err
	}
	var commits0 float64
	if t.Metrics != "" {
		if commits0, err = commitSeconds(ctx, client, t.Metrics); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", t.Name, err)
		}
	}
	prefix := runPrefix()
	ids := order(p.Events, p.Duplicates)
	answers := make([]answer, len(ids))
	var done atomic.Int64
	start := time.Now()

	send := func(i int, due time.Time) {
		id := eventID(prefix, ids[i])
		body := gen.body(id)
		status := 0
		h, err := gen.sign(id, body, time.Now())
		if err == nil {
			url := t.URL
			if len(t.URLs) > 0 {
				url = t.URLs[i%len(t.URLs)]
			}
			status = post(ctx, client, url, h, body, p.Timeout)
		}
		now := time.Now()
		answers[i] = answer{end: now.Sub(start), lat: now.Sub(due), status: status}
		if n := done.Add(1); p.Progress != nil {
			p.Progress(int(n))
		}
	}
	if p.Concurrency > 0 {
		closedLoop(ctx, len(ids), p.Concurrency, send)
	} else {
		openLoop(ctx, len(ids), p.Rate, start, send)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", t.Name, err)
	}
	res := summarize(answers, p.Interval)
	if t.Metrics != "" && res.Elapsed > 0 {
		commits, err := commitSeconds(ctx, client, t.Metrics)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", t.Name, err)
		}
		res.InCommits = (commits - commits0) / res.Elapsed.Seconds()
	}
	acked := make(map[int]bool, p.Events)
	for i, a := range answers {
		if a.status/100 == 2 {
			acked[ids[i]] = true
		}
	}
	res.AckedEvents = len(acked)
	res.Target, res.Provider, res.Kind, res.Concurrency, res.Rate = t.Name, p.Provider, p.Kind, p.Concurrency, p.Rate
	res.Sent, res.Events, res.Duplicates, res.Stored = len(ids), p.Events, p.Duplicates, -1
	if t.Release != nil {
		if err := processAlone(ctx, t, p.Stall, res); err != nil {
			return res, err
		}
	}
	if t.DB != nil {
		if res.Drain, err = drain(ctx, t.DB, t.Source, start, p.Stall); err != nil {
			return res, err
		}
		if res.Stored, err = stored(ctx, t.DB, t.Source, prefix); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (p *Phase) check() error {
	switch {
	case p.Events <= 0:
		return fmt.Errorf("bench: events must be positive, not %d", p.Events)
	case p.Duplicates < 0:
		return fmt.Errorf("bench: duplicates must be 0 or more, not %d", p.Duplicates)
	case (p.Concurrency > 0) == (p.Rate > 0):
		return fmt.Errorf("bench: give a positive concurrency or a positive rate, not both (concurrency %d, rate %g)", p.Concurrency, p.Rate)
	case p.Concurrency < 0 || p.Rate < 0:
		return fmt.Errorf("bench: concurrency and rate cannot be negative")
	}
	return nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// runPrefix returns 8 random hex digits that set a run's event ids apart.
func runPrefix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// order returns the event numbers in the order they are sent: 0..events-1
// with duplicates repeats spread evenly among them, each repeating an
// event sent a while before (half-way back), as a provider's retry does.
func order(events, duplicates int) []int {
	out := make([]int, 0, events+duplicates)
	next := 0
	for d := range duplicates + 1 {
		// Events up to the d-th duplicate's place.
		for until := (d + 1) * events / (duplicates + 1); next < until; next++ {
			out = append(out, next)
		}
		if d < duplicates {
			out = append(out, next/2)
		}
	}
	return out
}

// post sends one delivery and returns the answer's status, 0 if none.
func post(ctx context.Context, client *http.Client, url string, h http.Header, body []byte, timeout time.Duration) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header = h
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// commitSeconds reads payhook_groupcommit_commit_duration_seconds_sum,
// the seconds a payhook instance has spent in its group commits, from its
// metrics at url (Prometheus' text format).
func commitSeconds(ctx context.Context, client *http.Client, url string) (float64, error) {
	const name = "payhook_groupcommit_commit_duration_seconds_sum"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read %s: status %d", url, resp.StatusCode)
	}
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	for line := range bytes.Lines(text) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(name+" ")); ok {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return 0, fmt.Errorf("read %s: %s: %w", url, name, err)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("read %s: no %s (not a payhook, or one older than this bench)", url, name)
}

// closedLoop runs send for 0..n-1 from c goroutines, each taking the next
// number when its last send returned.
func closedLoop(ctx context.Context, n, c int, send func(i int, due time.Time)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				send(i, time.Now())
			}
		})
	}
	wg.Wait()
}

// maxInFlight bounds the open loop's outstanding deliveries; past it the
// schedule waits, and the waiting counts in the latencies.
const maxInFlight = 10000

// openLoop runs send(i) at start + i/rate, each in its own goroutine.
func openLoop(ctx context.Context, n int, rate float64, start time.Time, send func(i int, due time.Time)) {
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	for i := 0; i < n && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			send(i, due)
		})
	}
	wg.Wait()
}

// summarize computes a phase's figures from its answers.
func summarize(answers []answer, interval time.Duration) *Result {
	res := &Result{Errors: map[string]int{}}
	var lats []time.Duration
	var last time.Duration
	buckets := map[int][]time.Duration{}
	for _, a := range answers {
		last = max(last, a.end)
		switch {
		case a.status/100 == 2:
			res.Acked++
			lats = append(lats, a.lat)
			b := int(a.end / interval)
			buckets[b] = append(buckets[b], a.lat)
		case a.status == 0:
			res.Errors["transport"]++
		default:
			res.Errors[strconv.Itoa(a.status)]++
		}
	}
	res.Elapsed = last
	if last > 0 {
		res.AcksPerSec = float64(res.Acked) / last.Seconds()
	}
	slices.Sort(lats)
	res.Latency = Latency{P50: quantile(lats, 0.50), P90: quantile(lats, 0.90), P99: quantile(lats, 0.99),
		P999: quantile(lats, 0.999), Max: quantile(lats, 1)}
	for b := 0; b <= int(last/interval); b++ {
		l := buckets[b]
		slices.Sort(l)
		res.Timeline = append(res.Timeline, Sample{At: time.Duration(b+1) * interval,
			AcksPerSec: float64(len(l)) / interval.Seconds(), P99: quantile(l, 0.99)})
	}
	return res
}

// quantile returns the q-quantile of sorted (nearest rank), 0 if empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// drain waits until no event of source waits to be processed and returns
// how long after start that was seen. It gives up when the number waiting
// has not moved for stall. It probes with a LIMIT 1 query every 20 ms
// and counts the waiting events only once a second, for the stall check
// (a COUNT(*) every 20 ms cost the server a sixth of a drain), less
// often as the drain goes on (see drainLoop).
//
// Both look only at ids from the oldest one waiting at the last probe:
// every delivery has been answered, so no event below it can wait again
// (but for a replay, which a bench does not make). On PostgreSQL an index
// keeps the entries of the events processed since its last vacuum, and a
// probe from the first id walked them all: 9.5 ms each, 5% of the
// server's time in a drain of 20,000 events.
func drain(ctx context.Context, db *sql.DB, source string, start time.Time, stall time.Duration) (time.Duration, error) {
	waiting, count := probes(db, source)
	return drainLoop(ctx, start, stall, 20*time.Millisecond, time.Second, source, waiting, count)
}

// probes returns drain's probe, which reports whether an event of source
// waits, and its count of them. The probe asks for the oldest event
// waiting of any source first, on the index of unprocessed events; only
// when that one is another source's does it look for source's own. With
// source in the first query, PostgreSQL planned it as two bitmap scans
// (the (source, id) index and the received one) over every event from
// the first: 8–16 ms a probe, a third of a core of the server's during a
// held drain of 20,000 events, which the processing measured lost.
func probes(db *sql.DB, source string) (waiting func(context.Context) (bool, error), count func(context.Context) (int64, error)) {
	var from int64 // no event of source below it waits
	waiting = func(ctx context.Context) (bool, error) {
		var of string
		err := db.QueryRowContext(ctx, `SELECT id, source FROM payhook_events
			WHERE status = 'received' AND id >= $1 ORDER BY status, id LIMIT 1`, from).Scan(&from, &of)
		if err == nil && of != source {
			err = db.QueryRowContext(ctx, `SELECT id FROM payhook_events
				WHERE source = $1 AND status = 'received' AND id >= $2 ORDER BY id LIMIT 1`, source, from).Scan(&from)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("bench: probe waiting events: %w", err)
		}
		return true, nil
	}
	count = func(ctx context.Context) (int64, error) {
		var n int64
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_events WHERE source = $1 AND status = 'received' AND id >= $2`,
			source, from).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("bench: count waiting events: %w", err)
		}
		return n, nil
	}
	return waiting, count
}

// drainLoop is drain's loop: it asks waiting every poll until it says no,
// and count at most every countEvery; it fails when count has returned
// the same number for longer than stall. Both intervals grow with the
// time since start (a hundredth of it for poll, up to a second; a
// twentieth for countEvery, up to 30 s), so that probing costs the server
// the same small share of a long drain as of a short one, for a drain
// time within 1%: on a database of a million events a COUNT(*) scans
// them all, and a probe planned before the table grew may too.
func drainLoop(ctx context.Context, start time.Time, stall, poll, countEvery time.Duration, source string,
	waiting func(context.Context) (bool, error), count func(context.Context) (int64, error)) (time.Duration, error) {
	last, moved, counted := int64(-1), time.Now(), time.Time{}
	grown := func(least, most time.Duration, share int64) time.Duration {
		return max(least, min(most, time.Since(start)/time.Duration(share)))
	}
	for {
		w, err := waiting(ctx)
		if err != nil {
			return 0, err
		}
		if !w {
			return time.Since(start), nil
		}
		if time.Since(counted) >= grown(countEvery, 30*time.Second, 20) {
			n, err := count(ctx)
			if err != nil {
				return 0, err
			}
			counted = time.Now()
			if n != last {
				last, moved = n, counted
			}
			if time.Since(moved) > stall {
				return 0, fmt.Errorf("bench: drain stalled: %d events of %s still waiting after %s without progress", n, source, stall)
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("bench: drain: %w", ctx.Err())
		case <-time.After(grown(poll, time.Second, 100)):
		}
	}
}

// processAlone releases t's processing, held while the load was
// answered, and measures how fast it works off the events then waiting:
// res.HeldWaiting of them over the time until none waits.
func processAlone(ctx context.Context, t Target, stall time.Duration, res *Result) error {
	err := t.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_events WHERE source = $1 AND status = 'received'`,
		t.Source).Scan(&res.HeldWaiting)
	if err != nil {
		return fmt.Errorf("bench: %s: count the events held: %w", t.Name, err)
	}
	released := time.Now()
	t.Release()
	took, err := drain(ctx, t.DB, t.Source, released, stall)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", t.Name, err)
	}
	if took > 0 {
		res.ProcessedAlone = float64(res.HeldWaiting) / took.Seconds()
	}
	return nil
}

// stored counts the events of source whose ids start with the run's prefix.
func stored(ctx context.Context, db *sql.DB, source, prefix string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_events WHERE source = $1 AND event_id LIKE $2`,
		source, "evt_"+prefix+"%").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("bench: count stored events: %w", err)
	}
	return n, nil
}
