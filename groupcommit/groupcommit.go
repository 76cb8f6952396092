// Package groupcommit batches concurrent deliveries into one transaction.
//
// A durable commit costs a disk flush (0.3–0.5 ms here), so one commit per
// webhook caps throughput; most of a commit's cost is shared by every row
// it holds. A Committer sits between the receiver and the inbox: requests
// that arrive while a commit is running wait and go, together, into the
// next one. Each request still returns only after the commit holding its
// events has returned, so "2xx only after a durable commit" holds.
//
// One event must not hold up the others. When the inbox fails a batch
// because of one event (a *payhook.EventError), the batch is committed
// again at once without that event's request. A request whose event is
// locked by another transaction (payhook.ErrLocked: another instance is
// storing the same event) is then retried alone, outside the batches, until
// the lock goes or its context ends; while it waits, new requests for the
// same key go straight to that path instead of into a batch.
//
// When the store fails as a whole (the disk is full, the database is
// down), the inbox's error says that no event caused it (see WholeBatch):
// every request of the batch is then answered with it at once. Trying each
// alone would repeat the failure once per request, one transaction after
// another, while the others wait to their deadline. Until a commit
// succeeds again, a request that arrives while a commit is under way gets
// that error at once instead of waiting behind it: the store is still
// tried, one batch at a time, by the requests that arrive while no commit
// runs.
package groupcommit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/payhook/payhook"
)

// commitTimeout bounds one group commit, which no single caller's context
// may cancel (it holds everybody's events).
const commitTimeout = 10 * time.Second

// maxAlone bounds the requests retried alone at once, each holding a
// database connection while it waits for a lock, so that blocked
// deliveries cannot take the connections the batches need.
const maxAlone = 4

// alonePause is the pause between two tries of a locked request. The
// inbox has already waited for the lock before reporting it.
const alonePause = 10 * time.Millisecond

// BoundedInbox is a payhook.Inbox that can also store a batch without waiting
// long for a key another transaction holds: IngestBounded then fails with
// a *payhook.EventError wrapping payhook.ErrLocked. A Committer over one
// uses it, so that one locked key cannot hold up a whole batch.
// *jobs.Queue is one.
type BoundedInbox interface {
	payhook.Inbox
	IngestBounded(ctx context.Context, evs []*payhook.Event) ([]bool, error)
}

// WholeBatch reports whether err, an inbox's error for a batch, says that
// no event of the batch caused it: the store refused the transaction as a
// whole (the disk is full, the database is down, the commit failed), so the
// batch's events would fail the same way alone. An error says so with a
// method WholeBatch() bool that returns true, anywhere in its chain;
// *jobs.Queue's errors at begin, enqueue and commit do.
func WholeBatch(err error) bool {
	var w interface{ WholeBatch() bool }
	return errors.As(err, &w) && w.WholeBatch()
}

// Config configures a Committer.
type Config struct {
	// MaxEvents bounds the events of one commit. Default 100.
	MaxEvents int
	// Commits is how many commits may be under way at once, each with
	// its own batch. Default 1. More suits an inbox whose commits overlap
	// (PostgreSQL flushes the WAL of concurrent commits together, and one
	// commit's CPU runs while another waits for its flush); on SQLite,
	// whose one connection takes one at a time, they would only queue.
	Commits int
	// Gather makes a committer that has just committed a burst's batch
	// (4 events or more) wait, before it takes the next one, until as many
	// events wait as that commit held (or a full commit's worth), for half
	// that commit's time at most. Under load a committer is never idle:
	// without the wait a commit takes what arrived during the last one,
	// while the deliveries it answered are still on their way back, and
	// batches stay small for a cost (on SQLite a WAL page for each table
	// and index an event touches) mostly fixed per commit. Side by side
	// (docs/benchmarks.md) it acked 11% and 7% more at 16 and 64 senders on
	// SQLite (fourteen pairs), 14% and 13% more on PostgreSQL (six), with
	// a lower p99. A steady load's small commits, a delivery alone, the
	// first after a quiet moment, are committed at once.
	Gather bool
	// OnCommit, if set, is called after each successful commit with its
	// events and which of them were inserted (metrics). It must be cheap
	// and not keep the slices.
	OnCommit func(evs []*payhook.Event, inserted []bool)
	// OnCommitTime, if set, is called after each try of the inbox (a
	// batch, or a request retried alone), successful or not, with the
	// time it took (metrics). Their sum over a while, against Commits
	// times that while, is how busy the commits are: near it, a commit
	// starts as soon as the last one ends (or after Gather's wait),
	// deliveries wait for the next, and only bigger batches or cheaper
	// commits acknowledge more.
	OnCommitTime func(took time.Duration)
}

// Committer is a payhook.Inbox that groups concurrent Ingest calls into fewer
// transactions of the inbox it wraps. It is safe for concurrent use.
type Committer struct {
	ingest  func(ctx context.Context, evs []*payhook.Event) ([]bool, error)
	max     int
	commits int
	gather  bool
	wake    chan struct{} // a request was queued
	stop    chan struct{}
	alone   chan struct{} // slots of requests retried alone
	done    sync.WaitGroup

	mu      sync.Mutex
	queue   []*request
	closed  bool
	blocked map[key]int // keys of requests being retried alone, and how many
	busy    int         // commits under way
	failing error       // the store's error (WholeBatch) of the last commit, if it failed so
}

type key struct{ source, eventID string }

type request struct {
	ctx context.Context
	evs []*payhook.Event
	out chan result
}

type result struct {
	inserted []bool
	err      error
	locked   bool // an event's key is held elsewhere: retry alone
}

// New starts a Committer over inbox; Close stops it.
func New(inbox payhook.Inbox, cfg Config) *Committer {
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = 100
	}
	if cfg.Commits <= 0 {
		cfg.Commits = 1
	}
	c := &Committer{
		ingest: inbox.Ingest, max: cfg.MaxEvents, commits: cfg.Commits, gather: cfg.Gather,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), alone: make(chan struct{}, maxAlone),
		blocked: make(map[key]int),
	}
	if b, ok := inbox.(BoundedInbox); ok {
		c.ingest = b.IngestBounded
	}
	if on, onTime, ingest := cfg.OnCommit, cfg.OnCommitTime, c.ingest; on != nil || onTime != nil {
		c.ingest = func(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
			start := time.Now()
			got, err := ingest(ctx, evs)
			if onTime != nil {
				onTime(time.Since(start))
			}
			if err == nil && on != nil {
				on(evs, got)
			}
			return got, err
		}
	}
	c.done.Add(cfg.Commits)
	for range cfg.Commits {
		go c.loop()
	}
	return c
}

// Close stops the committer once the commit under way has returned;
// requests still waiting for a commit fail. Calls after Close fail with
// payhook.ErrUnavailable. Calling it again only waits for the first.
func (c *Committer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	c.mu.Unlock()
	c.done.Wait()
}

// Queued returns how many requests wait for the next commit.
func (c *Committer) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Ingest stores evs in the next commit and returns after it, reporting
// which events were new. If ctx ends first, it returns an error wrapping
// payhook.ErrUnavailable: the events may or may not have been stored, and
// the provider's retry finds out (a duplicate then answers 200). An event
// locked by another transaction is retried until ctx ends. While the store
// fails as a whole (the last commit failed with an error WholeBatch
// reports) and a commit is under way, it returns that error at once. A
// nil event is refused, with a *payhook.EventError wrapping
// payhook.ErrInvalid, before anything is queued: in a batch it would
// panic in the committer's goroutine, ending the process.
func (c *Committer) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	for i, ev := range evs {
		if ev == nil {
			return nil, &payhook.EventError{Index: i, Err: fmt.Errorf("group commit: event %d of %d is nil: %w", i, len(evs), payhook.ErrInvalid)}
		}
	}
	r := &request{ctx: ctx, evs: evs, out: make(chan result, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: group committer closed", payhook.ErrUnavailable)
	}
	if c.isBlocked(evs) {
		c.mu.Unlock()
		return c.ingestAlone(ctx, evs)
	}
	if c.failing != nil && c.busy > 0 {
		err := c.failing
		c.mu.Unlock()
		return nil, fmt.Errorf("store failing, tried again by the commit under way: %w", err)
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // the loop is awake already
	}
	select {
	case res := <-r.out:
		if res.locked {
			return c.ingestAlone(ctx, evs)
		}
		return res.inserted, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", payhook.ErrUnavailable, ctx.Err())
	}
}

// isBlocked reports whether one of evs is being retried alone. c.mu is held.
func (c *Committer) isBlocked(evs []*payhook.Event) bool {
	if len(c.blocked) == 0 {
		return false
	}
	for _, ev := range evs {
		if c.blocked[key{ev.Source, ev.EventID}] > 0 {
			return true
		}
	}
	return false
}

// ingestAlone stores evs in transactions of their own until their key is
// no longer locked elsewhere, ctx ends or the committer closes.
func (c *Committer) ingestAlone(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	c.mu.Lock()
	for _, ev := range evs {
		c.blocked[key{ev.Source, ev.EventID}]++
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, ev := range evs {
			k := key{ev.Source, ev.EventID}
			if c.blocked[k]--; c.blocked[k] <= 0 {
				delete(c.blocked, k)
			}
		}
		c.mu.Unlock()
	}()
	for {
		select {
		case c.alone <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for a locked event: %w", payhook.ErrUnavailable, ctx.Err())
		case <-c.stop:
			return nil, fmt.Errorf("%w: group committer closed", payhook.ErrUnavailable)
		}
		inserted, err := c.ingest(ctx, evs)
		<-c.alone
		if !errors.Is(err, payhook.ErrLocked) {
			return inserted, err
		}
		select {
		case <-time.After(alonePause):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-c.stop:
			return nil, err
		}
	}
}

// loop commits the queued requests, up to max events at a time, until
// Close. Config.Commits loops run at once, each taking its own batches.
func (c *Committer) loop() {
	defer c.done.Done()
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			c.mu.Lock()
			queue := c.queue
			c.queue = nil
			c.mu.Unlock()
			for _, r := range queue {
				r.out <- result{err: fmt.Errorf("%w: group committer closed", payhook.ErrUnavailable)}
			}
			return
		}
		for {
			batch, n := c.take()
			if len(batch) == 0 {
				break
			}
			start := time.Now()
			c.commit(batch)
			if c.gather {
				c.gatherFor(n, time.Since(start)/2)
			}
		}
	}
}

// gatherFor waits, for d at most, until min(last, max) events are queued
// (Config.Gather); it does not wait after a commit of fewer than
// gatherLeast events. It takes the wake signals of the requests queued
// meanwhile: with several committers (PostgreSQL) the others stay idle
// while one gathers, and the batch it then takes is the one they would
// have split.
func (c *Committer) gatherFor(last int, d time.Duration) {
	if last < gatherLeast {
		return
	}
	want := min(last, c.max)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for c.queuedEvents() < want {
		select {
		case <-c.wake: // a request was queued: count again
		case <-deadline.C:
			return
		case <-c.stop:
			return
		}
	}
}

// gatherLeast is the smallest commit after which Config.Gather waits:
// a steady load's commits hold fewer (at 1,000 deliveries/s on SQLite, 2
// on average, 91% of them 4 or fewer) and are not delayed; a burst's hold
// more (5 to 20 at 16 to 64 senders).
const gatherLeast = 4

// queuedEvents counts the events waiting to be committed.
func (c *Committer) queuedEvents() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.queue {
		n += len(r.evs)
	}
	return n
}

// take removes from the queue the next requests to commit together, and
// returns them with their number of events: at least one, then more while
// they fit in max events. Requests nobody waits
// for any more are dropped; those whose key is being retried alone are
// sent there.
func (c *Committer) take() ([]*request, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var batch []*request
	n, i := 0, 0
	for ; i < len(c.queue); i++ {
		r := c.queue[i]
		switch {
		case r.ctx.Err() != nil:
			continue
		case c.isBlocked(r.evs):
			r.out <- result{locked: true}
			continue
		case len(batch) > 0 && n+len(r.evs) > c.max:
		default:
			batch = append(batch, r)
			n += len(r.evs)
			continue
		}
		break
	}
	c.queue = slices.Delete(c.queue, 0, i)
	if len(batch) > 0 {
		c.busy++
	}
	return batch, n
}

// commit stores a batch in one transaction. When one event fails it, its
// request is answered (or sent to be retried alone when locked) and the
// rest committed again without it; a failure of the store as a whole
// (WholeBatch) is every request's answer; any other failure has each
// request tried on its own, so that one bad event cannot fail the others.
// It returns the store's error when the batch ended failing as a whole.
func (c *Committer) commit(live []*request) (failing error) {
	settled := false
	settle := func(err error) { c.settle(&settled, err) }
	defer func() { c.settle(&settled, failing) }()
	for len(live) > 1 {
		evs, order, owner := sorted(live)
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		got, err := c.ingest(ctx, evs)
		cancel()
		if err == nil {
			settle(nil)
			inserted := make([]bool, len(evs))
			for i, j := range order {
				inserted[j] = got[i]
			}
			for _, r := range live {
				r.out <- result{inserted: inserted[:len(r.evs)]}
				inserted = inserted[len(r.evs):]
			}
			return nil
		}
		if WholeBatch(err) {
			settle(err)
			for _, r := range live {
				answer(r, nil, err)
			}
			return err
		}
		var one *payhook.EventError
		if !errors.As(err, &one) || one.Index < 0 || one.Index >= len(evs) {
			break
		}
		bad := owner[order[one.Index]]
		answer(live[bad], nil, err)
		live = slices.Delete(live, bad, bad+1)
	}
	for i, r := range live {
		inserted, err := c.ingest(r.ctx, r.evs)
		if WholeBatch(err) {
			settle(err)
			for _, r := range live[i:] {
				answer(r, nil, err)
			}
			return err
		}
		if err == nil {
			settle(nil)
		}
		answer(r, inserted, err)
	}
	return nil
}

// settle records how the commit under way ended before its requests are
// answered, so that a caller's next Ingest never meets the state of the
// commit that has just answered it: the store's error, and that the
// commit is no longer under way (once: *settled says it was counted off).
func (c *Committer) settle(settled *bool, failing error) {
	c.mu.Lock()
	if !*settled {
		c.busy--
		*settled = true
	}
	c.failing = failing
	c.mu.Unlock()
}

// answer returns a request its outcome, or sends it to be retried alone
// when one of its events is locked.
func answer(r *request, inserted []bool, err error) {
	if errors.Is(err, payhook.ErrLocked) {
		r.out <- result{locked: true}
		return
	}
	r.out <- result{inserted: inserted, err: err}
}

// sorted returns the events of the requests in key order, so that batches
// of two payhook instances sharing a PostgreSQL database never wait on
// each other in a cycle. order[i] is the position of evs[i] among the
// requests' events laid end to end, owner[p] the request holding position p.
func sorted(live []*request) (evs []*payhook.Event, order, owner []int) {
	var flat []*payhook.Event
	for i, r := range live {
		flat = append(flat, r.evs...)
		for range r.evs {
			owner = append(owner, i)
		}
	}
	order = make([]int, len(flat))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(flat[a].Source, flat[b].Source), cmp.Compare(flat[a].EventID, flat[b].EventID))
	})
	evs = make([]*payhook.Event, len(flat))
	for i, j := range order {
		evs[i] = flat[j]
	}
	return evs, order, owner
}
