package process

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/payhook/payhook"
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
		var mu sync.Mutex
		var at []time.Duration
		start := time.Now()
		fetch := limitFetch(func(context.Context, *payhook.Event) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Since(start))
			return []byte(`{}`), nil
		}, 4)
		var wg sync.WaitGroup
		var later []string
		for range 20 { // 20 workers at once
			wg.Go(func() {
				_, err := fetch(context.Background(), &payhook.Event{})
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
		if len(at) != 5 {
			t.Fatalf("%d reads at %v; want 5", len(at), at)
		}
		for i, d := range at {
			if want := time.Duration(i) * time.Second / 4; d != want {
				t.Errorf("read %d at %v; want %v", i+1, d, want)
			}
		}
		// The 15 others come back for the next turn, at 1.25 s.
		if len(later) != 15 || !strings.HasPrefix(later[0], "tried again in 1.25s: ") {
			t.Errorf("%d reads put off (%q); want 15, tried again in 1.25s", len(later), later)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := fetch(ctx, &payhook.Event{}); err == nil || len(at) != 5 {
			t.Errorf("a read whose attempt ends before its turn = %v, %d reads; want an error and no read", err, len(at))
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
