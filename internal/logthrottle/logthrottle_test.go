package logthrottle

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
		want  []string // the lines passed, without time
	}{
		{"one kind in a period: the first passes", []line{
			{0, slog.LevelError, "down", []any{"source", "a", "event_id", "1"}},
			{time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "2"}},
			{9 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "3"}},
		}, []string{"level=ERROR msg=down source=a event_id=1"}},
		{"the next period's first says how many were left out", []line{
			{0, slog.LevelError, "down", []any{"source", "a", "event_id", "1"}},
			{time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "2"}},
			{2 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "3"}},
			{10 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "4"}},
			{25 * time.Second, slog.LevelError, "down", []any{"source", "a", "event_id", "5"}},
		}, []string{
			"level=ERROR msg=down source=a event_id=1",
			"level=ERROR msg=down source=a event_id=4 left_out=2",
			"level=ERROR msg=down source=a event_id=5",
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
			"level=ERROR msg=down source=a",
			"level=ERROR msg=down source=b",
			"level=WARN msg=down source=a",
			"level=ERROR msg=up source=a",
			"level=ERROR msg=down source=a status=401",
			"level=ERROR msg=down source=a status=400",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
			var now time.Time
			h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: noTime}), 10*time.Second, "source", "status").
				WithClock(func() time.Time { return now })
			log := slog.New(h)
			for _, l := range c.lines {
				now = start.Add(l.after)
				log.Log(context.Background(), l.level, l.msg, l.attrs...)
			}
			if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("passed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestDerived: a key given by With counts, derived loggers share the
// count, and a key inside a group is no key.
func TestDerived(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	h := New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: noTime}), time.Minute, "source").
		WithClock(func() time.Time { return now })
	log := slog.New(h)
	log.With("source", "a").Error("down")
	log.Error("down", "source", "a") // the same kind, through another logger
	log.With("source", "b").Error("down")
	g := log.WithGroup("g")
	g.Error("down", "source", "c") // g.source: no key, the kind of no source
	g.Error("down", "source", "d")
	want := "level=ERROR msg=down source=a\nlevel=ERROR msg=down source=b\nlevel=ERROR msg=down g.source=c\n"
	if out.String() != want {
		t.Errorf("passed:\n%swant:\n%s", out.String(), want)
	}
	if !h.Enabled(context.Background(), slog.LevelInfo) || h.Enabled(context.Background(), slog.LevelDebug) {
		t.Error("Enabled is not the wrapped handler's")
	}
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
	var out bytes.Buffer
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
// ended.
func TestFullForgetsEnded(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	h := New(slog.NewTextHandler(&out, nil), 10*time.Second, "source").WithClock(func() time.Time { return now })
	l := slog.New(h)
	for i := range maxKinds {
		l.Info("rejected", "source", strconv.Itoa(i))
		l.Info("rejected", "source", strconv.Itoa(i)) // left out
	}
	now = now.Add(time.Minute)
	out.Reset()
	for range 3 {
		l.Error("down", "source", "a")
	}
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Errorf("a new kind after a full period ended: %d lines of 3 passed; want 1:\n%s", n, out.String())
	}
}
