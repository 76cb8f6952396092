package process

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
)

// A provider's rate limit, from both sides: the reads payhook spaces
// under a source's FetchRate (fetchLimiter), and the 429s it gets all the
// same, which pause the source's reads (rateLimited, paused, putOff).

// rateLimited returns the error of a read of ev's resource that the
// provider refused for its rate limit (429), which another application
// on the same account, or other payhook instances, used up: the source's
// reads pause for the Retry-After the provider asked (1 s if none), which
// is the client's, not the request's, and the event is put off (putOff).
func (p *processor) rateLimited(ev *payhook.Event, err error, retryAfter time.Duration) error {
	now := p.clock()
	until := now.Add(max(retryAfter, time.Second))
	p.mu.Lock()
	if until.After(p.pause[ev.Source]) {
		p.pause[ev.Source] = until
	}
	p.mu.Unlock()
	if p.onRateLimited != nil {
		p.onRateLimited(ev.Source)
	}
	p.rateLog.Warn("the provider refused a read for its rate limit (429): the source's reads pause, its events are put off; "+
		"another application or instance may use the account's share (lower api_rate)",
		"source", ev.Source, "until", until.UTC().Format(time.RFC3339), "event", ev.EventID, "err", err)
	return p.putOff(ev, now, until, fmt.Errorf("the provider refused the read for its rate limit: %w", err))
}

// paused returns putOff's error for ev while its source's reads pause
// after a 429 (rateLimited), without asking the provider; nil once the
// pause is over. A turn ev had booked under the source's FetchRate
// (fetchLimiter) that comes before the pause's end is gone: ev takes a new
// one when it comes back, or the events whose turns the pause covered
// would all read at once after it, beyond the rate. An event of a type
// its provider has no resource for, which its Fetch answers without a
// request, is not paused.
func (p *processor) paused(ev *payhook.Event) error {
	if !p.reads(ev) {
		return nil
	}
	now := p.clock()
	p.mu.Lock()
	until := p.pause[ev.Source]
	p.mu.Unlock()
	if !now.Before(until) {
		return nil
	}
	if l := p.limiters[ev.Source]; l != nil {
		l.missed(ev.ID, until)
	}
	return p.putOff(ev, now, until, fmt.Errorf("the provider refused a read for its rate limit and asked for none before %s",
		until.UTC().Format(time.RFC3339)))
}

// reads reports whether ev's source's Fetch asks the provider for ev:
// its provider has a resource for ev's type (adapter.Resources, which
// payhook's clients read with), or lists none, as far as it is known.
func (p *processor) reads(ev *payhook.Event) bool {
	a, ok := provider.Lookup(p.bySource[ev.Source].Provider)
	if !ok || len(a.Resources) == 0 {
		return true
	}
	_, ok = a.Resources.For(ev.Type)
	return ok
}

// putOff returns jobs.Later for ev, whose source may read again at
// until, which counts as no attempt: it comes back up to 2 s after that,
// spread so that the events put off together do not all read at once.
// Put off for maxRateLimited since the first time in a row, ev gets cause
// itself, a failed attempt: a provider that refuses that long is down for
// this source, and the attempts' backoff and the last one's alert apply.
func (p *processor) putOff(ev *payhook.Event, now, until time.Time, cause error) error {
	p.mu.Lock()
	first, ok := p.limited[ev.ID]
	if ok && now.Sub(first) > 2*maxRateLimited {
		ok = false // pruned or not yet, as the prune below would: a new row
	}
	if !ok {
		first = now
		p.limited[ev.ID] = now
	}
	if now.Sub(p.limitedPruned) > maxRateLimited {
		// The rows of events whose job did not come back here.
		for id, t := range p.limited {
			if now.Sub(t) > 2*maxRateLimited {
				delete(p.limited, id)
			}
		}
		p.limitedPruned = now
	}
	p.mu.Unlock()
	if now.Sub(first) >= maxRateLimited {
		return fmt.Errorf("put off for the provider's rate limit for %s: %w", now.Sub(first).Round(time.Second), cause)
	}
	return jobs.Later(until.Sub(now)+rand.N(2*time.Second), cause.Error())
}

// rateLogPeriod is how often a source's 429s are told at most
// (logthrottle): one line, then the count of those left out.
const rateLogPeriod = 10 * time.Second

// maxRateLimited is how long an event is put off for the provider's rate
// limit (a 429) before its reads refused count as attempts.
const maxRateLimited = time.Hour

// fetchLimiter calls a Fetch at most perSecond times a second, one at a
// time, evenly spaced (Source.FetchRate): a call whose turn comes within
// maxFetchWait waits for it (or fails when its ctx ends first); a later
// one returns jobs.Later, so that its worker processes other sources'
// events meanwhile rather than wait behind a slow provider's turns. The
// event put off keeps its turn, booked under its row id: it is read when
// it comes back, in the order the events asked, and is put off once
// (again only if it comes back early, or its source's reads paused over
// its turn: processor.paused forgets it then). Given back instead, its
// turn went to the events that asked meanwhile, and it could be put off
// for as long as they came faster than perSecond, with a snooze of every
// event waiting at each turn. A turn booked is kept until bookedFor after
// it.
type fetchLimiter struct {
	read      func(context.Context, *payhook.Event) ([]byte, error)
	perSecond float64
	lim       *rate.Limiter
	mu        sync.Mutex
	booked    map[int64]booking // by event row id
	pruned    time.Time
}

// booking is the turn of an event put off under a source's FetchRate.
type booking struct {
	r  *rate.Reservation
	at time.Time // the turn
}

// newFetchLimiter returns the fetchLimiter of fetch at perSecond.
func newFetchLimiter(fetch func(context.Context, *payhook.Event) ([]byte, error), perSecond float64) *fetchLimiter {
	return &fetchLimiter{read: fetch, perSecond: perSecond,
		lim: rate.NewLimiter(rate.Limit(perSecond), 1), booked: map[int64]booking{}}
}

func (l *fetchLimiter) fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	now := time.Now()
	l.mu.Lock()
	b, ok := l.booked[ev.ID]
	if ok && now.Sub(b.at) > bookedFor {
		ok = false // its turn went by long ago: it asks again
	}
	if !ok {
		r := l.lim.ReserveN(now, 1)
		b = booking{r: r, at: now.Add(r.DelayFrom(now))}
	}
	r := b.r
	d := r.DelayFrom(now)
	if d > maxFetchWait {
		l.booked[ev.ID] = b
		if now.Sub(l.pruned) > bookedFor {
			// The turns of events whose job did not come back (a
			// replay or another instance processed them).
			for id, b := range l.booked {
				if now.Sub(b.at) > bookedFor {
					delete(l.booked, id)
				}
			}
			l.pruned = now
		}
		l.mu.Unlock()
		return nil, jobs.Later(d, fmt.Sprintf("the provider's API is read at most %g times a second (api_rate)", l.perSecond))
	}
	delete(l.booked, ev.ID)
	l.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			r.Cancel()
			return nil, fmt.Errorf("wait for the turn of a read of the provider's API: %w", ctx.Err())
		}
	}
	return l.read(ctx, ev)
}

// missed forgets the turn booked for event id if it comes before t,
// when the source's reads pause (processor.paused): the event, back
// after the pause, takes a turn anew rather than read on one gone by.
func (l *fetchLimiter) missed(id int64, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.booked[id]; ok && b.at.Before(t) {
		delete(l.booked, id)
	}
}

// bookedFor is how long after its turn an event put off under a
// source's FetchRate still finds it booked. Its job comes back as late
// as the queue is behind (a backlog of other events due before it),
// and must not lose its turn for that: booking again at the back, it
// would come back late again, and while the queue was that far behind
// every event put off would, none read. Forgotten after it, the turns
// of events whose job did not come back here (replayed, or taken by
// another instance) do not grow the map for the life of the process.
const bookedFor = time.Hour

// maxFetchWait is the longest a read waits for its turn under a source's
// FetchRate in its worker (see fetchLimiter).
const maxFetchWait = time.Second
