package deliver

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// manualClock is a Clock whose time moves only when the test says: fire
// runs the earliest pending timer, moving the time to its instant.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c  *manualClock
	at time.Time
	f  func()
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.timers, t)
	if i < 0 {
		return false
	}
	t.c.timers = slices.Delete(t.c.timers, i, i+1)
	return true
}

// pending returns the delays of the pending timers from now, soonest first.
func (c *manualClock) pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []time.Duration
	for _, t := range c.timers {
		ds = append(ds, t.at.Sub(c.now))
	}
	slices.Sort(ds)
	return ds
}

// fire moves the time to the earliest pending timer and runs it in its
// own goroutine, as time.AfterFunc does.
func (c *manualClock) fire(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	if len(c.timers) == 0 {
		c.mu.Unlock()
		t.Fatal("no timer to fire")
	}
	slices.SortStableFunc(c.timers, func(a, b *manualTimer) int { return a.at.Compare(b.at) })
	next := c.timers[0]
	c.timers = c.timers[1:]
	if next.at.After(c.now) {
		c.now = next.at
	}
	c.mu.Unlock()
	go next.f()
}

// waitFor waits until cond holds, failing only when it has not for
// stallLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > stallLimit {
			t.Fatalf("%s: nothing for %v", what, stallLimit)
		}
	}
}

// TestClockDrivesRetries: with an injected clock the retry schedule, the
// attempts' times and the outage window follow it, not the real time:
// three hours of retries run as fast as the test fires the timers.
func TestClockDrivesRetries(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 1 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &manualClock{now: start}
	d := newDispatcher(t, Config{
		Schedule: []time.Duration{time.Hour, 2 * time.Hour, time.Hour},
		Clock:    clock,
		// Down for the first 30 minutes of clock time from the first attempt.
		Faults: Faults{Outages: []Outage{{From: 0, To: 30 * time.Minute}}},
	})
	d.Send(s.target("ep"), event(1))

	wantAt := []time.Time{start, start.Add(time.Hour), start.Add(3 * time.Hour)}
	for i, gap := range []time.Duration{time.Hour, 2 * time.Hour} {
		waitFor(t, "attempt logged and retry scheduled", func() bool { return len(d.Log("ep")) == i+1 && len(clock.pending()) == 1 })
		if got := clock.pending(); got[0] != gap {
			t.Fatalf("after attempt %d the retry waits %v, want %v", i+1, got[0], gap)
		}
		clock.fire(t)
	}
	waitFor(t, "third attempt", func() bool { return len(d.Log("ep")) == 3 })
	wait(t, d)

	log := d.Log("ep")
	for i, a := range log {
		if !a.At.Equal(wantAt[i]) {
			t.Errorf("attempt %d at %v, want %v", i+1, a.At, wantAt[i])
		}
	}
	if log[0].Error != OutageError || log[1].Status != 500 || log[2].Status != 200 {
		t.Errorf("attempts %+v: want outage, 500, 200", log)
	}
	if got := len(s.got()); got != 2 {
		t.Errorf("%d arrivals, want 2 (the first attempt fell in the outage)", got)
	}
	if n := len(clock.pending()); n != 0 {
		t.Errorf("%d timers left after the delivery succeeded", n)
	}
}

// TestCloseStopsClockTimers: Close stops the pending timers of the
// injected clock and does not wait for them to fire.
func TestCloseStopsClockTimers(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	clock := &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	d := New(Config{Schedule: []time.Duration{time.Hour}, Clock: clock, Logger: quiet()})
	d.Send(s.target("ep"), event(1))
	waitFor(t, "retry scheduled", func() bool { return len(clock.pending()) == 1 })
	d.Close() // would hang if it waited for the hour
	if n := len(clock.pending()); n != 0 {
		t.Errorf("%d timers pending after Close", n)
	}
}

// TestRealClockUnderSynctest: the default clock is the time package's,
// so inside a synctest bubble the 41 hours of DefaultSchedule pass at
// once, on the bubble's fake time.
func TestRealClockUnderSynctest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		client := &http.Client{Transport: transportFunc(func(r *http.Request) (*http.Response, error) {
			status := http.StatusServiceUnavailable
			if n.Add(1) == int32(len(DefaultSchedule)+1) {
				status = http.StatusOK
			}
			return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})}
		d := New(Config{Client: client, Logger: quiet()})
		defer d.Close()
		start := time.Now()
		d.Send(Target{ID: "ep", URL: "http://sink.invalid/", Flavour: fakeFlavour{},
			Secrets: func() []string { return []string{"s"} }}, event(1))
		if err := d.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		log := d.Log("ep")
		if len(log) != len(DefaultSchedule)+1 || log[len(log)-1].Status != http.StatusOK {
			t.Fatalf("log %+v", log)
		}
		if got := log[len(log)-1].At.Sub(start); got != 41*time.Hour {
			t.Errorf("last attempt %v after the first, want the schedule's 41h", got)
		}
	})
}

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
