package deliver

import (
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/payhook/payhook/sim/flavour"
)

// DefaultSchedule is the retry schedule used when Config.Schedule is nil:
// the delays before the 2nd, 3rd, ... attempt of a delivery. Ten attempts
// in all, with increasing spacing, the last one 41 hours after the first:
//
//	1m, 5m, 30m, 1h, 2h, 4h, 8h, 12h, 13h24m   (sum: 41h)
//
// After the last retry fails the delivery gives up.
var DefaultSchedule = []time.Duration{
	time.Minute,
	5 * time.Minute,
	30 * time.Minute,
	time.Hour,
	2 * time.Hour,
	4 * time.Hour,
	8 * time.Hour,
	12 * time.Hour,
	13*time.Hour + 24*time.Minute,
}

// Defaults of Config.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultFailingAfter = 5
	DefaultBurstSize    = 5
	// ResponseExcerpt is how many bytes of an answer the log keeps.
	ResponseExcerpt = 256
)

// A long-running dispatcher (payhook sim serve) keeps bounded memory: the
// last KeepAttempts attempts per endpoint in its log, and the last
// KeepDeliveries deliveries for Resend (an older one is unknown).
const (
	KeepAttempts   = 10_000
	KeepDeliveries = 50_000
)

// ReorderHold is how long, on the dispatcher's clock and not scaled, a
// reorder window that does not fill waits before it is released.
const ReorderHold = 200 * time.Millisecond

// OutageError is the Attempt.Error of an attempt failed by an outage window.
const OutageError = "outage: target down"

// Errors of the dispatcher.
var (
	ErrUnknownDelivery = errors.New("deliver: unknown delivery")
	ErrClosed          = errors.New("deliver: dispatcher closed")
)

// Config configures a Dispatcher. The zero value is usable: the default
// schedule in real time, 10 s timeout, no faults.
type Config struct {
	// Schedule is the delays between attempts after the first: retry n
	// waits Schedule[n-1] after attempt n ended; after the last the
	// delivery gives up. nil means DefaultSchedule (about 41 hours); an
	// empty non-nil slice means a single attempt, no retries.
	Schedule []time.Duration
	// TimeScale divides every delay: the schedule, Faults.Delay and the
	// Faults.Outages windows.
	// 0 or 1 is real time; 10000 runs the 41 hours of DefaultSchedule in
	// about 15 s.
	TimeScale float64
	// Timeout is how long an attempt waits for an answer; a non-2xx
	// answer or none within it is a failure. Default 10 s. Not scaled.
	Timeout time.Duration
	// FailingAfter consecutive failed attempts to one endpoint mark it
	// failing and raise an alert (logged at Error, and OnAlert). A later
	// success clears it. Default 5.
	FailingAfter int
	// Faults are the faults injected on purpose.
	Faults Faults
	// Seed seeds every random draw (math/rand/v2 PCG): the same seed and
	// the same order of Send calls give the same decisions (drops, delays,
	// bursts, duplicates, reordering).
	Seed int64
	// Client sends the POSTs. Default: a client with Timeout that does not
	// follow redirects (a 3xx is a failure). A Client given here should not
	// follow redirects either; Timeout is applied to each attempt anyway.
	Client *http.Client
	// Logger receives the dispatcher's logs. Default slog.Default().
	Logger *slog.Logger
	// OnAlert, if set, is called when an endpoint becomes failing (once
	// per transition). It must not call back into the Dispatcher's Close.
	OnAlert func(endpointID, message string)
	// Rand is where the delivery ids' prefix, unique per dispatcher, is
	// drawn from (everything else is drawn from Seed). Default
	// crypto/rand; a simulation gives one seeded by its run.
	Rand io.Reader
	// Clock is the time the dispatcher reads and waits on (see Clock).
	// nil means the real one, RealClock.
	Clock Clock
	// Now is the clock for signing timestamps and Attempt.At. It is not
	// scaled by TimeScale, since receivers check the timestamp's
	// tolerance. Default Clock.Now.
	Now func() time.Time
}

// Dispatcher delivers events to targets at least once, with retries and
// injected faults. Its methods are safe for concurrent use.
type Dispatcher struct {
	cfg    Config
	scale  float64
	client *http.Client
	owned  *http.Transport // the default client's transport, closed by Close
	log    *slog.Logger
	start  time.Time // the first attempt, where outage windows are measured from
	prefix string    // of delivery ids

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	rng *rand.Rand
	// shuffler orders the reorder windows: a window released half full by
	// its timer (on a slow machine) must not shift the draws of rng.
	shuffler   *rand.Rand
	closed     bool
	timers     map[uint64]Timer
	nextTimer  uint64
	seq        uint64
	pending    int           // delivery series running or scheduled
	idle       chan struct{} // closed while pending == 0
	windows    map[string][]*item
	deliveries map[string]*delivery
	issued     []string // delivery ids, oldest first, to forget the oldest
	logs       map[string][]Attempt
	consec     map[string]int
	failing    map[string]bool
	delivered  map[string]bool
	stats      Stats
}

// item is one Send: an event to a target with its drawn decisions.
type item struct {
	target    Target
	ev        flavour.Event
	delay     time.Duration // scaled
	burst     bool
	duplicate bool // a duplicate is still to be injected after the first success
}

// delivery is one delivery of an item (the original, a burst copy or a
// duplicate); its attempts share its id.
type delivery struct {
	id    string
	it    *item
	fault string
	n     int // attempts made so far, all series together
}

// series is one run of a delivery through the schedule (the first one, or
// a resend).
type series struct {
	dl    *delivery
	fault string
	to    *Target // a resend's target, the endpoint as it is now; nil: the item's
	k     int     // attempts made in this series
}

// New returns a dispatcher. Outage windows count from its first attempt.
func New(cfg Config) *Dispatcher {
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	cfg.Schedule = append([]time.Duration(nil), cfg.Schedule...)
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.FailingAfter <= 0 {
		cfg.FailingAfter = DefaultFailingAfter
	}
	if cfg.Faults.BurstSize <= 0 {
		cfg.Faults.BurstSize = DefaultBurstSize
	}
	cfg.Faults.Outages = append([]Outage(nil), cfg.Faults.Outages...)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Clock.Now
	}
	d := &Dispatcher{
		cfg:        cfg,
		scale:      cfg.TimeScale,
		client:     cfg.Client,
		log:        cfg.Logger,
		prefix:     idPrefix(cmp.Or[io.Reader](cfg.Rand, crand.Reader)), // not from Seed: unique per dispatcher
		rng:        rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(cfg.Seed)^0x9e3779b97f4a7c15)),
		shuffler:   rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(cfg.Seed)^0x5bd1e9955bd1e995)),
		timers:     map[uint64]Timer{},
		idle:       make(chan struct{}),
		windows:    map[string][]*item{},
		deliveries: map[string]*delivery{},
		logs:       map[string][]Attempt{},
		consec:     map[string]int{},
		failing:    map[string]bool{},
		delivered:  map[string]bool{},
	}
	close(d.idle)
	if d.scale <= 0 {
		d.scale = 1
	}
	if d.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		d.owned = tr
		d.client = &http.Client{
			Transport: tr,
			Timeout:   cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

func (d *Dispatcher) scaled(x time.Duration) time.Duration {
	return time.Duration(float64(x) / d.scale)
}

// Send schedules the delivery of ev to t and returns at once. The fault
// decisions (drop, delay, burst, duplicate) are drawn here, in Send order;
// with a reorder window the event waits in t's window until the window is
// full (or Wait flushes it), and the window is released in a shuffled
// order, the first attempts one after the other.
func (d *Dispatcher) Send(t Target, ev flavour.Event) {
	f := d.cfg.Faults
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.log.Warn("deliver: send after close", "endpoint", t.ID, "event", ev.ID)
		return
	}
	d.stats.Events++
	// Always four draws per Send, whatever the outcome, so that one
	// decision does not shift the others.
	drop := d.rng.Float64() < f.Drop
	delay := d.scaled(time.Duration(d.rng.Float64() * float64(f.Delay)))
	burst := d.rng.Float64() < f.Burst
	dup := d.rng.Float64() < f.Duplicate
	if drop {
		d.stats.Dropped++
		d.mu.Unlock()
		d.log.Info("deliver: dropped on purpose", "endpoint", t.ID, "event", ev.ID, "type", ev.Type)
		return
	}
	it := &item{target: t, ev: ev, delay: delay, burst: burst, duplicate: dup}
	if f.ReorderWindow > 1 {
		w := append(d.windows[t.ID], it)
		if len(w) < f.ReorderWindow {
			d.windows[t.ID] = w
			d.mu.Unlock()
			if len(w) == 1 {
				// A window that does not fill (a quiet provider, as under
				// sim serve) is released all the same after a while.
				d.after(ReorderHold, func() {
					d.mu.Lock()
					defer d.mu.Unlock()
					if cur := d.windows[t.ID]; len(cur) > 0 && cur[0] == it {
						delete(d.windows, t.ID)
						d.releaseLocked(cur)
					}
				})
			}
			return
		}
		delete(d.windows, t.ID)
		d.releaseLocked(w)
		d.mu.Unlock()
		return
	}
	sers := d.beginLocked(it)
	d.mu.Unlock()
	d.launch(it, sers, false)
}

// releaseLocked shuffles a window and starts its items in that order.
func (d *Dispatcher) releaseLocked(w []*item) {
	d.shuffler.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
	all := make([][]*series, len(w))
	for i, it := range w {
		all[i] = d.beginLocked(it)
	}
	d.goLocked(func() {
		for i, it := range w {
			d.launch(it, all[i], true)
		}
	})
}

// flushLocked releases every partial reorder window, in endpoint order.
func (d *Dispatcher) flushLocked() {
	ids := make([]string, 0, len(d.windows))
	for id := range d.windows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		w := d.windows[id]
		delete(d.windows, id)
		d.releaseLocked(w)
	}
}

// beginLocked creates the deliveries of an item (one, or BurstSize for a
// burst) and counts them pending.
func (d *Dispatcher) beginLocked(it *item) []*series {
	n, fault := 1, ""
	if it.burst {
		n, fault = d.cfg.Faults.BurstSize, "burst"
		d.stats.Bursts++
	}
	sers := make([]*series, n)
	for i := range sers {
		dl := d.newDeliveryLocked(it, fault)
		sers[i] = &series{dl: dl, fault: fault}
	}
	d.addPendingLocked(n)
	return sers
}

func (d *Dispatcher) newDeliveryLocked(it *item, fault string) *delivery {
	d.seq++
	dl := &delivery{id: fmt.Sprintf("dlv_%s%08d", d.prefix, d.seq), it: it, fault: fault}
	d.deliveries[dl.id] = dl
	d.issued = append(d.issued, dl.id)
	if len(d.issued) >= 2*KeepDeliveries { // amortised: forget the older half at once
		for _, id := range d.issued[:len(d.issued)-KeepDeliveries] {
			delete(d.deliveries, id)
		}
		d.issued = append([]string(nil), d.issued[len(d.issued)-KeepDeliveries:]...)
	}
	return dl
}

func (d *Dispatcher) addPendingLocked(n int) {
	if d.pending == 0 && n > 0 {
		d.idle = make(chan struct{})
	}
	d.pending += n
	if d.pending == 0 && n < 0 {
		close(d.idle)
	}
}

// launch makes the first attempts of an item's deliveries, after its
// delay. inline (a reorder window's release) makes them in the calling
// goroutine and returns when they are done, so the window's order shows.
func (d *Dispatcher) launch(it *item, sers []*series, inline bool) {
	first := func() {
		if len(sers) == 1 {
			d.run(sers[0])
			return
		}
		var wg sync.WaitGroup // a burst: all copies at once
		for _, s := range sers {
			wg.Add(1)
			if !d.goAsync(func() { defer wg.Done(); d.run(s) }) {
				wg.Done()
			}
		}
		wg.Wait()
	}
	switch {
	case it.delay > 0:
		d.after(it.delay, first)
	case inline:
		first()
	default:
		d.goAsync(first)
	}
}

// goAsync runs f in a goroutine Close waits for; false if closed.
func (d *Dispatcher) goAsync(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.goLocked(f)
}

func (d *Dispatcher) goLocked(f func()) bool {
	if d.closed {
		return false
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
	return true
}

// after runs f after delay on a timer Close stops; false if closed.
func (d *Dispatcher) after(delay time.Duration, f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.wg.Add(1)
	id := d.nextTimer
	d.nextTimer++
	d.timers[id] = d.cfg.Clock.AfterFunc(delay, func() {
		defer d.wg.Done()
		d.mu.Lock()
		delete(d.timers, id)
		closed := d.closed
		d.mu.Unlock()
		if !closed {
			f()
		}
	})
	return true
}

// run makes the next attempt of s and schedules the one after, or ends s.
func (d *Dispatcher) run(s *series) {
	if d.ctx.Err() != nil {
		return
	}
	dl, it := s.dl, s.dl.it
	d.mu.Lock()
	dl.n++
	s.k++
	a := Attempt{
		DeliveryID: dl.id,
		EventID:    it.ev.ID,
		EventType:  it.ev.Type,
		N:          dl.n,
		Fault:      s.fault,
	}
	// The attempt's time is read once, where the first attempt sets the
	// start: the first attempt is at 0 whatever the machine's speed (an
	// outage from 0 always fails it).
	now := d.cfg.Clock.Now()
	if d.start.IsZero() {
		d.start = now
	}
	since := now.Sub(d.start)
	d.mu.Unlock()
	attemptID := fmt.Sprintf("%s_%d", dl.id, a.N)

	a.At = d.cfg.Now()
	if d.inOutage(since) {
		a.Error = OutageError
	} else if !d.post(*cmp.Or(s.to, &it.target), it.ev, attemptID, &a) {
		return // closed while in flight: abandoned, not logged
	}
	d.record(s, a)
}

// inOutage reports whether the clock's time since the start falls in an outage
// window, whose bounds are provider time (divided by the time scale).
func (d *Dispatcher) inOutage(since time.Duration) bool {
	since = time.Duration(float64(since) * d.scale)
	for _, o := range d.cfg.Faults.Outages {
		if since >= o.From && since < o.To {
			return true
		}
	}
	return false
}

// post renders, signs and sends one attempt, filling a. It returns false
// when the dispatcher was closed during the attempt.
func (d *Dispatcher) post(t Target, ev flavour.Event, attemptID string, a *Attempt) bool {
	var secrets []string
	if t.Secrets != nil {
		secrets = t.Secrets()
	}
	body, err := t.Flavour.Body(ev, attemptID)
	if err != nil {
		a.Error = "render: " + err.Error()
		return true
	}
	h, err := t.Flavour.Sign(secrets, ev, attemptID, body, a.At)
	if err != nil {
		a.Error = "sign: " + err.Error()
		return true
	}
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		a.Error = "request: " + err.Error()
		return true
	}
	for k, vs := range h {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Content-Type", "application/json")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "payhook-sim/1 ("+t.Flavour.Name()+")")
	}

	began := d.cfg.Clock.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		a.Latency = d.cfg.Clock.Now().Sub(began)
		if d.ctx.Err() != nil {
			return false
		}
		a.Error = describe(err, d.cfg.Timeout)
		return true
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, ResponseExcerpt))
	a.Latency = d.cfg.Clock.Now().Sub(began)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection can be reused
	_ = resp.Body.Close()
	a.Status = resp.StatusCode
	a.Response = string(excerpt)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		a.Error = fmt.Sprintf("HTTP %d: redirects are not followed", resp.StatusCode)
	default:
		a.Error = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return true
}

// describe says briefly why a request got no answer.
func describe(err error, timeout time.Duration) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("timeout: no answer within %s", timeout)
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// record logs an attempt's outcome and decides what comes next.
func (d *Dispatcher) record(s *series, a Attempt) {
	dl, it := s.dl, s.dl.it
	ep := it.target.ID
	ok := a.Status >= 200 && a.Status < 300 && a.Error == ""
	var (
		alert     string
		dup       []*series
		next      time.Duration
		retry     bool
		recovered bool
		gaveUp    bool
	)

	d.mu.Lock()
	log := append(d.logs[ep], a)
	if len(log) >= 2*KeepAttempts { // amortised: drop the older half at once
		log = append([]Attempt(nil), log[len(log)-KeepAttempts:]...)
	}
	d.logs[ep] = log
	d.stats.Attempts++
	if ok {
		d.stats.Acked++
		d.delivered[it.ev.ID] = true
		d.consec[ep] = 0
		if d.failing[ep] {
			d.failing[ep] = false
			recovered = true
		}
		if it.duplicate {
			it.duplicate = false
			d.stats.Duplicates++
			dup = []*series{{dl: d.newDeliveryLocked(it, "duplicate"), fault: "duplicate"}}
			d.addPendingLocked(1)
		}
		d.addPendingLocked(-1)
	} else {
		d.stats.Failed++
		if a.Error == OutageError {
			d.stats.Outage++
		}
		d.consec[ep]++
		if d.consec[ep] >= d.cfg.FailingAfter && !d.failing[ep] {
			d.failing[ep] = true
			alert = fmt.Sprintf("endpoint %s is failing: %d consecutive failed attempts, last: %s", ep, d.consec[ep], a.Error)
		}
		if s.k <= len(d.cfg.Schedule) {
			retry = true
			next = d.scaled(d.cfg.Schedule[s.k-1])
		} else {
			gaveUp = true
			d.stats.GaveUp++
			d.addPendingLocked(-1)
		}
	}
	d.mu.Unlock()

	attrs := []any{"endpoint", ep, "delivery", dl.id, "event", a.EventID, "type", a.EventType,
		"attempt", a.N, "status", a.Status, "latency", a.Latency}
	if a.Fault != "" {
		attrs = append(attrs, "fault", a.Fault)
	}
	if ok {
		d.log.Debug("deliver: delivered", attrs...)
	} else {
		d.log.Debug("deliver: attempt failed", append(attrs, "error", a.Error)...)
	}
	if recovered {
		d.log.Info("deliver: endpoint recovered", "endpoint", ep)
	}
	if alert != "" {
		d.log.Error("deliver: "+alert, "endpoint", ep)
		if d.cfg.OnAlert != nil {
			d.cfg.OnAlert(ep, alert)
		}
	}
	if gaveUp {
		d.log.Warn("deliver: gave up", append(attrs, "error", a.Error)...)
	}
	if retry {
		d.after(next, func() { d.run(s) })
	}
	if dup != nil {
		d.launch(it, dup, false)
	}
}

// Wait releases the reorder windows and waits until every delivery has
// succeeded or given up (duplicates and burst copies included), or ctx
// ends (its error), or the dispatcher is closed (ErrClosed). Events sent
// while Wait runs are waited for too.
func (d *Dispatcher) Wait(ctx context.Context) error {
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return ErrClosed
		}
		d.flushLocked()
		if d.pending == 0 {
			d.mu.Unlock()
			return nil
		}
		idle := d.idle
		d.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		case <-d.ctx.Done():
			return ErrClosed
		}
	}
}

// Close stops the timers, cancels attempts in flight and waits for the
// dispatcher's goroutines. Pending deliveries are abandoned. The logs and
// stats stay readable.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.wg.Wait()
		return
	}
	d.closed = true
	for id, t := range d.timers {
		if t.Stop() {
			d.wg.Done() // its func will never run
		}
		delete(d.timers, id)
	}
	d.windows = map[string][]*item{}
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	if d.owned != nil {
		d.owned.CloseIdleConnections()
	}
}

// Log returns a copy of the endpoint's delivery log, in the order the
// attempts ended: the last KeepAttempts of them.
func (d *Dispatcher) Log(endpointID string) []Attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	log := d.logs[endpointID]
	return append([]Attempt(nil), log[max(0, len(log)-KeepAttempts):]...)
}

// Resend delivers that delivery's event again now to to, the endpoint as
// it is now (its URL may have changed since), as one more series of
// attempts through the schedule (Fault "resend"); its attempts keep the
// delivery's id and continue its attempt numbers. It returns
// ErrUnknownDelivery for an id it never issued and ErrClosed after Close.
func (d *Dispatcher) Resend(deliveryID string, to Target) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	dl, ok := d.deliveries[deliveryID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownDelivery, deliveryID)
	}
	if d.closed {
		return ErrClosed
	}
	s := &series{dl: dl, fault: "resend", to: &to}
	d.addPendingLocked(1)
	d.goLocked(func() { d.run(s) })
	return nil
}

// Failing reports whether the endpoint is marked failing: FailingAfter
// consecutive failed attempts, not yet followed by a success.
func (d *Dispatcher) Failing(endpointID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failing[endpointID]
}

// Stats returns the counters so far.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Delivered reports whether any delivery of the event (to any target) got
// a 2xx answer.
func (d *Dispatcher) Delivered(eventID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.delivered[eventID]
}

// idPrefix is 8 hex digits drawn from r; a read error (crypto/rand never
// returns one) panics.
func idPrefix(r io.Reader) string {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		panic(fmt.Sprintf("deliver: draw the delivery id prefix: %v", err))
	}
	return fmt.Sprintf("%08x", binary.BigEndian.Uint32(b[:]))
}
