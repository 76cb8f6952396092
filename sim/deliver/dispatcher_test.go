package deliver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook/sim/flavour"
)

// fakeFlavour is a minimal Flavour: a JSON body carrying the event id and
// the attempt's delivery id, signed with HMAC-SHA256 of "timestamp.body".
type fakeFlavour struct{}

func (fakeFlavour) Name() string      { return "fake" }
func (fakeFlavour) Provider() string  { return "hmac" }
func (fakeFlavour) NewSecret() string { return "secret" }

func (fakeFlavour) NewSecretFrom(io.Reader) string { return "secret" }
func (fakeFlavour) Body(ev flavour.Event, deliveryID string) ([]byte, error) {
	return json.Marshal(map[string]any{"id": ev.ID, "type": ev.Type, "delivery": deliveryID, "data": ev.Data})
}
func (fakeFlavour) Sign(secrets []string, ev flavour.Event, deliveryID string, body []byte, at time.Time) (http.Header, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no secret")
	}
	h := http.Header{}
	ts := strconv.FormatInt(at.Unix(), 10)
	h.Set("X-Fake-Timestamp", ts)
	h.Set("X-Fake-Delivery", deliveryID)
	for _, s := range secrets {
		h.Add("X-Fake-Signature", fakeSig(s, ts, body))
	}
	return h, nil
}
func (fakeFlavour) EventsPath() string                                 { return "/events" }
func (fakeFlavour) EventsQuery(*http.Request) (flavour.Query, error)   { return flavour.Query{}, nil }
func (fakeFlavour) EventsPage([]flavour.Event, string) ([]byte, error) { return []byte("{}"), nil }
func (fakeFlavour) EventID(ev flavour.Event) string                    { return ev.ID }

func fakeSig(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	return hex.EncodeToString(m.Sum(nil))
}

// arrival is one POST the test server received.
type arrival struct {
	EventID, Delivery string
	Header            http.Header
	Body              []byte
	At                time.Time
}

// sink is a webhook receiver recording what arrives. handle decides the
// answer to the n-th arrival (from 1); nil answers 200.
type sink struct {
	srv      *httptest.Server
	mu       sync.Mutex
	arrivals []arrival
}

func newSink(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request)) *sink {
	t.Helper()
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b struct{ ID, Delivery string }
		_ = json.Unmarshal(body, &b)
		s.mu.Lock()
		s.arrivals = append(s.arrivals, arrival{b.ID, b.Delivery, r.Header.Clone(), body, time.Now()})
		n := len(s.arrivals)
		s.mu.Unlock()
		if handle != nil {
			handle(n, w, r)
			return
		}
		_, _ = io.WriteString(w, `{"status":"stored"}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) got() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.arrivals)
}

func (s *sink) ids() []string {
	var ids []string
	for _, a := range s.got() {
		ids = append(ids, a.EventID)
	}
	return ids
}

func (s *sink) target(id string) Target {
	return Target{ID: id, URL: s.srv.URL, Secrets: func() []string { return []string{"whsec_test"} }, Flavour: fakeFlavour{}}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func event(i int) flavour.Event {
	return flavour.Event{
		ID: fmt.Sprintf("evt_%024d", i), Type: "payment.succeeded", Seq: int64(i),
		CreatedAt: time.Unix(1700000000, 0).UTC(), Environment: "test", APIVersion: "2024-01-01",
		Data: map[string]any{"id": fmt.Sprintf("pay_%d", i), "amount": 1000 + i},
	}
}

// newDispatcher returns a dispatcher closed at the end of the test.
func newDispatcher(t *testing.T, cfg Config) *Dispatcher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	d := New(cfg)
	t.Cleanup(d.Close)
	return d
}

// stallLimit is how long a test waits while nothing moves before it
// fails: a slow machine is not a failure, a stuck dispatcher is.
const stallLimit = 2 * time.Minute

// wait waits until d has nothing left to deliver, failing only when its
// stats have not changed for stallLimit, never because the run is long.
func wait(t *testing.T, d *Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Wait(ctx) }()
	last, moved := d.Stats(), time.Now()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if st := d.Stats(); st != last {
			last, moved = st, time.Now()
		} else if time.Since(moved) > stallLimit {
			t.Fatalf("Wait: nothing moved for %v (%+v)", stallLimit, st)
		}
	}
}

func countByID(ids []string) map[string]int {
	m := map[string]int{}
	for _, id := range ids {
		m[id]++
	}
	return m
}

func TestDefaultSchedule(t *testing.T) {
	t.Parallel()
	var sum time.Duration
	for i, s := range DefaultSchedule {
		if i > 0 && s <= DefaultSchedule[i-1] {
			t.Errorf("schedule not increasing at %d: %v after %v", i, s, DefaultSchedule[i-1])
		}
		sum += s
	}
	if sum != 41*time.Hour {
		t.Errorf("default schedule sums to %v, want 41h", sum)
	}
	if len(DefaultSchedule) != 9 {
		t.Errorf("default schedule has %d retries, want 9", len(DefaultSchedule))
	}
}

func TestSuccessAndLog(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 400)
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, long)
	})
	now := time.Now().Truncate(time.Second)
	d := newDispatcher(t, Config{Now: func() time.Time { return now }})
	ev := event(1)
	d.Send(s.target("ep_1"), ev)
	wait(t, d)

	got := s.got()
	if len(got) != 1 {
		t.Fatalf("%d arrivals, want 1", len(got))
	}
	a := got[0]
	if ct := a.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	ts := a.Header.Get("X-Fake-Timestamp")
	if ts != strconv.FormatInt(now.Unix(), 10) {
		t.Errorf("signed at %s, want %d", ts, now.Unix())
	}
	if sig := a.Header.Get("X-Fake-Signature"); sig != fakeSig("whsec_test", ts, a.Body) {
		t.Errorf("signature %q does not verify", sig)
	}
	if a.EventID != ev.ID {
		t.Errorf("event id %q", a.EventID)
	}

	log := d.Log("ep_1")
	if len(log) != 1 {
		t.Fatalf("log has %d attempts, want 1", len(log))
	}
	l := log[0]
	if l.EventID != ev.ID || l.EventType != ev.Type || l.N != 1 || l.Status != 200 || l.Error != "" || l.Fault != "" {
		t.Errorf("log entry %+v", l)
	}
	if !l.At.Equal(now) {
		t.Errorf("At %v, want %v", l.At, now)
	}
	if l.Latency <= 0 {
		t.Errorf("latency %v", l.Latency)
	}
	if l.Response != long[:ResponseExcerpt] {
		t.Errorf("response excerpt has %d bytes, want %d", len(l.Response), ResponseExcerpt)
	}
	if !strings.HasPrefix(a.Delivery, l.DeliveryID) || a.Delivery == l.DeliveryID {
		t.Errorf("attempt id %q should be fresh and derived from delivery %q", a.Delivery, l.DeliveryID)
	}
	if a.Header.Get("X-Fake-Delivery") != a.Delivery {
		t.Errorf("Sign got %q, Body got %q", a.Header.Get("X-Fake-Delivery"), a.Delivery)
	}
	if !d.Delivered(ev.ID) || d.Delivered("evt_other") {
		t.Error("Delivered wrong")
	}
	if st := d.Stats(); st != (Stats{Events: 1, Attempts: 1, Acked: 1}) {
		t.Errorf("stats %+v", st)
	}
	if len(d.Log("ep_other")) != 0 {
		t.Error("log of another endpoint not empty")
	}
}

func TestRetryScheduleScaled(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 3 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	sched := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, time.Hour}
	const scale = 50 // 20ms, 40ms, 60ms
	d := newDispatcher(t, Config{Schedule: sched, TimeScale: scale})
	d.Send(s.target("ep"), event(1))
	wait(t, d)

	got := s.got()
	if len(got) != 4 {
		t.Fatalf("%d arrivals, want 4", len(got))
	}
	log := d.Log("ep")
	if len(log) != 4 {
		t.Fatalf("%d attempts logged, want 4", len(log))
	}
	seen := map[string]bool{}
	for i, l := range log {
		want := 500
		if i == 3 {
			want = 200
		}
		if l.N != i+1 || l.Status != want || l.DeliveryID != log[0].DeliveryID {
			t.Errorf("attempt %d: %+v", i, l)
		}
		if (l.Error == "") != (want == 200) {
			t.Errorf("attempt %d error %q", i, l.Error)
		}
		if i > 0 {
			min := sched[i-1] / scale
			if gap := got[i].At.Sub(got[i-1].At); gap < min {
				t.Errorf("arrival %d came %v after the previous, want at least %v", i+1, gap, min)
			}
			if gap := l.At.Sub(log[i-1].At); gap < min {
				t.Errorf("attempt %d At %v after the previous, want at least %v", i+1, gap, min)
			}
		}
		if seen[got[i].Delivery] {
			t.Errorf("attempt id %q reused", got[i].Delivery)
		}
		seen[got[i].Delivery] = true
	}
	if st := d.Stats(); st.Attempts != 4 || st.Failed != 3 || st.Acked != 1 || st.GaveUp != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestGivesUpAfterSchedule(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	// The whole default schedule (41h) in about 150ms.
	d := newDispatcher(t, Config{TimeScale: 1_000_000})
	ev := event(1)
	d.Send(s.target("ep"), ev)
	wait(t, d)
	want := len(DefaultSchedule) + 1
	if n := len(s.got()); n != want {
		t.Errorf("%d arrivals, want %d", n, want)
	}
	if st := d.Stats(); st.GaveUp != 1 || st.Attempts != want || st.Failed != want || st.Acked != 0 {
		t.Errorf("stats %+v", st)
	}
	if d.Delivered(ev.ID) {
		t.Error("Delivered true")
	}
	if log := d.Log("ep"); len(log) != want || log[want-1].N != want || log[want-1].Status != 503 {
		t.Errorf("log %+v", log)
	}
}

func TestRedirectIsAFailure(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	d := newDispatcher(t, Config{Schedule: []time.Duration{}})
	ev := event(1)
	d.Send(Target{ID: "ep", URL: srv.URL + "/hook", Secrets: func() []string { return []string{"s"} }, Flavour: fakeFlavour{}}, ev)
	wait(t, d)
	if followed.Load() != 0 {
		t.Error("redirect followed")
	}
	log := d.Log("ep")
	if len(log) != 1 || log[0].Status != 302 || !strings.Contains(log[0].Error, "redirect") {
		t.Errorf("log %+v", log)
	}
	if d.Delivered(ev.ID) || d.Stats().GaveUp != 1 {
		t.Errorf("delivered %v, stats %+v", d.Delivered(ev.ID), d.Stats())
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
	})
	d := newDispatcher(t, Config{Timeout: 100 * time.Millisecond, Schedule: []time.Duration{10 * time.Millisecond}})
	d.Send(s.target("ep"), event(1))
	wait(t, d)
	log := d.Log("ep")
	if len(log) != 2 {
		t.Fatalf("log %+v", log)
	}
	for _, l := range log {
		if l.Status != 0 || !strings.Contains(l.Error, "timeout") || l.Latency < 100*time.Millisecond {
			t.Errorf("attempt %+v", l)
		}
	}
	if st := d.Stats(); st.GaveUp != 1 || st.Failed != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	d := newDispatcher(t, Config{Schedule: []time.Duration{}})
	d.Send(Target{ID: "ep", URL: url, Secrets: func() []string { return []string{"s"} }, Flavour: fakeFlavour{}}, event(1))
	wait(t, d)
	if log := d.Log("ep"); len(log) != 1 || log[0].Status != 0 || log[0].Error == "" {
		t.Errorf("log %+v", log)
	}
}

func TestFailingEndpoint(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "no", http.StatusInternalServerError)
		}
	})
	var mu sync.Mutex
	var alerts []string
	d := newDispatcher(t, Config{
		FailingAfter: 3,
		Schedule:     []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond},
		OnAlert: func(ep, msg string) {
			mu.Lock()
			defer mu.Unlock()
			alerts = append(alerts, ep+": "+msg)
		},
	})
	d.Send(s.target("ep_down"), event(1))
	wait(t, d)
	if !d.Failing("ep_down") {
		t.Error("endpoint not failing after 5 failed attempts")
	}
	if d.Failing("ep_other") {
		t.Error("unrelated endpoint failing")
	}
	mu.Lock()
	if len(alerts) != 1 || !strings.HasPrefix(alerts[0], "ep_down: ") {
		t.Errorf("alerts %q, want one", alerts)
	}
	mu.Unlock()

	up.Store(true)
	d.Send(s.target("ep_down"), event(2))
	wait(t, d)
	if d.Failing("ep_down") {
		t.Error("still failing after a success")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(alerts) != 1 {
		t.Errorf("alerts %q, want one", alerts)
	}
}

func TestFaultDrop(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	d := newDispatcher(t, Config{Faults: Faults{Drop: 1}})
	for i := range 5 {
		d.Send(s.target("ep"), event(i))
	}
	wait(t, d)
	if n := len(s.got()); n != 0 {
		t.Errorf("%d arrivals, want none", n)
	}
	for i := range 5 {
		if d.Delivered(event(i).ID) {
			t.Errorf("event %d delivered", i)
		}
	}
	if st := d.Stats(); st != (Stats{Events: 5, Dropped: 5}) {
		t.Errorf("stats %+v", st)
	}
}

func TestFaultDuplicate(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	d := newDispatcher(t, Config{Faults: Faults{Duplicate: 1}})
	for i := range 5 {
		d.Send(s.target("ep"), event(i))
	}
	wait(t, d)
	counts := countByID(s.ids())
	if len(counts) != 5 {
		t.Errorf("%d distinct events arrived, want 5", len(counts))
	}
	for id, n := range counts {
		if n != 2 {
			t.Errorf("%s arrived %d times, want 2", id, n)
		}
	}
	if st := d.Stats(); st.Duplicates != 5 || st.Acked != 10 {
		t.Errorf("stats %+v", st)
	}
	byEvent := map[string][]Attempt{}
	for _, l := range d.Log("ep") {
		byEvent[l.EventID] = append(byEvent[l.EventID], l)
	}
	for id, ls := range byEvent {
		if len(ls) != 2 || ls[0].DeliveryID == ls[1].DeliveryID || ls[0].Fault != "" || ls[1].Fault != "duplicate" {
			t.Errorf("%s: %+v", id, ls)
		}
	}
}

func TestFaultBurst(t *testing.T) {
	t.Parallel()
	const size = 5
	var inflight, peak atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		if cur == size {
			once.Do(func() { close(all) })
		}
		select { // hold every copy until all are in flight
		case <-all:
		case <-time.After(stallLimit):
		}
	})
	d := newDispatcher(t, Config{Faults: Faults{Burst: 1, BurstSize: size}})
	ev := event(1)
	d.Send(s.target("ep"), ev)
	wait(t, d)
	if n := len(s.got()); n != size {
		t.Errorf("%d arrivals, want %d", n, size)
	}
	if p := peak.Load(); p != size {
		t.Errorf("at most %d copies in flight together, want %d", p, size)
	}
	ids := map[string]bool{}
	for _, l := range d.Log("ep") {
		if l.Fault != "burst" || l.EventID != ev.ID || l.Status != 200 {
			t.Errorf("attempt %+v", l)
		}
		ids[l.DeliveryID] = true
	}
	if len(ids) != size {
		t.Errorf("%d delivery ids, want %d", len(ids), size)
	}
	if st := d.Stats(); st.Bursts != 1 || st.Acked != size {
		t.Errorf("stats %+v", st)
	}
}

func TestFaultBurstCopiesRetryOnTheirOwn(t *testing.T) {
	t.Parallel()
	// Only the first arrival is answered 2xx: the other copies retry.
	// No copy is answered before all three arrived, so that a retry
	// cannot arrive before a copy's first attempt, however slow the
	// machine (it did, once: that copy's retry met a 429 and gave up).
	var firsts sync.WaitGroup
	firsts.Add(3)
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 3 {
			firsts.Done()
			firsts.Wait()
		}
		if n > 1 && n <= 3 {
			http.Error(w, "busy", http.StatusTooManyRequests)
		}
	})
	d := newDispatcher(t, Config{Faults: Faults{Burst: 1, BurstSize: 3}, Schedule: []time.Duration{5 * time.Millisecond}})
	d.Send(s.target("ep"), event(1))
	wait(t, d)
	if st := d.Stats(); st.Attempts != 5 || st.Acked != 3 || st.Failed != 2 || st.GaveUp != 0 {
		t.Errorf("stats %+v", st)
	}
}

// reorderRun sends n events through a reorder window and returns the
// order in which the events of the first full window arrived, and all
// arrivals.
func reorderRun(t *testing.T, seed int64, window, n int) (first, all []string) {
	s := newSink(t, nil)
	d := newDispatcher(t, Config{Seed: seed, Faults: Faults{ReorderWindow: window}})
	for i := range n {
		d.Send(s.target("ep"), event(i))
	}
	wait(t, d)
	all = s.ids()
	inFirst := map[string]bool{}
	for i := range window {
		inFirst[event(i).ID] = true
	}
	for _, id := range all {
		if inFirst[id] {
			first = append(first, id)
		}
	}
	return first, all
}

func TestFaultReorder(t *testing.T) {
	t.Parallel()
	var sent []string
	for i := range 10 {
		sent = append(sent, event(i).ID)
	}
	first, all := reorderRun(t, 7, 10, 10)
	if got, want := countByID(all), countByID(sent); !mapsEqual(got, want) {
		t.Errorf("arrivals %v, want each of %v once", got, sent)
	}
	if slices.Equal(first, sent) {
		t.Error("window arrived in send order")
	}
	again, _ := reorderRun(t, 7, 10, 10)
	if !slices.Equal(first, again) {
		t.Errorf("same seed, different orders:\n%v\n%v", first, again)
	}

	// A partial window is released by Wait.
	_, all = reorderRun(t, 7, 10, 13)
	if c := countByID(all); len(c) != 13 || len(all) != 13 {
		t.Errorf("%d arrivals of %d events, want 13 of 13", len(all), len(c))
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFaultDelay(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	const maxDelay = 150 * time.Millisecond
	d := newDispatcher(t, Config{Seed: 3, TimeScale: 100, Faults: Faults{Delay: maxDelay * 100}})
	start := time.Now()
	for i := range 10 {
		d.Send(s.target("ep"), event(i))
	}
	wait(t, d)
	got := s.got()
	if len(got) != 10 {
		t.Fatalf("%d arrivals, want 10", len(got))
	}
	if last := got[len(got)-1].At.Sub(start); last < maxDelay/5 {
		t.Errorf("last arrival %v after sending, want some delay", last)
	}
	var sent []string
	for i := range 10 {
		sent = append(sent, event(i).ID)
	}
	if slices.Equal(s.ids(), sent) {
		t.Error("random delays kept the send order")
	}
}

func TestFaultOutage(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	sched := slices.Repeat([]time.Duration{50 * time.Millisecond}, 20)
	d := newDispatcher(t, Config{Schedule: sched, Faults: Faults{Outages: []Outage{{0, 200 * time.Millisecond}}}})
	ev := event(1)
	d.Send(s.target("ep"), ev)
	wait(t, d)
	if n := len(s.got()); n != 1 {
		t.Errorf("target saw %d attempts, want only the one after the outage", n)
	}
	log := d.Log("ep")
	if len(log) < 2 {
		t.Fatalf("log %+v, want outage failures then a success", log)
	}
	for _, l := range log[:len(log)-1] {
		if l.Error != OutageError || l.Status != 0 {
			t.Errorf("attempt during the outage %+v", l)
		}
	}
	if last := log[len(log)-1]; last.Status != 200 || last.Error != "" {
		t.Errorf("last attempt %+v", last)
	}
	if st := d.Stats(); st.Outage != len(log)-1 || st.Failed != len(log)-1 || st.Acked != 1 {
		t.Errorf("stats %+v", st)
	}
	if !d.Delivered(ev.ID) {
		t.Error("not delivered after the outage")
	}
}

// decisions runs 40 events through every probabilistic fault and returns
// how often each event arrived and the stats.
func decisions(t *testing.T, seed int64) (map[string]int, Stats) {
	s := newSink(t, nil)
	d := newDispatcher(t, Config{Seed: seed, Faults: Faults{Drop: 0.3, Burst: 0.2, BurstSize: 3, Duplicate: 0.3, Delay: 20 * time.Millisecond}})
	for i := range 40 {
		d.Send(s.target("ep"), event(i))
	}
	wait(t, d)
	got := countByID(s.ids())
	for i := range 40 {
		id := event(i).ID
		if (got[id] > 0) != d.Delivered(id) {
			t.Errorf("%s arrived %d times, Delivered %v", id, got[id], d.Delivered(id))
		}
	}
	return got, d.Stats()
}

func TestReproducibleWithSeed(t *testing.T) {
	t.Parallel()
	a, sa := decisions(t, 42)
	b, sb := decisions(t, 42)
	if !mapsEqual(a, b) {
		t.Errorf("same seed, different deliveries:\n%v\n%v", a, b)
	}
	if sa != sb {
		t.Errorf("same seed, different stats:\n%+v\n%+v", sa, sb)
	}
	if sa.Dropped == 0 || sa.Bursts == 0 || sa.Duplicates == 0 {
		t.Errorf("seed 42 drew no drop, burst or duplicate: %+v", sa)
	}
	c, _ := decisions(t, 43)
	if mapsEqual(a, c) {
		t.Error("seeds 42 and 43 gave the same deliveries")
	}
}

// TestResend: a resend goes to the endpoint as it is now (here its URL
// moved to another sink), with the delivery's id and its next attempt
// number.
func TestResend(t *testing.T) {
	t.Parallel()
	s, moved := newSink(t, nil), newSink(t, nil)
	d := newDispatcher(t, Config{})
	d.Send(s.target("ep"), event(1))
	wait(t, d)
	id := d.Log("ep")[0].DeliveryID
	if err := d.Resend(id, moved.target("ep")); err != nil {
		t.Fatal(err)
	}
	wait(t, d)
	got, again := s.got(), moved.got()
	if len(got) != 1 || len(again) != 1 || got[0].EventID != again[0].EventID || got[0].Delivery == again[0].Delivery {
		t.Errorf("arrivals %+v at the old URL, %+v at the new one; want one each", got, again)
	}
	log := d.Log("ep")
	if len(log) != 2 || log[1].DeliveryID != id || log[1].Fault != "resend" || log[1].N != 2 || log[1].Status != 200 {
		t.Errorf("log %+v", log)
	}
	if err := d.Resend("dlv_nope", moved.target("ep")); !errors.Is(err, ErrUnknownDelivery) {
		t.Errorf("Resend of an unknown id: %v", err)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	})
	d := newDispatcher(t, Config{Schedule: []time.Duration{time.Hour}})
	d.Send(s.target("ep"), event(1))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := d.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait: %v, want deadline exceeded", err)
	}
	if st := d.Stats(); st.Attempts != 1 || st.GaveUp != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestWaitWithNothingToDo(t *testing.T) {
	t.Parallel()
	d := newDispatcher(t, Config{})
	wait(t, d)
}

func TestCloseDoesNotHang(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 10)
	s := newSink(t, func(n int, w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done() // hangs until the dispatcher gives up on it
	})
	d := New(Config{Logger: quiet(), Faults: Faults{Delay: time.Hour, ReorderWindow: 0}})
	other := New(Config{Logger: quiet()})
	other.Send(s.target("ep"), event(1)) // in flight when closed
	d.Send(s.target("ep"), event(2))     // waiting on its delay timer
	select {
	case <-arrived:
	case <-time.After(stallLimit):
		t.Fatalf("nothing arrived in %v", stallLimit)
	}
	done := make(chan struct{})
	go func() {
		d.Close()
		other.Close()
		other.Close() // twice is fine
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stallLimit):
		t.Fatalf("Close hangs for %v", stallLimit)
	}
	if n := len(other.Log("ep")); n != 0 {
		t.Errorf("abandoned attempt logged: %d entries", n)
	}
	other.Send(s.target("ep"), event(3)) // ignored
	if err := other.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close: %v", err)
	}
	if err := other.Resend("dlv_x", Target{}); err == nil {
		t.Error("Resend after Close succeeded")
	}
}

// TestReorderWindowReleasedWhenQuiet: events that never fill a window
// (a quiet provider) are delivered all the same, without Wait.
func TestReorderWindowReleasedWhenQuiet(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	d := newDispatcher(t, Config{Faults: Faults{ReorderWindow: 5}})
	for i := range 3 {
		d.Send(s.target("ep"), event(i))
	}
	for moved, n := time.Now(), 0; len(s.got()) < 3; time.Sleep(10 * time.Millisecond) {
		if got := len(s.got()); got != n {
			moved, n = time.Now(), got
		} else if time.Since(moved) > stallLimit {
			t.Fatalf("%d of 3 events delivered without Wait, and nothing more for %v; want all", n, stallLimit)
		}
	}
}

// TestDecisionsDoNotDependOnPace: the faults drawn for each event (drop,
// delay, burst, duplicate) are the same whether the events come quickly
// or so slowly that reorder windows are released half full, as on a
// loaded machine; only the order within a window may differ.
func TestDecisionsDoNotDependOnPace(t *testing.T) {
	t.Parallel()
	run := func(pause time.Duration) map[string]string {
		s := newSink(t, nil)
		d := newDispatcher(t, Config{Seed: 7, Faults: Faults{Burst: 0.3, BurstSize: 2, Duplicate: 0.3, ReorderWindow: 4}})
		for i := range 12 {
			d.Send(s.target("ep"), event(i))
			if i%3 == 1 {
				time.Sleep(pause) // the window's hold ends first
			}
		}
		wait(t, d)
		faults := map[string]string{}
		for _, a := range d.Log("ep") {
			faults[a.EventID] += a.Fault + " "
		}
		for id, f := range faults { // the attempts' order is not a decision
			fs := strings.Fields(f)
			slices.Sort(fs)
			faults[id] = strings.Join(fs, " ")
		}
		return faults
	}
	quick, slow := run(0), run(2*ReorderHold)
	for i := range 12 {
		id := event(i).ID
		if quick[id] != slow[id] {
			t.Errorf("%s: faults %q when sent quickly, %q when sent slowly", id, quick[id], slow[id])
		}
	}
}
