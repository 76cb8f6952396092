// Package logthrottle keeps a flood of one kind of log line to one line a
// period. A database that is down makes the receiver refuse every
// delivery and the job queue fail every fetch; a sender spraying bad
// signatures has every request rejected. Each of those is one line per
// request (or per 100 ms), thousands a minute, which bury the line that
// says what happened. The Handler passes the first line of each kind in a
// period, counts the others of that kind, and adds their count to the next
// line of that kind it passes, as "left_out".
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
// were left out since the last one passed.
const LeftOut = "left_out"

// maxKinds bounds the kinds a Handler remembers; when full it forgets
// those with no line left out and those whose period ended (the next
// line of each then passes), and a line of a new kind while all have
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
	left   int
}

// New returns a Handler over next that passes at most one line of each
// kind every period; keys name the top-level attributes whose values,
// with the level and the message, make a line's kind.
func New(next slog.Handler, period time.Duration, keys ...string) *Handler {
	return &Handler{next: next, period: period, keys: keys,
		s: &state{now: time.Now, kinds: map[string]*kind{}}}
}

// WithClock returns h reading the time from now instead of the machine's
// clock, for tests. It shares h's count.
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
// ago; the line passed after lines were left out says how many.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	key := h.kind(r)
	h.s.mu.Lock()
	now := h.s.now()
	k := h.s.kinds[key]
	if k != nil && now.Sub(k.passed) < h.period {
		k.left++
		h.s.mu.Unlock()
		return nil
	}
	if k == nil && len(h.s.kinds) >= maxKinds {
		// Forget the kinds with nothing left out (their next line passes,
		// as it would have once its period ended), and those whose period
		// ended: those with a count in their period keep it for their
		// next line.
		maps.DeleteFunc(h.s.kinds, func(_ string, k *kind) bool { return k.left == 0 || now.Sub(k.passed) >= h.period })
	}
	if k == nil && len(h.s.kinds) < maxKinds {
		k = &kind{}
		h.s.kinds[key] = k
	}
	left := 0
	if k != nil { // else all remembered kinds have a count: r passes, unremembered
		left = k.left
		k.passed, k.left = now, 0
	}
	h.s.mu.Unlock()
	if left > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(LeftOut, left))
	}
	return h.next.Handle(ctx, r)
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
