package process

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/internal/logthrottle"
	"github.com/payhook/payhook/store"
)

// TestLimitFetch: a source's FetchRate spaces its reads evenly, however
// many workers ask at once; a read whose turn is more than maxFetchWait
// away gives its worker back (jobs.Later, for that long) instead of
// waiting in it, and one whose attempt ends while it waits fails without
// reaching the provider. In a synctest bubble, so that the time counted is
// the bubble's, not this machine's.
func TestLimitFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI(nil)
		fetch := newFetchLimiter(api.fetch, 4).fetch
		var mu sync.Mutex
		var wg sync.WaitGroup
		var later []string
		for i := range 20 { // 20 workers at once, each an event's job
			wg.Go(func() {
				_, err := fetch(context.Background(), &payhook.Event{ID: int64(i + 1)})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					later = append(later, err.Error())
				}
			})
		}
		wg.Wait()
		// Four a second, one at a time, within maxFetchWait (1 s): five
		// read, at 0, 0.25, 0.5, 0.75 and 1 s.
		at := api.reads()
		if len(at) != 5 {
			t.Fatalf("%d reads at %v; want 5", len(at), at)
		}
		for i, d := range at {
			if want := time.Duration(i) * time.Second / 4; d != want {
				t.Errorf("read %d at %v; want %v", i+1, d, want)
			}
		}
		// The 15 others come back for their turns, booked: 1.25 s, 1.5 s
		// and so on to 4.75 s.
		for k := 5; k < 20; k++ {
			want := fmt.Sprintf("tried again in %s: ", time.Duration(k)*time.Second/4)
			if !slices.ContainsFunc(later, func(s string) bool { return strings.HasPrefix(s, want) }) {
				t.Errorf("no read put off with %q (%q); want 15, tried again in 1.25s to 4.75s", want, later)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		time.Sleep(3 * time.Second) // at 4 s: the next turn free is at 5 s
		if _, err := fetch(ctx, &payhook.Event{ID: 100}); err == nil || len(api.reads()) != 5 {
			t.Errorf("a read whose attempt ends before its turn = %v, %d reads; want an error and no read", err, len(api.reads()))
		}
	})
}

// TestNewFetchSource: the queue reads first the events of the sources
// with a Fetch only; when every source has one, it need not ask
// (FetchSource nil: every event alone, as before), and when none has,
// no event is read.
func TestNewFetchSource(t *testing.T) {
	fetch := func(context.Context, *payhook.Event) ([]byte, error) { return nil, nil }
	api := payhook.Source{Name: "api", Provider: "stripe", Fetch: fetch}
	plain := payhook.Source{Name: "plain", Provider: "stripe"}
	for _, tc := range []struct {
		name         string
		sources      []payhook.Source
		fetch, asked bool
	}{
		{"none fetches", []payhook.Source{plain}, false, false},
		{"all fetch", []payhook.Source{api}, true, false},
		{"one of two fetches", []payhook.Source{api, plain}, true, true},
	} {
		jc, err := New(Config{DB: &store.DB{}, Sources: tc.sources})
		if err != nil {
			t.Fatal(err)
		}
		if (jc.Fetch != nil) != tc.fetch || (jc.FetchSource != nil) != tc.asked {
			t.Errorf("%s: Fetch set %v, FetchSource set %v; want %v, %v", tc.name, jc.Fetch != nil, jc.FetchSource != nil, tc.fetch, tc.asked)
		}
		if tc.asked && (!jc.FetchSource("api") || jc.FetchSource("plain")) {
			t.Errorf("%s: FetchSource(api) %v, FetchSource(plain) %v; want true, false", tc.name, jc.FetchSource("api"), jc.FetchSource("plain"))
		}
	}
}

// TestLimitFetchFirstComeFirstRead: an event put off under a source's
// FetchRate keeps the turn it was given: it is read when it comes back
// (as River's snooze brings it back, after the jobs.Later's time), before
// the events that asked after it, and is put off once. Before, its turn
// went back to the limiter, and the events that asked meanwhile (faster
// than the rate, a backlog growing) took every turn as it came within a
// second: the put-off event came back to find the next second booked,
// again and again, starved while they arrived; and every put-off event
// came back at each turn, a snooze for each of them per turn.
func TestLimitFetchFirstComeFirstRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []int64
		putOff := map[int64]int{}
		fetch := newFetchLimiter(func(_ context.Context, ev *payhook.Event) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, ev.ID)
			return []byte(`{}`), nil
		}, 4).fetch
		var wg sync.WaitGroup
		job := func(id int64) { // an event's job, snoozed as long as each Later says
			wg.Go(func() {
				for {
					_, err := fetch(context.Background(), &payhook.Event{ID: id})
					if err == nil {
						return
					}
					msg, ok := strings.CutPrefix(err.Error(), "tried again in ")
					d, perr := time.ParseDuration(strings.SplitN(msg, ":", 2)[0])
					if !ok || perr != nil {
						t.Errorf("event %d: %v; want a jobs.Later", id, err)
						return
					}
					mu.Lock()
					putOff[id]++
					mu.Unlock()
					time.Sleep(d)
				}
			})
		}
		for id := range int64(5) { // five turns within a second
			job(id + 1)
		}
		synctest.Wait()
		job(6) // put off
		synctest.Wait()
		for i := range int64(80) { // then eight a second for 10 s
			time.Sleep(time.Second / 8)
			job(100 + i)
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if i := slices.Index(order, 6); i != 5 {
			t.Errorf("event 6 read %dth (order %v); want 6th, before the events that asked after it", i+1, order)
		}
		for id, n := range putOff {
			if n > 1 {
				t.Errorf("event %d put off %d times; want once at most", id, n)
			}
		}
	})
}

// TestRateLimited: a read the provider refuses for its rate limit (429)
// pauses the source's reads for the Retry-After it asked (1 s if none)
// and puts the event off until then, and up to 2 s more, counted as no
// attempt; during the pause no read of the source reaches the provider.
// An hour after an event was first put off, in a row, the next refusal
// or pause is a failed attempt. A read that succeeds ends the row.
func TestRateLimited(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := start
	var answer error
	calls := 0
	fetch := func(context.Context, *payhook.Event) ([]byte, error) {
		calls++
		if answer != nil {
			return nil, fmt.Errorf("stripe: fetch: %w", answer)
		}
		return []byte(`{}`), nil
	}
	var logged bytes.Buffer
	counted := map[string]int{}
	p := &processor{clock: func() time.Time { return now }, limited: map[int64]time.Time{}, pause: map[string]time.Time{},
		rateLog: slog.New(logthrottle.New(slog.NewTextHandler(&logged, nil), rateLogPeriod, "source").
			WithClock(func() time.Time { return now })),
		onRateLimited: func(source string) { counted[source]++ },
		bySource:      map[string]payhook.Source{"api": {Name: "api", Fetch: fetch}, "other": {Name: "other", Fetch: fetch}}}
	refused := func(retryAfter time.Duration) error {
		return &apiget.APIError{Method: "GET", Path: "/v1/payment_intents/pi_1", Status: http.StatusTooManyRequests, RetryAfter: retryAfter}
	}
	for _, tc := range []struct {
		at       time.Duration // since the start
		source   string
		event    int64
		answer   error
		called   bool          // the provider was asked
		want     string        // the error's start; "" for a read
		min, max time.Duration // the put-off, for a Later
	}{
		{0, "api", 1, refused(7 * time.Second), true, "tried again in ", 7 * time.Second, 9 * time.Second},
		// Paused: other events of the source are put off unasked; another
		// source reads.
		{3 * time.Second, "api", 2, nil, false, "tried again in ", 4 * time.Second, 6 * time.Second},
		{3 * time.Second, "other", 3, nil, true, "", 0, 0},
		{8 * time.Second, "api", 1, refused(0), true, "tried again in ", time.Second, 3 * time.Second},
		{59 * time.Minute, "api", 1, refused(time.Second), true, "tried again in ", time.Second, 3 * time.Second},
		{59*time.Minute + 500*time.Millisecond, "api", 1, nil, false, "tried again in ", 0, 0},
		{time.Hour + 2*time.Second, "api", 1, refused(time.Second), true,
			"put off for the provider's rate limit for 1h0m2s: the provider refused the read for its rate limit: stripe: fetch: GET /v1/payment_intents/pi_1: 429", 0, 0},
		{time.Hour + 2500*time.Millisecond, "api", 1, nil, false, "put off for the provider's rate limit for 1h0m3s: the provider refused a read for its rate limit and asked for none before", 0, 0},
		{time.Hour + 4*time.Second, "api", 1, &apiget.APIError{Method: "GET", Path: "/x", Status: http.StatusServiceUnavailable}, true, "stripe: fetch: GET /x: 503", 0, 0},
		{time.Hour + 5*time.Second, "api", 1, nil, true, "", 0, 0},
		{2 * time.Hour, "api", 1, refused(time.Second), true, "tried again in ", time.Second, 3 * time.Second},
	} {
		now, answer, calls = start.Add(tc.at), tc.answer, 0
		_, err := p.fetch(context.Background(), &payhook.Event{ID: tc.event, Source: tc.source})
		switch {
		case tc.want == "" && err != nil, tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Fatalf("at +%s, event %d of %s: %v; want %q", tc.at, tc.event, tc.source, err, tc.want)
		case (calls > 0) != tc.called:
			t.Fatalf("at +%s, event %d of %s: the provider asked %d times; want asked %v", tc.at, tc.event, tc.source, calls, tc.called)
		}
		if tc.max > 0 {
			in, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "tried again in "), ":")
			if d, perr := time.ParseDuration(in); perr != nil || d < tc.min || d >= tc.max {
				t.Errorf("at +%s: %v; want put off %s to %s", tc.at, err, tc.min, tc.max)
			}
		}
	}
	// Each of the five 429s is counted (metrics); an event met by the
	// pause is not. They are told a line each but the second, 8 s after
	// the first, within its 10 s: the next line says it was left out.
	if len(counted) != 1 || counted["api"] != 5 {
		t.Errorf("429s counted %v; want api: 5", counted)
	}
	if n := strings.Count(logged.String(), "level=WARN msg=\"the provider refused a read for its rate limit (429)"); n != 4 ||
		strings.Count(logged.String(), "source=api") != 4 || strings.Count(logged.String(), "left_out=1") != 1 {
		t.Errorf("the 429s told in %d lines; want 4, of source api, one with left_out=1:\n%s", n, logged.String())
	}
}

// TestLimitFetchForgetsTurnsGoneBy: the turn of an event put off whose
// job did not come back to this process (a replay, or another instance,
// processed the event) is forgotten bookedFor after it, and the event,
// should it ask again, asks for a turn anew rather than read at once out
// of turn. Before, the prune compared the turn's delay, which a
// rate.Reservation never gives below zero, to -bookedFor: it forgot none,
// and the map grew with every such event for the life of the process.
func TestLimitFetchForgetsTurnsGoneBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI(nil)
		l := newFetchLimiter(api.fetch, 1)
		// One a second: events 1 and 2 read at 0 and 1 s, 3 to 10 put
		// off, booked at 2 to 9 s; their jobs never come back here.
		ask(l, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
		time.Sleep(bookedFor + time.Minute) // every one of those turns is more than bookedFor gone
		// Three more at once: one reads, one waits a second, one is put
		// off, which forgets the turns gone by.
		ask(l, 100, 101, 102)
		l.mu.Lock()
		n := len(l.booked)
		l.mu.Unlock()
		if n != 1 {
			t.Errorf("%d turns booked; want 1, the event just put off's", n)
		}
		// Event 3 asks again (replayed): it asks for a turn, after 102's.
		if _, err := l.fetch(context.Background(), &payhook.Event{ID: 3}); err == nil {
			t.Error("event 3, asking long after its turn while the next is booked, was read; want put off")
		}
		oneASecond(t, api.reads())
	})
}

// fakeAPI is a provider's API that records when it is asked, since it
// was made (in a synctest bubble, the bubble's time), and answers with
// answer, or {} when answer is nil.
type fakeAPI struct {
	start  time.Time
	answer func(ev *payhook.Event) ([]byte, error)
	mu     sync.Mutex
	at     []time.Duration
}

func newFakeAPI(answer func(ev *payhook.Event) ([]byte, error)) *fakeAPI {
	return &fakeAPI{start: time.Now(), answer: answer}
}

// fetch is the API's Fetch.
func (a *fakeAPI) fetch(_ context.Context, ev *payhook.Event) ([]byte, error) {
	a.mu.Lock()
	a.at = append(a.at, time.Since(a.start))
	a.mu.Unlock()
	if a.answer == nil {
		return []byte(`{}`), nil
	}
	return a.answer(ev)
}

// reads returns when the API was asked.
func (a *fakeAPI) reads() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.at)
}

// oneASecond fails t when two reads at are less than a second apart
// (FetchRate 1).
func oneASecond(t *testing.T, at []time.Duration) {
	t.Helper()
	for i := 1; i < len(at); i++ {
		if at[i]-at[i-1] < time.Second {
			t.Errorf("reads at %v: %v and %v less than a second apart; want one a second (FetchRate 1)", at, at[i-1], at[i])
		}
	}
}

// TestLimitFetchKeepsLateTurns: an event put off whose job comes back
// late, the queue being behind, still finds its turn, though turns were
// pruned meanwhile: it is read, not put off again behind the turns booked
// since, where it would come back late again (and while the queue stayed
// that far behind, every event put off would, none read).
func TestLimitFetchKeepsLateTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		l := newFetchLimiter(func(context.Context, *payhook.Event) ([]byte, error) {
			reads.Add(1)
			return []byte(`{}`), nil
		}, 1)
		ask(l, 1, 2, 3) // 3 is put off, its turn at 2 s
		time.Sleep(5 * time.Minute)
		ask(l, 100, 101, 102) // a put-off, which prunes
		time.Sleep(5 * time.Minute)
		ask(l, 200, 201, 202, 203) // the next turns booked, to 10 min 3 s
		before := reads.Load()
		if _, err := l.fetch(context.Background(), &payhook.Event{ID: 3}); err != nil || reads.Load() != before+1 {
			t.Errorf("event 3, back 10 minutes after its turn: %v, %d reads; want read", err, reads.Load()-before)
		}
	})
}

// ask has l read the events with ids at once, each in a goroutine of
// its own, as a worker each, asking in the order of ids, and waits for
// them. In a synctest bubble.
func ask(l *fetchLimiter, ids ...int64) {
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { l.fetch(context.Background(), &payhook.Event{ID: id}) })
		synctest.Wait() // it read, waits for its turn or was put off
	}
	wg.Wait()
}

// TestPauseKeepsFetchRate: a source with a FetchRate whose reads pause
// after a 429 still reads at most its rate once the pause is over. The
// events put off under the rate whose turns fell within the pause meet
// the pause, are put off until its end (and up to 2 s more), and come
// back then, together: each must take a turn again, not read at once on
// its turn gone by. Before, they all read within those 2 s, a burst of
// every turn the pause covered (up to api_rate × Retry-After reads),
// which is what the provider refuses.
func TestPauseKeepsFetchRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI(func(ev *payhook.Event) ([]byte, error) {
			if ev.ID == 2 {
				return nil, &apiget.APIError{Method: "GET", Path: "/v1/charges/ch_2", Status: http.StatusTooManyRequests, RetryAfter: 10 * time.Second}
			}
			return []byte(`{}`), nil
		})
		jc, err := New(Config{DB: &store.DB{}, Sources: []payhook.Source{{Name: "api", Provider: "stripe", Fetch: api.fetch, FetchRate: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		fetch := func(ids ...int64) { // each in a worker of its own, asking in order
			var wg sync.WaitGroup
			for _, id := range ids {
				wg.Go(func() {
					jc.Fetch(context.Background(), &payhook.Event{ID: id, Source: "api", Type: "charge.succeeded"})
				})
				synctest.Wait()
			}
			wg.Wait()
		}
		// One a second: 1 reads at 0 s, 2 waits and reads at 1 s, refused
		// with Retry-After: 10 (a pause to 11 s); 3 to 6 are put off,
		// their turns at 2 to 5 s.
		fetch(1, 2, 3, 4, 5, 6)
		time.Sleep(4 * time.Second) // at 5 s, each has come back: paused
		fetch(3, 4, 5, 6)
		time.Sleep(6 * time.Second) // at 11 s, the pause is over: they come back
		fetch(3, 4, 5, 6)
		oneASecond(t, api.reads())
	})
}

// TestPauseStopsReadsWaitingTheirTurn: a read that waits in its worker
// for its turn under a source's FetchRate (up to maxFetchWait) when
// another read of the source is refused (429) does not reach the
// provider when its turn comes during the pause: it is put off as the
// reads asked during the pause are. Before, every read waiting then
// (up to api_rate of them, 20 for Stripe by default) was sent into the
// pause, and refused.
func TestPauseStopsReadsWaitingTheirTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI(func(ev *payhook.Event) ([]byte, error) {
			if ev.ID == 1 {
				time.Sleep(100 * time.Millisecond) // the answer takes a while
				return nil, &apiget.APIError{Method: "GET", Path: "/v1/charges/ch_1", Status: http.StatusTooManyRequests, RetryAfter: 10 * time.Second}
			}
			return []byte(`{}`), nil
		})
		jc, err := New(Config{DB: &store.DB{}, Sources: []payhook.Source{{Name: "api", Provider: "stripe", Fetch: api.fetch, FetchRate: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := range int64(2) {
			// 1 reads at 0 s, refused at 0.1 s (a pause to 10.1 s); 2,
			// asking meanwhile, waits for its turn at 1 s.
			wg.Go(func() {
				_, errs[i+1] = jc.Fetch(context.Background(), &payhook.Event{ID: i + 1, Source: "api", Type: "charge.succeeded"})
			})
			synctest.Wait()
		}
		wg.Wait()
		if at := api.reads(); len(at) != 1 || errs[2] == nil || !strings.HasPrefix(errs[2].Error(), "tried again in ") {
			t.Errorf("reads at %v, event 2: %v; want one read, event 2 put off without asking during the pause", at, errs[2])
		}
	})
}

// TestRateLimitedForgetsOldRows: an event put off for a 429 whose job did
// not come back here (another instance processed it) is, put off again
// long after (replayed, say), put off for the hour of a new row, whether
// or not another event was put off meanwhile: an entry older than the
// prune's 2 hours is gone. Before, it was forgotten only when another
// event was first put off, so the same event met by the same pause was
// put off if one had been, and failed an attempt at once if none had.
func TestRateLimitedForgetsOldRows(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := start
	fetch := func(context.Context, *payhook.Event) ([]byte, error) {
		return nil, &apiget.APIError{Method: "GET", Path: "/v1/charges/ch_1", Status: http.StatusTooManyRequests}
	}
	p := &processor{clock: func() time.Time { return now }, limited: map[int64]time.Time{}, pause: map[string]time.Time{},
		rateLog:  slog.New(slog.DiscardHandler),
		bySource: map[string]payhook.Source{"api": {Name: "api", Fetch: fetch}}}
	if _, err := p.fetch(context.Background(), &payhook.Event{ID: 1, Source: "api"}); err == nil || !strings.HasPrefix(err.Error(), "tried again in ") {
		t.Fatalf("event 1 refused: %v; want put off", err)
	}
	now = start.Add(3 * time.Hour) // replayed, its read refused again
	if _, err := p.fetch(context.Background(), &payhook.Event{ID: 1, Source: "api"}); err == nil || !strings.HasPrefix(err.Error(), "tried again in ") {
		t.Errorf("event 1, refused again 3 hours after it was first put off and not since: %v; want put off, a new row", err)
	}
}

// TestPauseLeavesEventsWithoutARead: while a source's reads pause after
// a 429, an event of a type its provider has no resource for (Stripe's
// invoice.paid, ping, ...), which its Fetch answers without asking the
// provider, is not put off: the pause has nothing to spare it. Before, it
// was put off as long as the pause held, and after an hour of that its
// attempts failed, for a read it never makes.
func TestPauseLeavesEventsWithoutARead(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	asked := 0
	fetch := func(_ context.Context, ev *payhook.Event) ([]byte, error) { // as stripe.Client.Fetch
		if ev.Type == "invoice.paid" {
			return nil, nil // no resource: no request
		}
		asked++
		return nil, &apiget.APIError{Method: "GET", Path: "/v1/charges/ch_1", Status: http.StatusTooManyRequests, RetryAfter: time.Minute}
	}
	p := &processor{clock: func() time.Time { return now }, limited: map[int64]time.Time{}, pause: map[string]time.Time{},
		rateLog:  slog.New(slog.DiscardHandler),
		bySource: map[string]payhook.Source{"api": {Name: "api", Provider: "stripe", Fetch: fetch}}}
	if _, err := p.fetch(context.Background(), &payhook.Event{ID: 1, Source: "api", Type: "charge.succeeded"}); err == nil || asked != 1 {
		t.Fatalf("a charge refused: %v, asked %d; want put off, asked once", err, asked)
	}
	now = now.Add(time.Second) // paused for a minute
	if _, err := p.fetch(context.Background(), &payhook.Event{ID: 2, Source: "api", Type: "invoice.paid"}); err != nil {
		t.Errorf("invoice.paid, which reads nothing, during the pause: %v; want processed", err)
	}
	if _, err := p.fetch(context.Background(), &payhook.Event{ID: 3, Source: "api", Type: "charge.refunded"}); err == nil || asked != 1 {
		t.Errorf("a charge.refunded during the pause: %v, asked %d; want put off unasked", err, asked)
	}
}

// TestFetchRateLeavesEventsWithoutARead: under a source's FetchRate, an
// event of a type its provider has no resource for (Stripe's
// invoice.paid), whose Fetch asks the provider nothing, takes no turn:
// many at once are all read at once, and the next event that reads
// finds its turn free. Before, each took a turn, put off behind the
// others as if it read.
func TestFetchRateLeavesEventsWithoutARead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked := 0
		fetch := func(_ context.Context, ev *payhook.Event) ([]byte, error) { // as stripe.Client.Fetch
			if ev.Type != "invoice.paid" {
				asked++
			}
			return nil, nil
		}
		cfg, err := New(Config{DB: &store.DB{Engine: store.SQLite}, Logger: slog.New(slog.DiscardHandler),
			Sources: []payhook.Source{{Name: "api", Provider: "stripe", Fetch: fetch, FetchRate: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := cfg.Fetch(context.Background(), &payhook.Event{ID: int64(i + 1), Source: "api", Type: "invoice.paid"}); err != nil {
				t.Fatalf("invoice.paid %d: %v; want read at once", i+1, err)
			}
		}
		start := time.Now()
		if _, err := cfg.Fetch(context.Background(), &payhook.Event{ID: 10, Source: "api", Type: "charge.succeeded"}); err != nil ||
			asked != 1 || time.Since(start) != 0 {
			t.Errorf("a charge after them: %v, asked %d, after %s; want read at once, its turn free", err, asked, time.Since(start))
		}
	})
}
