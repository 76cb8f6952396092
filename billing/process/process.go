package process

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/sjson"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/internal/logthrottle"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/store"
)

// Config configures the processing of events. Zero fields take the
// documented defaults.
type Config struct {
	// DB holds the events and the billing state. Required.
	DB *store.DB
	// Sources are the configured sources: an event's source names its
	// provider, whose mapping reads it, and its Fetch, if set, reads the
	// resource the event is about. An event of a source not listed fails
	// as of an unknown provider. If empty, no event can apply.
	Sources []payhook.Source
	// Now is the clock of billing's and alerts' times. Default time.Now.
	Now func() time.Time
	// Logger receives the processing's logs. Default slog.Default().
	Logger *slog.Logger
	// Outbox, if set, routes the facts billing writes to its sinks and
	// runs their deliveries: each delivery's job is inserted in the
	// transaction that marks the event processed, and the queue's sweep
	// finds those whose job was lost. If nil, facts are written to the
	// outbox and left unrouted.
	Outbox *outbox.Outbox
	// OnRateLimited, if set, is called for each read of an event's
	// resource that the provider refused for its rate limit (429), with
	// the event's source (metrics). It must be cheap.
	OnRateLimited func(source string)
}

// New returns the job queue's configuration that processes events as
// payhook serve does: Handlers, OnFailed, OnStop, Logger and Now are
// set, and Fetch when a source has one;
// the caller may tune the rest (Workers, MaxAttempts, Backoff, ...) before
// passing it to jobs.New. Billing is Handlers' "*": a handler added for a
// type takes that type from billing (payhook.Mux gives "*" the types no
// handler of their own takes); one added under "*" runs beside it, after
// it, and its events are processed one at a time, not in batches.
//
// Every event goes through its provider's mapping (mapping.Read) to
// billing facts, applied (billing.ApplyOutcome) in the transaction that
// marks it processed; an event that carries no fact is ignored with the
// mapping's reason. When the source has a Fetch (API credentials), the
// object the event is about (checkout, payment, charge, refund, dispute,
// transaction, adjustment, subscription: the adapter's Resources) is read
// first, outside any transaction, and its current state replaces the one
// the event carried, for the mapping only: the event tells, the resource
// decides. A fetch that fails fails the attempt, which is retried with
// backoff; it never falls back to the payload (see fetch). An event that
// fails for good raises a billing.AlertEventFailed alert in the
// transaction that marks it failed.
//
// It returns an error wrapping payhook.ErrConfig when cfg.DB is nil, or
// a source has no name, a name already taken, a provider payhook does not
// know (whose every event would fail) or an Environment its provider's
// events do not say (every event would be stored as ignored).
func New(cfg Config) (jobs.Config, error) {
	if cfg.DB == nil {
		return jobs.Config{}, fmt.Errorf("process: no database: %w", payhook.ErrConfig)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	rateThrottle := logthrottle.New(cfg.Logger.Handler(), rateLogPeriod, "source")
	p := &processor{db: cfg.DB, now: cfg.Now, log: cfg.Logger, box: cfg.Outbox,
		bySource: make(map[string]payhook.Source, len(cfg.Sources)), clock: time.Now, onRateLimited: cfg.OnRateLimited,
		rateLog: slog.New(rateThrottle),
		limited: map[int64]time.Time{}, pause: map[string]time.Time{}, limiters: map[string]*fetchLimiter{}}
	fetching := 0 // sources with a Fetch
	for _, s := range cfg.Sources {
		if s.Name == "" {
			return jobs.Config{}, fmt.Errorf("process: a source has no name: %w", payhook.ErrConfig)
		}
		if _, dup := p.bySource[s.Name]; dup {
			return jobs.Config{}, fmt.Errorf("process: source %q configured twice: %w", s.Name, payhook.ErrConfig)
		}
		if _, ok := provider.Lookup(s.Provider); !ok {
			return jobs.Config{}, fmt.Errorf("process: source %q: unknown provider %q (one of %s): %w",
				s.Name, s.Provider, strings.Join(provider.Names(), ", "), payhook.ErrConfig)
		}
		if s.Environment != "" && !provider.ReportsEnvironment(s.Provider) {
			// payhook.NewEvent fails closed: every event would be ignored.
			return jobs.Config{}, fmt.Errorf("process: source %q: provider %s does not say an event's environment, so none is %q: %w",
				s.Name, s.Provider, s.Environment, payhook.ErrConfig)
		}
		if s.Fetch != nil {
			fetching++
			if s.FetchRate > 0 {
				// A read that waited for its turn asks whether a 429
				// paused the source meanwhile.
				read := s.Fetch
				l := newFetchLimiter(func(ctx context.Context, ev *payhook.Event) ([]byte, error) {
					if err := p.paused(ev); err != nil {
						return nil, err
					}
					return read(ctx, ev)
				}, s.FetchRate)
				// An event of a type its provider has no resource for
				// reads nothing: it takes no turn.
				s.Fetch = func(ctx context.Context, ev *payhook.Event) ([]byte, error) {
					if !p.reads(ev) {
						return read(ctx, ev)
					}
					return l.fetch(ctx, ev)
				}
				p.limiters[s.Name] = l
			}
		}
		p.bySource[s.Name] = s
	}
	handlers := &payhook.Mux{}
	handlers.Handle("*", p)
	jc := jobs.Config{
		Handlers: handlers,
		Logger:   cfg.Logger,
		Now:      cfg.Now,
		OnFailed: p.failed,
		OnStop:   rateThrottle.Flush, // the 429s held back, told as the queue stops
	}
	if fetching > 0 {
		jc.Fetch = p.fetch
	}
	if fetching > 0 && fetching < len(cfg.Sources) {
		// The events of sources without a Fetch are applied several in
		// one transaction (jobs.Config.Batch), not read first. (When all
		// have one, no batch need lock an event to find that out.)
		jc.FetchSource = func(source string) bool { return p.bySource[source].Fetch != nil }
	}
	if cfg.Outbox != nil {
		jc.Deliver = cfg.Outbox.Deliver
		jc.DeliverMany = cfg.Outbox.DeliverMany
		jc.DeliverySweep = cfg.Outbox.Sweep
		jc.DeliveryPostpone = cfg.Outbox.PostponeSweepTx
		jc.AfterCommit = p.tell
	}
	return jc, nil
}

// processor is the state New's functions share.
type processor struct {
	db       *store.DB
	now      func() time.Time
	log      *slog.Logger
	box      *outbox.Outbox
	bySource map[string]payhook.Source

	// The reads paused after a provider's 429, on clock (the machine's:
	// a Retry-After is), not now (billing's).
	clock   func() time.Time
	mu      sync.Mutex
	limited map[int64]time.Time  // event row id → when it was first put off for a 429, in a row
	pause   map[string]time.Time // source → no read before, after a 429
	// limitedPruned is when limited was last rid of rows gone by: once an
	// hour, not at each new row, which made putting off n events cost n².
	limitedPruned time.Time
	// The limiters of the sources with a FetchRate, whose turns a pause
	// covers (paused).
	limiters map[string]*fetchLimiter
	// rateLog tells the 429s, a line per source every rateLogPeriod at
	// most; onRateLimited counts each.
	rateLog       *slog.Logger
	onRateLimited func(source string)
}

// Handle turns ev into billing facts and applies them in tx. An event
// that carries none is ignored; its drift alert, if any, commits all the
// same, told after the commit as an applied event's facts are.
func (p *processor) Handle(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
	btx := billing.Wrap(p.db, tx, p.now()).WithOutbox(p.box)
	if err := p.drift(ctx, btx, ev); err != nil {
		return err
	}
	var out billing.Outcome
	facts, err := p.read(ev)
	if err == nil {
		out, err = billing.ApplyOutcome(ctx, btx, ev.Source, facts)
	}
	if err != nil && !errors.Is(err, payhook.ErrIgnored) {
		return err
	}
	if err := p.afterCommit(ctx, tx, btx); err != nil {
		return err
	}
	if err != nil {
		return err // ignored
	}
	p.ended(ev, out)
	return nil
}

// HandleBatch is Handle of several events in tx, with billing.ApplyMany:
// it returns, per event, the error Handle would (an event that carries no
// fact is ignored; one that failed, such as a refund of a payment not
// seen yet, left nothing in tx), or the error after which tx is to roll
// back. The batch has one time (billing.Tx.Now), and the alerts of a
// drifted API version are raised after the events are applied, for those
// applied or ignored: like the rest of it, a failed event's alert is not
// kept.
func (p *processor) HandleBatch(ctx context.Context, tx *sql.Tx, evs []*payhook.Event) ([]error, error) {
	read, errs := p.readAll(evs)
	var facts []billing.Facts
	for i, ev := range evs {
		switch err := errs[i]; {
		case errors.Is(err, payhook.ErrIgnored):
			continue
		case err != nil:
			return nil, fmt.Errorf("event %d: %w", ev.ID, err)
		}
		facts = append(facts, billing.Facts{Source: ev.Source, Facts: read[i]})
	}
	btx := billing.Wrap(p.db, tx, p.now()).WithOutbox(p.box)
	outs, failed, err := billing.ApplyMany(ctx, btx, facts)
	if err != nil {
		return nil, err
	}
	k := 0 // the place in facts, outs and failed of the next event not ignored
	for i, ev := range evs {
		if errs[i] == nil { // not ignored
			out, err := outs[k], failed[k]
			k++
			if errs[i] = err; err != nil {
				continue // it left nothing, its drift alert included
			}
			p.ended(ev, out)
		}
		if err := p.drift(ctx, btx, ev); err != nil {
			return nil, err
		}
	}
	if err := p.afterCommit(ctx, tx, btx); err != nil {
		return nil, err
	}
	return errs, nil
}

// readersMin is the fewest events per goroutine readAll reads them with.
const readersMin = 8

// readAll is read of each of evs; on SQLite on as many cores as there
// are, readersMin events each at least. Reading is CPU alone, no
// statement, and there the batch's transaction holds the one connection
// all the while: on one core it was a tenth of that transaction's time
// (side by side, SQLite processed 6% more with it). On PostgreSQL other
// batches run meanwhile on their own connections, and reading on more
// cores only took theirs (2.7% less over nine pairs, within the noise).
func (p *processor) readAll(evs []*payhook.Event) ([][]billing.Fact, []error) {
	facts, errs := make([][]billing.Fact, len(evs)), make([]error, len(evs))
	readers := 1
	if p.db.Engine == store.SQLite {
		readers = max(1, min(runtime.GOMAXPROCS(0), len(evs)/readersMin))
	}
	readEach := func(r int) {
		for i := r; i < len(evs); i += readers {
			facts[i], errs[i] = p.read(evs[i])
		}
	}
	if readers == 1 {
		readEach(0)
		return facts, errs
	}
	// A panic in a goroutine of its own would end the process: the
	// worker's, which River recovers as the attempt's error, gets it.
	panics := make(chan any, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					panics <- fmt.Sprintf("%v\n%s", v, debug.Stack())
				}
			}()
			readEach(r)
		})
	}
	wg.Wait()
	select {
	case v := <-panics:
		panic(v)
	default:
	}
	return facts, errs
}

// read returns the billing facts ev carries, an error wrapping
// payhook.ErrIgnored when it carries none.
func (p *processor) read(ev *payhook.Event) ([]billing.Fact, error) {
	src := p.bySource[ev.Source]
	read, err := mapping.Read(src.Provider, current(src.Provider, ev))
	if err != nil {
		return nil, err
	}
	if len(read.Facts) == 0 {
		return nil, fmt.Errorf("%w: %s", payhook.ErrIgnored, read.Ignored)
	}
	return read.Facts, nil
}

// ended logs the subscriptions whose end ev's facts claimed.
func (p *processor) ended(ev *payhook.Event, out billing.Outcome) {
	for _, ref := range out.EndedClaimed {
		p.log.Info("subscription ended", "source", ev.Source, "subscription", ref, "event", ev.EventID)
	}
}

// drift raises billing.AlertAPIVersionDrift, once per version, when the
// source pins an API version and ev's payload says another in its
// top-level api_version (Stripe's and billete's events do). The event is
// processed all the same. The alert's fact goes through btx's outbox, so
// that afterCommit hands it on with the event's own.
func (p *processor) drift(ctx context.Context, btx *billing.Tx, ev *payhook.Event) error {
	src := p.bySource[ev.Source]
	if src.APIVersion == "" {
		return nil
	}
	var v struct {
		APIVersion string `json:"api_version"`
	}
	if json.Unmarshal(ev.Payload, &v) != nil || v.APIVersion == "" || v.APIVersion == src.APIVersion {
		return nil
	}
	_, err := billing.RaiseVersionDrift(ctx, btx, src.Name, src.APIVersion,
		payhook.Storable(v.APIVersion), "event "+ev.EventID)
	return err
}

// fetch reads the resource ev is about with its source's Fetch, if any.
//
// Any error fails the attempt and the job retries it with backoff; the
// payload, maybe stale, is never applied instead. A refusal for the
// provider's rate limit (429) is the exception: it pauses the source's
// reads and puts the event off (rateLimited, paused). A 404
// (payhook.ErrNotFound) is an error like the others: the provider does
// not know the object with this key, which for an event it signed means
// the key is of another account
// or environment, or the object is not visible yet (read-after-write
// lag). Applying the payload would act on a state the provider no longer
// confirms and hide a misconfigured key; the retries cover the lag, and
// the last attempt fails the event with an event_failed alert, to be
// replayed once the key is fixed. The 404 is logged as a warning naming
// the source and event.
func (p *processor) fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	f := p.bySource[ev.Source].Fetch
	if f == nil {
		return nil, nil
	}
	if err := p.paused(ev); err != nil {
		return nil, err
	}
	b, err := f(ctx, ev)
	if errors.Is(err, payhook.ErrNotFound) {
		p.log.Warn("the provider does not know the object of the event with this source's API key; the attempt fails and is retried",
			"source", ev.Source, "event", ev.EventID, "type", ev.Type, "err", err)
	}
	var apiErr *apiget.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests {
		return nil, p.rateLimited(ev, err, apiErr.RetryAfter)
	}
	if err == nil {
		p.mu.Lock()
		delete(p.limited, ev.ID)
		p.mu.Unlock()
	}
	return b, err
}

// failed raises the alert of an event that failed for good. The alert
// commits with the failure, in the transaction that marks the event
// failed.
func (p *processor) failed(ctx context.Context, tx *sql.Tx, ev *payhook.Event, cause error) error {
	btx := billing.Wrap(p.db, tx, p.now()).WithOutbox(p.box)
	if err := billing.RaiseAlert(ctx, btx, billing.AlertEventFailed, ev.Source+"/"+ev.EventID,
		payhook.Storable(fmt.Sprintf("%s event failed after %d attempts: %v", ev.Type, ev.Attempts, cause))); err != nil {
		return err
	}
	return p.afterCommit(ctx, tx, btx)
}

// afterCommit hands what btx wrote to the outbox to the queue: the jobs
// of its deliveries, enqueued in tx, and its untold facts, told once tx
// has committed (tell).
func (p *processor) afterCommit(ctx context.Context, tx *sql.Tx, btx *billing.Tx) error {
	if err := jobs.EnqueueDeliveries(ctx, tx, btx.Deliveries()); err != nil {
		return err
	}
	untold := btx.Untold()
	if len(untold) == 0 {
		return nil
	}
	items := make([]any, len(untold))
	for i, u := range untold {
		items[i] = u
	}
	return jobs.Defer(ctx, items...)
}

// tell is the queue's AfterCommit: it tells the untold facts of a
// committed transaction (a batch's together).
func (p *processor) tell(ctx context.Context, items []any) {
	untold := make([]outbox.Untold, 0, len(items))
	for _, it := range items {
		if u, ok := it.(outbox.Untold); ok {
			untold = append(untold, u)
		}
	}
	if err := p.box.Tell(ctx, untold); err != nil {
		p.log.Warn("facts not told; the sweep tells them", "count", len(untold), "err", err)
	}
}

// current returns ev with the resource's current state, fetched from the
// provider's API, in place of the object the event carried, at the place
// the provider's adapter says (adapter.Resource.Path): the mapping then
// reads the object as it is now, and billing's guards (each movement once
// per provider reference, a subscription state only when newer) keep an
// old event from undoing a newer one. The stored event is never changed.
// An event without a fetched resource, or whose resource is not JSON,
// is left as it is.
func current(providerName string, ev *payhook.Event) *payhook.Event {
	a, _ := provider.Lookup(providerName)
	r, ok := a.Resources.For(ev.Type)
	if ev.Resource == nil || !ok || !json.Valid(ev.Resource) {
		return ev
	}
	payload, err := sjson.SetRawBytes(ev.Payload, sjsonPath(r.Path), ev.Resource)
	if err != nil {
		return ev
	}
	cp := *ev
	cp.Payload = payload
	return &cp
}

// sjsonPath writes the object keys of path in sjson's path syntax, each
// character other than a letter, digit, '_' or '-' escaped.
func sjsonPath(path []string) string {
	var b strings.Builder
	for i, key := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		for _, r := range key {
			if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}
