// Package groupcommit batches concurrent deliveries into one transaction.
//
// A durable commit costs a disk flush (0.3–0.5 ms here), so one commit per
// webhook caps throughput; most of a commit's cost is shared by every row
// it holds. A Committer sits between the receiver and the inbox: requests
// that arrive while a commit is running wait and go, together, into the
// next one. Each request still returns only after the commit holding its
// events has returned, so "2xx only after a durable commit" holds.
package groupcommit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/payhook/payhook"
)

// commitTimeout bounds one group commit, which no single caller's context
// may cancel (it holds everybody's events).
const commitTimeout = 10 * time.Second

// Inbox is what a Committer batches for: it stores events once, in one
// transaction per call, and reports which were new. *jobs.Queue is one.
type Inbox interface {
	Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error)
}

// Config configures a Committer.
type Config struct {
	// MaxEvents bounds the events of one commit. Default 100.
	MaxEvents int
}

// Committer is an Inbox that groups concurrent Ingest calls into fewer
// transactions of the inbox it wraps. It is safe for concurrent use.
type Committer struct {
	inbox Inbox
	max   int
	reqs  chan *request
	stop  chan struct{}
	done  sync.WaitGroup
}

type request struct {
	ctx context.Context
	evs []*payhook.Event
	out chan result
}

type result struct {
	inserted []bool
	err      error
}

// New starts a Committer over inbox; Close stops it.
func New(inbox Inbox, cfg Config) *Committer {
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = 100
	}
	c := &Committer{inbox: inbox, max: cfg.MaxEvents, reqs: make(chan *request), stop: make(chan struct{})}
	c.done.Add(1)
	go c.loop()
	return c
}

// Close stops the committer once the commit under way has returned. Calls
// after Close fail with payhook.ErrUnavailable.
func (c *Committer) Close() {
	close(c.stop)
	c.done.Wait()
}

// Ingest stores evs in the next commit and returns after it, reporting
// which events were new. If ctx ends first, it returns an error wrapping
// payhook.ErrUnavailable: the events may or may not have been stored, and
// the provider's retry finds out (a duplicate then answers 200).
func (c *Committer) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	r := &request{ctx: ctx, evs: evs, out: make(chan result, 1)}
	select {
	case c.reqs <- r:
	case <-c.stop:
		return nil, fmt.Errorf("%w: group committer closed", payhook.ErrUnavailable)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", payhook.ErrUnavailable, ctx.Err())
	}
	select {
	case res := <-r.out:
		return res.inserted, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", payhook.ErrUnavailable, ctx.Err())
	}
}

// loop takes a request, adds every request already waiting (up to max
// events), commits them together and answers each.
func (c *Committer) loop() {
	defer c.done.Done()
	for {
		var batch []*request
		select {
		case r := <-c.reqs:
			batch = append(batch, r)
		case <-c.stop:
			return
		}
		n := len(batch[0].evs)
	gather:
		for n < c.max {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
				n += len(r.evs)
			default:
				break gather
			}
		}
		c.commit(batch)
	}
}

// commit stores a batch in one transaction. If it fails, each request is
// tried on its own, so that one bad event cannot fail the others.
func (c *Committer) commit(batch []*request) {
	var live []*request
	for _, r := range batch {
		if r.ctx.Err() == nil { // nobody is waiting for the others
			live = append(live, r)
		}
	}
	if len(live) > 1 {
		var evs []*payhook.Event
		for _, r := range live {
			evs = append(evs, r.evs...)
		}
		// Rows go in key order, so that batches of two payhook instances
		// sharing a PostgreSQL database never wait on each other in a cycle.
		order := make([]int, len(evs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Or(cmp.Compare(evs[a].Source, evs[b].Source), cmp.Compare(evs[a].EventID, evs[b].EventID))
		})
		sorted := make([]*payhook.Event, len(evs))
		for i, j := range order {
			sorted[i] = evs[j]
		}
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		got, err := c.inbox.Ingest(ctx, sorted)
		cancel()
		if err == nil {
			inserted := make([]bool, len(evs))
			for i, j := range order {
				inserted[j] = got[i]
			}
			for _, r := range live {
				r.out <- result{inserted: inserted[:len(r.evs)]}
				inserted = inserted[len(r.evs):]
			}
			return
		}
	}
	for _, r := range live {
		inserted, err := c.inbox.Ingest(r.ctx, r.evs)
		r.out <- result{inserted, err}
	}
}
