package logthrottle

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestHandler runs on synctest's clock: the period's end (a timer) is
// timed as the lines are, exactly.
func TestHandler(t *testing.T) {
	type line struct {
		after time.Duration // since the start
		level slog.Level
		msg   string
		attrs []any
	}
	for _, c := range []struct {
		name  string
		lines []line
		want  []string // the lines passed, in order, with their time since the start
	}{
		{"one kind in a period: the first passes, and the last left out at its end", []line{
			{0, slog.LevelError, "down", []any{"source", "a", "event_id", "1"}},
			{time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "2"}},
			{9 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "3"}},
		}, []string{
			"at=0s level=ERROR msg=down source=a event_id=1",
			"at=9s level=ERROR msg=down source=a event_id=3 left_out=1",
		}},
		{"a flood is a line a period; one that stops is told within a period", []line{
			{0, slog.LevelError, "down", []any{"source", "a", "event_id", "1"}},
			{3 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "2"}},
			{6 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "3"}},
			{9 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "4"}},
			{12 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "5"}},
			{15 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "6"}},
			{18 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "7"}},
			{21 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "8"}},
			{24 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "9"}},
			{27 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "10"}},
		}, []string{
			"at=0s level=ERROR msg=down source=a event_id=1",
			"at=9s level=ERROR msg=down source=a event_id=4 left_out=2",   // passed at 10s
			"at=18s level=ERROR msg=down source=a event_id=7 left_out=2",  // at 20s
			"at=27s level=ERROR msg=down source=a event_id=10 left_out=2", // at 30s, the flood over
		}},
		{"a line after a quiet period passes at once", []line{
			{0, slog.LevelError, "down", []any{"source", "a", "event_id", "1"}},
			{10 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "2"}},
			{25 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "3"}},
		}, []string{
			"at=0s level=ERROR msg=down source=a event_id=1",
			"at=10s level=ERROR msg=down source=a event_id=2",
			"at=25s level=ERROR msg=down source=a event_id=3",
		}},
		{"a key's value, the level or the message make another kind", []line{
			{0, slog.LevelError, "down", []any{"source", "a"}},
			{0, slog.LevelError, "down", []any{"source", "b"}},
			{0, slog.LevelWarn, "down", []any{"source", "a"}},
			{0, slog.LevelError, "up", []any{"source", "a"}},
			{0, slog.LevelError, "down", []any{"source", "a", "status", 401}},
			{0, slog.LevelError, "down", []any{"source", "a", "status", 400}},
			{0, slog.LevelError, "down", []any{"source", "a", "status", 400, "err", "other"}},
		}, []string{
			"at=0s level=ERROR msg=down source=a",
			"at=0s level=ERROR msg=down source=b",
			"at=0s level=WARN msg=down source=a",
			"at=0s level=ERROR msg=up source=a",
			"at=0s level=ERROR msg=down source=a status=401",
			"at=0s level=ERROR msg=down source=a status=400",
			"at=0s level=ERROR msg=down source=a status=400 err=other", // at 10s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out buffer
				start := time.Now()
				h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: since(start)}), 10*time.Second, "source", "status")
				log := slog.New(h)
				for _, l := range c.lines {
					time.Sleep(time.Until(start.Add(l.after)))
					log.Log(context.Background(), l.level, l.msg, l.attrs...)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
					t.Errorf("passed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
				}
				if n := timers(h); n != 0 {
					t.Errorf("%d timers left after the lines stopped; want 0", n)
				}
			})
		})
	}
}

// since writes a line's time as "at", the time since start.
func since(start time.Time) func([]string, slog.Attr) slog.Attr {
	return func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Duration("at", a.Value.Time().Sub(start))
		}
		return a
	}
}

// timers is how many kinds of h hold a timer.
func timers(h *Handler) int {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	n := 0
	for _, k := range h.s.kinds {
		if k.timer != nil {
			n++
		}
	}
	return n
}

// TestNextLineStopsTimer: with a clock that jumps (WithClock in a test),
// the next line after the period takes the count before the timer runs,
// and stops it: the count is told once.
func TestNextLineStopsTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out buffer
		now := time.Now()
		h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: noTime}), 10*time.Second, "source").
			WithClock(func() time.Time { return now })
		log := slog.New(h)
		for i := range 3 {
			log.Error("down", "source", "a", "event_id", i)
		}
		now = now.Add(10 * time.Second)
		log.Error("down", "source", "a", "event_id", 3)
		if n := timers(h); n != 0 {
			t.Errorf("%d timers left after the count was told; want 0", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		want := "level=ERROR msg=down source=a event_id=0\nlevel=ERROR msg=down source=a event_id=3 left_out=2\n"
		if out.String() != want {
			t.Errorf("passed:\n%swant:\n%s", out.String(), want)
		}
	})
}

// TestFlush: Flush tells at once what each kind left out, through a
// derived Handler too, and stops the timers; a line after it is in its
// kind's period still (here: passed late, at the period's end).
func TestFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out buffer
		start := time.Now()
		h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: since(start)}), 10*time.Second, "source")
		log := slog.New(h)
		derived := slog.New(h.WithAttrs([]slog.Attr{slog.String("source", "b")}))
		for i := range 3 {
			log.Error("down", "source", "a", "event_id", i)
			derived.Error("down", "event_id", i)
		}
		log.Error("up", "source", "a") // nothing left out: nothing to tell
		time.Sleep(time.Second)
		h.Flush()
		if n := timers(h); n != 0 {
			t.Errorf("%d timers left after Flush; want 0", n)
		}
		log.Error("down", "source", "a", "event_id", 3)
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []string{
			"at=0s level=ERROR msg=down source=a event_id=0",
			"at=0s level=ERROR msg=down source=b event_id=0",
			"at=0s level=ERROR msg=up source=a",
			"at=0s level=ERROR msg=down source=a event_id=2 left_out=1",
			"at=0s level=ERROR msg=down source=b event_id=2 left_out=1",
			"at=1s level=ERROR msg=down source=a event_id=3",
		}
		got := strings.Split(strings.TrimSpace(out.String()), "\n")
		slices.Sort(got[3:5]) // the flush passes the kinds in the map's order
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("passed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestConcurrentCountsEveryLine: lines of a few kinds from many
// goroutines, some at the very instant a period ends: each line is
// passed or counted in a left_out once, and no timer is left.
func TestConcurrentCountsEveryLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out buffer
		h := New(slog.NewTextHandler(&out, nil), 10*time.Second, "source")
		log := slog.New(h)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 100 {
					log.Error("down", "source", g%3)
					time.Sleep(time.Duration(i%7) * time.Second / 2)
				}
			})
		}
		wg.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		n := len(lines)
		for _, l := range lines {
			if _, v, ok := strings.Cut(l, LeftOut+"="); ok {
				left, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				n += left
			}
		}
		if n != 800 {
			t.Errorf("%d lines passed, counting those left out; want 800:\n%s", n, out.String())
		}
		if n := timers(h); n != 0 {
			t.Errorf("%d timers left; want 0", n)
		}
	})
}

// TestDerived: a key given by With counts, derived loggers share the
// count, a key inside a group is no key, and the last line left out is
// passed at its period's end through the logger it came by. The clock is
// frozen: the period's end is timed on the machine's (here synctest's)
// clock, so a kind's flood is still a line a period.
func TestDerived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out buffer
		frozen := time.Now()
		h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: noTime}), time.Minute, "source").
			WithClock(func() time.Time { return frozen })
		log := slog.New(h)
		log.Error("down", "source", "a")
		log.With("source", "a").Error("down", "n", 2) // the same kind, through another logger
		log.With("source", "b").Error("down")
		g := log.WithGroup("g")
		g.Error("down", "source", "c") // g.source: no key, the kind of no source
		g.Error("down", "source", "d")
		want := "level=ERROR msg=down source=a\nlevel=ERROR msg=down source=b\nlevel=ERROR msg=down g.source=c\n"
		if out.String() != want {
			t.Errorf("passed:\n%swant:\n%s", out.String(), want)
		}
		out.Reset()
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, l := range []string{"level=ERROR msg=down source=a n=2\n", "level=ERROR msg=down g.source=d\n"} {
			if !strings.Contains(out.String(), l) {
				t.Errorf("at the period's end, passed:\n%swant %q among them", out.String(), l)
			}
		}
		out.Reset()
		for n := range 3 {
			log.Error("down", "source", "a", "n", n)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if want := "level=ERROR msg=down source=a n=2 left_out=2\n"; out.String() != want {
			t.Errorf("a period later, the clock frozen, passed:\n%swant:\n%s", out.String(), want)
		}
		if !h.Enabled(context.Background(), slog.LevelInfo) || h.Enabled(context.Background(), slog.LevelDebug) {
			t.Error("Enabled is not the wrapped handler's")
		}
	})
}

// TestBounded: past maxKinds kinds, the Handler forgets them and passes
// the next line of each again, rather than growing.
func TestBounded(t *testing.T) {
	var n int
	h := New(countHandler{&n}, time.Hour, "source")
	log := slog.New(h)
	for i := range maxKinds + 10 {
		log.Error("down", "source", i)
	}
	log.Error("down", "source", 0)
	if len(h.s.kinds) > maxKinds {
		t.Errorf("%d kinds remembered; want at most %d", len(h.s.kinds), maxKinds)
	}
	if n != maxKinds+11 {
		t.Errorf("%d lines passed; want %d", n, maxKinds+11)
	}
}

type countHandler struct{ n *int }

func (c countHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (c countHandler) Handle(context.Context, slog.Record) error { *c.n++; return nil }
func (c countHandler) WithAttrs([]slog.Attr) slog.Handler        { return c }
func (c countHandler) WithGroup(string) slog.Handler             { return c }

func noTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestFullKeepsLeftOut: when the kinds remembered reach maxKinds (a
// sender spraying many source names), the count of a kind's lines left
// out is not forgotten: its next line still says how many.
func TestFullKeepsLeftOut(t *testing.T) {
	var out buffer
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	h := New(slog.NewTextHandler(&out, nil), 10*time.Second, "source").WithClock(func() time.Time { return now })
	l := slog.New(h)
	for range 4 {
		l.Error("down", "source", "a") // the first passes, 3 left out
	}
	for i := range 2 * maxKinds {
		l.Info("rejected", "source", strconv.Itoa(i))
	}
	now = now.Add(10 * time.Second)
	out.Reset()
	l.Error("down", "source", "a")
	if !strings.Contains(out.String(), "left_out=3") {
		t.Errorf("after %d other kinds, the next line of a kind with 3 left out is %q; want left_out=3", 2*maxKinds, out.String())
	}
	h.s.mu.Lock()
	n := len(h.s.kinds)
	h.s.mu.Unlock()
	if n > maxKinds {
		t.Errorf("%d kinds remembered; want %d at most", n, maxKinds)
	}
}

// TestFullForgetsEnded: kinds that filled the Handler with lines left
// out do not keep a new kind's flood unthrottled once their period
// ended; what they left out is told as they are forgotten, once (their
// timers, behind the jumping clock, are stopped).
func TestFullForgetsEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out buffer
		now := time.Now()
		h := New(slog.NewTextHandler(&out, nil), 10*time.Second, "source").WithClock(func() time.Time { return now })
		l := slog.New(h)
		for i := range maxKinds {
			for range 3 {
				l.Info("rejected", "source", strconv.Itoa(i)) // the first passes, 2 left out
			}
		}
		now = now.Add(time.Minute)
		out.Reset()
		for range 3 {
			l.Error("down", "source", "a")
		}
		if n := strings.Count(out.String(), "msg=down"); n != 1 {
			t.Errorf("a new kind after a full period ended: %d lines of 3 passed; want 1", n)
		}
		if n, m := strings.Count(out.String(), "msg=rejected"), strings.Count(out.String(), "left_out=1"); n != maxKinds || m != maxKinds {
			t.Errorf("the %d kinds forgotten told %d lines, %d with left_out=1; want a line each, with left_out=1", maxKinds, n, m)
		}
		out.Reset()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := out.String(), "level=ERROR msg=down source=a left_out=1\n"; !strings.HasSuffix(got, want) || strings.Count(got, "\n") != 1 {
			t.Errorf("a minute later, passed:\n%swant the new kind's last line left out only:\n%s", got, want)
		}
		if n := timers(h); n != 0 {
			t.Errorf("%d timers left; want 0", n)
		}
	})
}

// buffer is a bytes.Buffer safe for the timers' goroutines to write to.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }
func (b *buffer) Reset()                      { b.mu.Lock(); defer b.mu.Unlock(); b.b.Reset() }

// TestTimerLeavesClockAlone: the clock given to WithClock is read by the
// lines logged only, on their goroutines, never by the timer that ends a
// period (it runs on a goroutine of its own, at any moment): a test's
// clock is moved by its owner between lines without a lock (the
// simulation's, internal/dst, whose receiver's log this is). The count
// still adds up: 5 lines, passed or left out.
func TestTimerLeavesClockAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out buffer
		var logging atomic.Bool
		now := time.Now()
		h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: noTime}), 10*time.Second, "source").
			WithClock(func() time.Time {
				if !logging.Load() {
					t.Error("the clock was read by the period's timer, not by a line logged")
				}
				return now
			})
		l := slog.New(h)
		log := func(n int) {
			logging.Store(true)
			defer logging.Store(false)
			l.Error("down", "source", "a", "n", n)
		}
		log(1)
		log(2)
		log(3)
		time.Sleep(10 * time.Second) // the period ends: its timer passes n=3
		synctest.Wait()
		now = now.Add(10 * time.Second) // the owner moves its clock, on its goroutine
		log(4)
		log(5)
		time.Sleep(time.Minute)
		synctest.Wait()
		n := 0
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			n++
			if _, v, ok := strings.Cut(line, LeftOut+"="); ok {
				left, _ := strconv.Atoi(v)
				n += left
			}
		}
		if n != 5 {
			t.Errorf("%d lines passed, counting those left out; want 5:\n%s", n, out.String())
		}
		if n := timers(h); n != 0 {
			t.Errorf("%d timers left; want 0", n)
		}
	})
}
