// Package logthrottle keeps a flood of one kind of log line to one line a
// period. A database that is down makes the receiver refuse every
// delivery and the job queue fail every fetch; a sender spraying bad
// signatures has every request rejected. Each of those is one line per
// request (or per 100 ms), thousands a minute, which bury the line that
// says what happened. The Handler passes the first line of each kind in a
// period and leaves out the others of that kind until the period ends;
// then it passes the last it left out, late (with its own time), adding
// the count of the others as "left_out" (none when it was the only one),
// and a new period starts. So a flood is a line a period, and the end of
// one, even one that stops for good (an outage that ends), is told
// within a period of its last line.
//
// A line's kind is its level, its message and the values of the
// attributes named as keys (a source's name, an HTTP status): lines that
// differ only in other attributes (an event id, an error's text) are one
// kind. What is left out is counted elsewhere too: metrics count every
// delivery by source and status.
package logthrottle

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"
)

// LeftOut is the attribute that tells how many lines of the same kind
// were left out between the last one passed and the line that carries it.
const LeftOut = "left_out"

// maxKinds bounds the kinds a Handler remembers; when full it forgets
// those with no line left out and those whose period ended (the next
// line of each then passes; one with lines left out, its timer not yet
// run, passes its last at once), and a line of a new kind while all have
// lines left out in their period passes without being remembered.
const maxKinds = 1024

// Handler is a slog.Handler that passes at most one line of each kind a
// period to the handler it wraps (see the package doc). Handlers derived
// from it (WithAttrs, WithGroup) share its count.
type Handler struct {
	next   slog.Handler
	period time.Duration
	keys   []string
	attrs  []slog.Attr // added by WithAttrs before any group, for the keys
	group  bool        // a WithGroup came first: later attributes are not top-level
	s      *state
}

type state struct {
	mu    sync.Mutex
	now   func() time.Time
	kinds map[string]*kind
}

type kind struct {
	passed time.Time
	left   int // lines left out since passed
	// While left > 0: the last line left out, with the handler and
	// context it came through, and the timer that passes it when the
	// period ends.
	last  slog.Record
	next  slog.Handler
	ctx   context.Context
	timer *time.Timer
}

// late is a kind's last line left out, to pass with the count of the
// others left out before it.
type late struct {
	r    slog.Record
	next slog.Handler
	ctx  context.Context
	left int
}

// take returns k's last line left out and forgets what k left out: its
// count, its line and its timer.
func (k *kind) take() late {
	l := late{k.last, k.next, k.ctx, k.left - 1}
	k.forget()
	return l
}

// forget forgets what k left out, its count told otherwise.
func (k *kind) forget() {
	if k.timer != nil {
		k.timer.Stop()
	}
	k.left, k.last, k.next, k.ctx, k.timer = 0, slog.Record{}, nil, nil, nil
}

// pass passes l's line, with the count of the others left out.
func (l late) pass() {
	ctx := context.Background()
	if l.ctx != nil {
		ctx = context.WithoutCancel(l.ctx) // its request may be over
	}
	_ = l.next.Handle(ctx, withLeftOut(l.r, l.left))
}

func withLeftOut(r slog.Record, n int) slog.Record {
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(LeftOut, n))
	}
	return r
}

// New returns a Handler over next that passes at most one line of each
// kind every period, and the last left out when a period ends; keys name
// the top-level attributes whose values, with the level and the message,
// make a line's kind. A kind with lines left out holds one timer until
// its period ends, and no goroutine runs otherwise; the timer calls next
// on a goroutine of its own, up to a period after the line was logged
// (after its logger's owner stopped, maybe): next's writer must take
// writes from any goroutine, at any time.
func New(next slog.Handler, period time.Duration, keys ...string) *Handler {
	return &Handler{next: next, period: period, keys: keys,
		s: &state{now: time.Now, kinds: map[string]*kind{}}}
}

// WithClock returns h reading the time from now instead of the machine's
// clock, for tests. It shares h's count. The timer that passes a kind's
// last line left out still runs on the machine's clock, a period after
// the first left out at most: with now frozen, a flood of one kind is
// still a line a period of the machine's clock. Only Handle calls now,
// on the goroutine of the line it handles; the timer does not.
func (h *Handler) WithClock(now func() time.Time) *Handler {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.s.now = now
	return h
}

// Enabled reports whether the wrapped handler handles level l.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

// Handle passes r on unless a line of its kind passed less than a period
// ago; then it keeps r as the last line left out, to pass when the
// period ends if no line of its kind passes first. A line passed after
// lines were left out says how many.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	key := h.kind(r)
	h.s.mu.Lock()
	now := h.s.now()
	k := h.s.kinds[key]
	if k != nil && now.Sub(k.passed) < h.period {
		if k.left == 0 {
			d := min(k.passed.Add(h.period).Sub(now), h.period)
			k.timer = h.endPeriod(k, d, now.Add(d))
		}
		k.left++
		k.last, k.next, k.ctx = r.Clone(), h.next, ctx // a Record kept must be cloned (slog.Handler's contract)
		h.s.mu.Unlock()
		return nil
	}
	var due []late
	if k == nil && len(h.s.kinds) >= maxKinds {
		// Forget the kinds with nothing left out (their next line passes,
		// as it would have once its period ended), and those whose period
		// ended, passing the last line each left out (its timer has not
		// run yet): those with a count in their period keep it.
		maps.DeleteFunc(h.s.kinds, func(_ string, k *kind) bool {
			if k.left == 0 {
				return true
			}
			if now.Sub(k.passed) < h.period {
				return false
			}
			due = append(due, k.take())
			return true
		})
	}
	if k == nil && len(h.s.kinds) < maxKinds {
		k = &kind{}
		h.s.kinds[key] = k
	}
	left := 0
	if k != nil { // else all remembered kinds have a count: r passes, unremembered
		left = k.left
		k.forget()
		k.passed = now
	}
	h.s.mu.Unlock()
	for _, l := range due {
		l.pass()
	}
	return h.next.Handle(ctx, withLeftOut(r, left))
}

// endPeriod returns a timer that, after d, passes the last line k left
// out (unless k has passed or forgotten it since) and starts a new
// period at end, the period's end on h's clock. It does not read the
// clock: the timer runs on a goroutine of its own, and a test's clock
// (WithClock) may be moved by its owner without a lock. h.s.mu is held.
func (h *Handler) endPeriod(k *kind, d time.Duration, end time.Time) *time.Timer {
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		h.s.mu.Lock()
		if k.timer != t {
			h.s.mu.Unlock()
			return
		}
		l := k.take()
		k.passed = end
		h.s.mu.Unlock()
		l.pass()
	})
	return t
}

// Flush passes now the last line each kind left out in its period, with
// the count of the others, and stops their timers: what a flood left out
// is told before its logger's owner stops, not up to a period after (or
// never, when the process exits first). A line logged after Flush is
// handled as before it. Handlers derived from h share what it flushes.
func (h *Handler) Flush() {
	h.s.mu.Lock()
	var due []late
	for _, k := range h.s.kinds {
		if k.left > 0 {
			due = append(due, k.take())
		}
	}
	h.s.mu.Unlock()
	for _, l := range due {
		l.pass()
	}
}

// WithAttrs returns a Handler whose lines carry as, sharing h's count.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	if !h.group {
		c.attrs = append(h.attrs[:len(h.attrs):len(h.attrs)], as...)
	}
	return &c
}

// WithGroup returns a Handler whose later attributes are in group name,
// sharing h's count.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.group = c.group || name != ""
	return &c
}

// kind is r's kind: its level, message and keys' values.
func (h *Handler) kind(r slog.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\x00%s", r.Level, r.Message)
	if len(h.keys) == 0 {
		return b.String()
	}
	vals := make([]string, len(h.keys))
	set := func(a slog.Attr) {
		for i, k := range h.keys {
			if a.Key == k {
				vals[i] = a.Value.Resolve().String()
			}
		}
	}
	for _, a := range h.attrs {
		set(a)
	}
	if !h.group {
		r.Attrs(func(a slog.Attr) bool { set(a); return true })
	}
	for _, v := range vals {
		b.WriteByte(0)
		b.WriteString(v)
	}
	return b.String()
}
