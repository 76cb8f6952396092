package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
)

// TestDeliveriesVerify checks that every provider's deliveries of every
// kind pass payhook's own verifier for it and carry the event id they
// were made for.
func TestDeliveriesVerify(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range kindsByProvider() {
		name, kind := tc[0], tc[1]
		t.Run(name+"/"+kind, func(t *testing.T) {
			t.Parallel()
			secret, err := NewSecret(name)
			if err != nil {
				t.Fatal(err)
			}
			v, err := provider.New(provider.Options{Provider: name, Secrets: []string{secret}})
			if err != nil {
				t.Fatal(err)
			}
			gen, err := newEvents(name, kind, secret, now)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for n := range 3 {
				id := eventID("abcd1234", n)
				body := gen.body(id)
				h, err := gen.sign(id, body, now)
				if err != nil {
					t.Fatal(err)
				}
				env, err := v.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: now})
				if err != nil {
					t.Fatalf("Verify(event %d) = %v; want nil\nbody %s", n, err, body)
				}
				if env.EventID != id {
					t.Errorf("event id = %q; want %q", env.EventID, id)
				}
				if seen[string(body)] {
					t.Errorf("event %d has the body of an earlier one", n)
				}
				seen[string(body)] = true
			}
		})
	}
}

// kindsByProvider returns every {provider, kind} pair.
func kindsByProvider() [][2]string {
	var out [][2]string
	for _, p := range Providers() {
		for _, k := range Kinds() {
			out = append(out, [2]string{p, k})
		}
	}
	return out
}

func TestOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ events, dups int }{{1, 0}, {10, 0}, {10, 1}, {10, 3}, {3, 10}, {20000, 2000}} {
		t.Run(fmt.Sprintf("%d+%d", tc.events, tc.dups), func(t *testing.T) {
			got := order(tc.events, tc.dups)
			if len(got) != tc.events+tc.dups {
				t.Fatalf("len = %d; want %d", len(got), tc.events+tc.dups)
			}
			sent := map[int]bool{}
			repeats := 0
			for i, n := range got {
				if sent[n] {
					repeats++
					continue
				}
				if n != len(sent) {
					t.Fatalf("position %d: new event %d; want %d (new events go in order)", i, n, len(sent))
				}
				sent[n] = true
			}
			if len(sent) != tc.events || repeats != tc.dups {
				t.Errorf("%d events, %d repeats; want %d, %d", len(sent), repeats, tc.events, tc.dups)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	var l []time.Duration
	for i := 1; i <= 1000; i++ {
		l = append(l, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500}, {0.9, 900}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := quantile(l, tc.q); got != tc.want {
			t.Errorf("quantile(1..1000, %g) = %d; want %d", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.99); got != 0 {
		t.Errorf("quantile(nil) = %d; want 0", got)
	}
}

// TestFloor runs both loops against the floor: every delivery answered,
// the timeline adds up to the answers.
func TestFloor(t *testing.T) {
	t.Parallel()
	f, err := StartFloor()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	secret, _ := NewSecret("stripe")
	for _, p := range []Phase{{Concurrency: 4}, {Rate: 2000}} {
		p.Provider, p.Secret, p.Events, p.Duplicates, p.Interval = "stripe", secret, 200, 20, 10*time.Millisecond
		res, err := Run(context.Background(), Target{Name: "floor", URL: f.URL}, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Acked != 220 || res.AckedEvents != 200 || len(res.Errors) != 0 || res.Stored != -1 {
			t.Errorf("%s: acked %d (%d events), errors %v, stored %d; want 220 (200), none, -1", res.Load(), res.Acked, res.AckedEvents, res.Errors, res.Stored)
		}
		sum := 0.0
		for _, s := range res.Timeline {
			sum += s.AcksPerSec * p.Interval.Seconds()
		}
		if int(sum+0.5) != res.Acked {
			t.Errorf("%s: timeline sums to %g acks; want %d", res.Load(), sum, res.Acked)
		}
	}
	// Metrics that are not a payhook's (the floor answers 204 to
	// everything) fail the phase before it sends, naming their URL.
	p := Phase{Provider: "stripe", Secret: secret, Events: 1, Concurrency: 1}
	_, err = Run(context.Background(), Target{Name: "floor", URL: f.URL, Metrics: f.URL + "/metrics"}, p)
	if err == nil || !strings.Contains(err.Error(), f.URL+"/metrics") {
		t.Errorf("Run with the floor's metrics = %v; want an error naming %s/metrics", err, f.URL)
	}
}

func TestPhaseErrors(t *testing.T) {
	t.Parallel()
	for _, p := range []Phase{
		{Provider: "stripe", Secret: "whsec_x", Events: 0, Concurrency: 1},
		{Provider: "stripe", Secret: "whsec_x", Events: 1, Duplicates: -1, Concurrency: 1},
		{Provider: "stripe", Secret: "whsec_x", Events: 1},
		{Provider: "stripe", Secret: "whsec_x", Events: 1, Concurrency: 1, Rate: 1},
		{Provider: "nope", Secret: "whsec_x", Events: 1, Concurrency: 1},
		{Provider: "stripe", Events: 1, Concurrency: 1},
		{Provider: "stripe", Kind: "refund.failed", Secret: "whsec_x", Events: 1, Concurrency: 1},
	} {
		if _, err := Run(context.Background(), Target{Name: "x", URL: "http://127.0.0.1:1/"}, p); err == nil {
			t.Errorf("Run(%+v) = nil error; want one", p)
		}
	}
}

// TestURLs checks that a target of several instances gets its deliveries
// in turn: each instance half of them.
func TestURLs(t *testing.T) {
	t.Parallel()
	var counts [2]atomic.Int64
	var urls []string
	for i := range counts {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			counts[i].Add(1)
			w.WriteHeader(http.StatusOK)
		}))
		defer srv.Close()
		urls = append(urls, srv.URL+"/webhooks/x")
	}
	secret, _ := NewSecret("stripe")
	p := Phase{Provider: "stripe", Secret: secret, Events: 20, Duplicates: 2, Concurrency: 3}
	res, err := Run(context.Background(), Target{Name: "pair", URLs: urls}, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked != 22 || counts[0].Load() != 11 || counts[1].Load() != 11 {
		t.Errorf("acked %d, instances got %d and %d; want 22, 11 and 11", res.Acked, counts[0].Load(), counts[1].Load())
	}
}

// TestDrainLoop checks that drainLoop returns once nothing waits, counts
// at most every countEvery, and fails when the count stops moving.
func TestDrainLoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		counts  []int64 // what count returns, the last repeated
		probes  int     // waiting says yes this many times, then no
		wantErr bool
	}{
		{name: "drains", counts: []int64{5, 3, 1}, probes: 3},
		{name: "stalls", counts: []int64{7}, probes: 1 << 30, wantErr: true},
		{name: "nothing waiting", counts: []int64{0}, probes: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			probes, counts := 0, 0
			waiting := func(context.Context) (bool, error) {
				probes++
				return probes <= tc.probes, nil
			}
			count := func(context.Context) (int64, error) {
				counts++
				return tc.counts[min(counts, len(tc.counts))-1], nil
			}
			_, err := drainLoop(context.Background(), time.Now(), 20*time.Millisecond, time.Millisecond, 0, "stripe", waiting, count)
			if (err != nil) != tc.wantErr {
				t.Fatalf("drainLoop = %v; want error %v", err, tc.wantErr)
			}
			if tc.probes == 0 && counts != 0 {
				t.Errorf("count called %d times though nothing waited; want 0", counts)
			}
		})
	}
	t.Run("counts seldom", func(t *testing.T) {
		t.Parallel()
		probes, counts := 0, 0
		waiting := func(context.Context) (bool, error) { probes++; return probes <= 50, nil }
		count := func(context.Context) (int64, error) { counts++; return int64(100 - probes), nil }
		if _, err := drainLoop(context.Background(), time.Now(), time.Hour, 0, time.Hour, "stripe", waiting, count); err != nil {
			t.Fatal(err)
		}
		if counts != 1 {
			t.Errorf("count called %d times in 50 probes with countEvery 1h; want 1", counts)
		}
	})
}

// TestWriteTextSaysWhatRatiosAre: beside a floor, each figure carries its
// ratio, and a line says what each ratio is measured against.
func TestWriteTextSaysWhatRatiosAre(t *testing.T) {
	floor := &Result{Target: "floor", Concurrency: 4, Elapsed: time.Second, AcksPerSec: 1000,
		Latency: Latency{P50: time.Millisecond, P90: time.Millisecond, P99: time.Millisecond, P999: time.Millisecond}}
	target := &Result{Target: "sqlite", Concurrency: 4, Elapsed: 2 * time.Second, AcksPerSec: 500, Stored: 100,
		Drain: 3 * time.Second, InCommits: 0.934,
		Latency: Latency{P50: 2 * time.Millisecond, P90: 2 * time.Millisecond, P99: 4 * time.Millisecond, P999: 4 * time.Millisecond}}
	target.Compare(floor)
	var b strings.Builder
	if err := WriteText(&b, []*Result{floor, target}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"500 (50.0%)", "4.00ms (4.0×)", "3000.00ms (3.0×)", "the drain as a multiple of the time it took to answer",
		"0.93 s/s", "seconds the target spent in its group commits per second of the load"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
