package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/store"
)

// BackfillConfig configures a Backfill. Zero fields take the documented defaults.
type BackfillConfig struct {
	// DB records the run (payhook_reconcile_runs) and, in a dry run, says
	// which events are known (required).
	DB *store.DB
	// Inbox stores the listed events with their job, as the receiver
	// does: a *jobs.Queue (required unless DryRun).
	Inbox payhook.Inbox
	// Source is the configured source the events are stored under: its
	// Name and Environment (required).
	Source payhook.Source
	// Envelope reads a listed event: the adapter's Envelope, which also
	// runs the envelope checks of a delivery (required).
	Envelope func(body []byte) (payhook.Envelope, error)
	// Lister lists the provider's events: the source's API client
	// (required).
	Lister adapter.EventLister
	// From and Until bound the window of events listed, by the time the
	// provider says they occurred. From zero lists as far back as the
	// provider keeps events (Stripe: 30 days; asking for more is an error
	// that says so); Until zero is Now plus OpenEndSkew.
	From, Until time.Time
	// Types keeps the events of these provider type names; empty: all.
	Types []string
	// Undelivered lists only the events whose deliveries failed, where the
	// provider can say (Stripe's delivery_success=false).
	Undelivered bool
	// DryRun lists and checks the events and counts those missing, but
	// stores nothing and records no run.
	DryRun bool
	// PageSize is the page size asked of the provider. Default: the
	// client's (100, or the provider's most).
	PageSize int
	// MaxAttempts bounds the requests for one page (a timeout, a 5xx or a
	// 429 is retried after a backoff until then) and the transactions
	// that store it (one the database could not commit, an error wrapping
	// payhook.ErrUnavailable, is tried again). Default 5.
	MaxAttempts int
	// Backoff is the wait before retry n (1 for the first) when the API
	// asked for none. Default 1s, doubling, at most 1 minute.
	Backoff func(attempt int) time.Duration
	// MaxRetryAfter bounds the Retry-After honoured; an API asking for a
	// longer wait fails the run, saying so. Default 5 minutes.
	MaxRetryAfter time.Duration
	// StaleAfter is how long an unfinished run may go without recording
	// progress before it is taken for crashed and resumed. Default 2
	// minutes (a page is recorded as soon as it is stored).
	StaleAfter time.Duration
	// Progress, if set, is called after each page with the summary so far.
	Progress func(Summary)
	// Logger receives a line per refused item and per retry. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx is done. Default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (c BackfillConfig) withDefaults() (BackfillConfig, error) {
	switch {
	case c.DB == nil:
		return c, fmt.Errorf("backfill: no database: %w", payhook.ErrConfig)
	case c.Inbox == nil && !c.DryRun:
		return c, fmt.Errorf("backfill: no inbox: %w", payhook.ErrConfig)
	case c.Source.Name == "":
		return c, fmt.Errorf("backfill: no source: %w", payhook.ErrConfig)
	case c.Envelope == nil:
		return c, fmt.Errorf("backfill: source %s: provider %q lists no events payhook can read: %w", c.Source.Name, c.Source.Provider, payhook.ErrConfig)
	case c.Lister == nil:
		return c, fmt.Errorf("backfill: source %s: no API client that lists events (configure api_url and api_key): %w", c.Source.Name, payhook.ErrConfig)
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.Backoff == nil {
		c.Backoff = func(n int) time.Duration { return min(time.Second<<min(n-1, 10), time.Minute) }
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = 5 * time.Minute
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	return c, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Summary is what a backfill did.
type Summary struct {
	// Source is the source backfilled.
	Source string `json:"source"`
	// From and Until are the window asked for.
	From  time.Time `json:"from,omitzero"`
	Until time.Time `json:"until"`
	// Runs are the recorded runs, in order: the run resumed first, when a
	// cut-short one was, then the rest of the window.
	Runs []int64 `json:"runs"`
	// Pages counts the pages listed.
	Pages int `json:"pages"`
	// Listed counts the listed events in the window, Listed = New + Known
	// + Refused: New those stored now (in a dry run: that would be), Known
	// those payhook had, Refused those that failed the envelope checks,
	// each in Refusals (the first 1000).
	Listed   int       `json:"listed"`
	New      int       `json:"new"`
	Known    int       `json:"known"`
	Refused  int       `json:"refused"`
	Refusals []Refusal `json:"refusals"`
	// DryRun says nothing was stored.
	DryRun bool `json:"dry_run,omitempty"`
}

// Refusal is a listed item that was not stored, and why.
type Refusal struct {
	// Page is the page it was on (1 for the first of its run).
	Page int `json:"page"`
	// EventID is the item's id when it could be read, else "".
	EventID string `json:"event_id,omitempty"`
	// Reason is what the envelope checks said.
	Reason string `json:"reason"`
}

// maxRefusals bounds the refusals a summary keeps; the count goes on.
const maxRefusals = 1000

// Backfill lists the provider's events in the window (every page) and
// stores each one payhook does not have through the receiver's path: the
// same envelope checks (cfg.Envelope), the same event (payhook.NewEvent:
// ignored when of another environment), the same unique index and the
// same job in the same transaction (cfg.Inbox), marked
// payhook.ViaBackfill. Events payhook has change nothing. An item that
// fails the checks is refused, reported in the summary and skipped;
// nothing of it is stored.
//
// Each page is checked whole before any of it is stored, and stored in
// one transaction; then the run's cursor is recorded. A run cut short (a
// crash, or a failure) is resumed from that cursor by the next Backfill
// of the source with the same types and options; then the window asked
// is listed whole in a run of its own, whether or not the resumed run
// could be finished (its error is returned, joined with the window's).
// A resumed run that fails in a way a resume would repeat (a 4xx, a
// malformed page) is given up (store.DB.GiveUpRun).
//
// The API's timeouts, 5xx and 429 are retried with backoff (honouring
// Retry-After) up to cfg.MaxAttempts per page. A page that cannot be read,
// that repeats an event already listed by the run, or that says there are
// more but lists nothing fails the run: the error says which page and
// why, the run is recorded as failed with it, and nothing of that page is
// stored. Configuration errors wrap payhook.ErrConfig; a window the
// provider cannot list wraps payhook.ErrInvalid. The summary returned
// with an error counts what was done before it.
func Backfill(ctx context.Context, cfg BackfillConfig) (*Summary, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	now := cfg.Now()
	until := cfg.Until
	if until.IsZero() {
		until = now.Add(OpenEndSkew)
	}
	sum := &Summary{Source: cfg.Source.Name, From: cfg.From, Until: until, Refusals: []Refusal{}, Runs: []int64{}, DryRun: cfg.DryRun}
	if !cfg.From.IsZero() && !cfg.From.Before(until) {
		return sum, fmt.Errorf("backfill %s: the window starts at %s, not before its end %s: %w",
			cfg.Source.Name, cfg.From.Format(time.RFC3339), until.Format(time.RFC3339), payhook.ErrInvalid)
	}
	if r, ok := cfg.Lister.(adapter.EventRetention); ok && !cfg.From.IsZero() && cfg.From.Before(now.Add(-r.EventRetention())) {
		keep := r.EventRetention()
		return sum, fmt.Errorf("backfill %s: provider %s lists the events of the last %s only (since %s), and the window starts at %s; "+
			"older events cannot be listed, ask for %s at most: %w",
			cfg.Source.Name, cfg.Source.Provider, days(keep), now.Add(-keep).Format(time.RFC3339), cfg.From.Format(time.RFC3339),
			keep, payhook.ErrInvalid)
	}
	b := &backfill{cfg: cfg, sum: sum, params: params(cfg.Types, cfg.Undelivered)}
	if cfg.DryRun {
		return sum, b.pass(ctx, &store.Run{Kind: store.RunBackfill, Source: cfg.Source.Name, From: cfg.From, Until: until})
	}
	resumed, err := cfg.DB.ResumeRun(ctx, store.RunBackfill, cfg.Source.Name, b.params, now.Add(-cfg.StaleAfter), now)
	if err != nil {
		return sum, fmt.Errorf("backfill %s: %w", cfg.Source.Name, err)
	}
	var resumeErr error
	if resumed != nil {
		cfg.Logger.Info("backfill resumes a run cut short", "source", cfg.Source.Name, "run", resumed.Resumes, "cursor", resumed.Cursor)
		if resumeErr = b.run(ctx, resumed); resumeErr != nil {
			if ctx.Err() != nil {
				return sum, resumeErr
			}
			// The window asked is listed all the same: a run that cannot
			// be finished must not stop every later one.
			cfg.Logger.Warn("backfill could not finish the run it resumed; it lists the window asked all the same",
				"source", cfg.Source.Name, "run", resumed.ID, "err", resumeErr)
			if repeats(resumeErr) {
				// Resumed again, it would fail again: given up.
				if err := cfg.DB.GiveUpRun(ctx, resumed.ID); err != nil {
					return sum, errors.Join(resumeErr, fmt.Errorf("backfill %s: %w", cfg.Source.Name, err))
				}
			}
		}
	}
	// The window asked is listed whole, also where a resumed run covered
	// it: a provider that lists newest first (Stripe) gave a cut run the
	// events that existed at its first page, not those its window got
	// after; the events known already are counted known.
	r := &store.Run{Kind: store.RunBackfill, Source: cfg.Source.Name, Params: b.params, From: cfg.From, Until: until}
	if err := cfg.DB.StartRun(ctx, r, cfg.Now()); err != nil {
		return sum, errors.Join(resumeErr, fmt.Errorf("backfill %s: %w", cfg.Source.Name, err))
	}
	return sum, errors.Join(resumeErr, b.run(ctx, r))
}

// repeats reports whether a run that failed with err would fail the same
// way when resumed: the provider refused its cursor or query (a 4xx but
// 408 and 429), or a page was malformed (it repeats events, or goes
// round). Timeouts, 5xx, 429 and crashes are worth resuming.
func repeats(err error) bool {
	var apiErr *adapter.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status >= 400 && apiErr.Status < 500 && apiErr.Status != http.StatusRequestTimeout &&
			apiErr.Status != http.StatusTooManyRequests
	}
	return errors.Is(err, payhook.ErrMalformed)
}

// OpenEndSkew is how far past Now a window with no Until reaches: a
// provider whose clock runs ahead of payhook's dates its newest events in
// payhook's future, and a window ending at payhook's own now left them
// out (the deterministic simulation's seed 178: a dropped chargeback
// stamped 56 s ahead was never listed, so never backfilled).
const OpenEndSkew = 5 * time.Minute

// days says d in days when it is whole days.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// params encodes a backfill's filters for store.Run.Params: a run resumes
// only a run of the same filters.
func params(types []string, undelivered bool) string {
	v := url.Values{}
	if len(types) > 0 {
		t := slices.Clone(types)
		slices.Sort(t)
		v.Set("types", strings.Join(slices.Compact(t), ","))
	}
	if undelivered {
		v.Set("undelivered", "true")
	}
	return v.Encode()
}

// backfill is one Backfill call.
type backfill struct {
	cfg    BackfillConfig
	sum    *Summary
	params string
}

// run lists r's window from r.Cursor and finishes r: with its error when
// the pass failed. The failure is recorded even when ctx is done.
func (b *backfill) run(ctx context.Context, r *store.Run) error {
	b.sum.Runs = append(b.sum.Runs, r.ID)
	err := b.pass(ctx, r)
	if err != nil {
		r.Error = err.Error()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if ferr := b.cfg.DB.FinishRun(rctx, r, b.cfg.Now()); ferr != nil {
		return errors.Join(err, fmt.Errorf("backfill %s: %w", r.Source, ferr))
	}
	return err
}

// pass lists r's window from r.Cursor to the last page, storing each page
// and recording r's progress after it.
func (b *backfill) pass(ctx context.Context, r *store.Run) error {
	q := adapter.EventQuery{From: r.From, Types: b.cfg.Types, Undelivered: b.cfg.Undelivered, Cursor: r.Cursor, Limit: b.cfg.PageSize}
	seen := make(map[string]int)
	for page := 1; ; page++ {
		p, err := b.list(ctx, q, page, r)
		if err != nil {
			return err
		}
		b.sum.Pages++
		evs, err := b.admit(p, page, r, seen)
		if err != nil {
			return fmt.Errorf("backfill %s: page %d (cursor %q): %w; nothing of the page was stored", r.Source, page, q.Cursor, err)
		}
		if err := b.store(ctx, evs, r); err != nil {
			return fmt.Errorf("backfill %s: page %d (cursor %q): %w; nothing of the page was stored", r.Source, page, q.Cursor, err)
		}
		r.Cursor = p.Next
		if !b.cfg.DryRun {
			if err := b.cfg.DB.RecordRun(ctx, r, b.cfg.Now()); err != nil {
				return fmt.Errorf("backfill %s: %w", r.Source, err)
			}
		}
		if b.cfg.Progress != nil {
			b.cfg.Progress(*b.sum)
		}
		if p.Next == "" {
			return nil
		}
		if p.Next == q.Cursor {
			return fmt.Errorf("backfill %s: page %d gives the cursor it was asked with (%q): the listing would go round: %w",
				r.Source, page, p.Next, payhook.ErrMalformed)
		}
		q.Cursor = p.Next
	}
}

// list asks for one page, retrying what is worth it.
func (b *backfill) list(ctx context.Context, q adapter.EventQuery, page int, run *store.Run) (adapter.EventPage, error) {
	var p adapter.EventPage
	r := retrier{maxAttempts: b.cfg.MaxAttempts, backoff: b.cfg.Backoff, maxRetryAfter: b.cfg.MaxRetryAfter,
		sleep: func(ctx context.Context, d time.Duration) error { return b.wait(ctx, run, d) }, logger: b.cfg.Logger}
	err := r.page(ctx, "backfill "+b.cfg.Source.Name, page, q.Cursor, func() (err error) {
		p, err = b.cfg.Lister.ListEvents(ctx, q)
		return err
	})
	return p, err
}

// wait sleeps d before a retry. A wait longer than half of StaleAfter
// (a Retry-After of minutes) is cut in steps between which r's progress
// is recorded again, so that a run alive but waiting is never taken for
// crashed and resumed by another while it waits.
func (b *backfill) wait(ctx context.Context, r *store.Run, d time.Duration) error {
	step := b.cfg.StaleAfter / 2
	for d > 0 {
		if err := b.cfg.Sleep(ctx, min(d, step)); err != nil {
			return err
		}
		if d -= step; d > 0 && !b.cfg.DryRun {
			if err := b.cfg.DB.RecordRun(ctx, r, b.cfg.Now()); err != nil {
				return fmt.Errorf("backfill %s: %w", r.Source, err)
			}
		}
	}
	return nil
}

// admit checks every item of a page and returns the events to store. An
// item whose envelope is refused is counted and reported, and skipped.
// An event the run already listed fails the page: the provider's paging
// is inconsistent, and going on could go round for ever.
func (b *backfill) admit(p adapter.EventPage, page int, r *store.Run, seen map[string]int) ([]*payhook.Event, error) {
	at := b.cfg.Now()
	var evs []*payhook.Event
	onPage := make(map[string]bool, len(p.Events))
	var refused []Refusal
	for _, body := range p.Events {
		env, err := b.cfg.Envelope(body)
		if err != nil {
			refused = append(refused, Refusal{Page: page, EventID: idOf(body), Reason: err.Error()})
			continue
		}
		if first, ok := seen[env.EventID]; ok || onPage[env.EventID] {
			if !ok {
				first = page
			}
			return nil, fmt.Errorf("event %s was already listed on page %d: the provider's paging repeats events: %w",
				env.EventID, first, payhook.ErrMalformed)
		}
		onPage[env.EventID] = true
		if !env.OccurredAt.IsZero() && ((!r.From.IsZero() && env.OccurredAt.Before(r.From)) || env.OccurredAt.After(r.Until)) {
			continue // outside the window (a provider that cannot filter by time lists it)
		}
		ev := payhook.NewEvent(b.cfg.Source, env, body, at)
		ev.ReceivedVia = payhook.ViaBackfill
		evs = append(evs, ev)
	}
	for id := range onPage {
		seen[id] = page
	}
	for _, f := range refused {
		b.cfg.Logger.Warn("backfill refused a listed event", "source", b.cfg.Source.Name, "page", f.Page, "event_id", f.EventID, "reason", f.Reason)
		if len(b.sum.Refusals) < maxRefusals {
			b.sum.Refusals = append(b.sum.Refusals, f)
		}
	}
	b.sum.Refused += len(refused)
	r.Refused += int64(len(refused))
	b.sum.Listed += len(refused)
	r.Listed += int64(len(refused))
	return evs, nil
}

// idOf returns the "id" or "event_id" of a listed item that failed the
// envelope checks, when it has one that can be shown, for the report.
func idOf(body []byte) string {
	var o map[string]json.RawMessage
	if json.Unmarshal(body, &o) != nil {
		return ""
	}
	for _, k := range []string{"id", "event_id"} {
		var id string
		if json.Unmarshal(o[k], &id) == nil && id != "" && payhook.CheckRef(k, id) == nil {
			return id
		}
	}
	return ""
}

// store stores a page's events in one transaction with their jobs (or,
// in a dry run, counts those payhook does not have).
func (b *backfill) store(ctx context.Context, evs []*payhook.Event, r *store.Run) error {
	var inserted []bool
	if b.cfg.DryRun {
		inserted = make([]bool, len(evs))
		for i, ev := range evs {
			known, err := b.cfg.DB.ListEvents(ctx, store.Filter{Source: ev.Source, EventID: ev.EventID, Limit: 1})
			if err != nil {
				return err
			}
			inserted[i] = len(known) == 0
		}
	} else if len(evs) > 0 {
		// A transaction the database could not commit (a PostgreSQL
		// deadlock with a concurrent batch, the database away for a
		// moment) stored nothing: it is tried again, as a provider
		// retries a delivery answered 503.
		for attempt := 1; ; attempt++ {
			var err error
			if inserted, err = b.cfg.Inbox.Ingest(ctx, evs); err == nil {
				break
			}
			if !errors.Is(err, payhook.ErrUnavailable) || attempt >= b.cfg.MaxAttempts || ctx.Err() != nil {
				return fmt.Errorf("store (attempt %d): %w", attempt, err)
			}
			wait := b.cfg.Backoff(attempt)
			b.cfg.Logger.Warn("backfill stores a page again", "source", b.cfg.Source.Name, "attempt", attempt, "wait", wait, "err", err)
			if err := b.wait(ctx, r, wait); err != nil {
				return fmt.Errorf("store: interrupted while waiting to retry: %w", err)
			}
		}
	}
	for _, ins := range inserted {
		if ins {
			b.sum.New++
			r.New++
		} else {
			b.sum.Known++
			r.Known++
		}
	}
	b.sum.Listed += len(evs)
	r.Listed += int64(len(evs))
	return nil
}
