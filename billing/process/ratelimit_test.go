package process_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
)

// statuses counts the answers of an API by status.
type statuses struct {
	api     http.Handler
	refused atomic.Int64 // 429
}

func (s *statuses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusWriter{ResponseWriter: w}
	s.api.ServeHTTP(rec, r)
	if rec.status == http.StatusTooManyRequests {
		s.refused.Add(1)
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// TestRateLimitedProviderLosesNoAttempt: the simulated Stripe answers 5
// API requests a second of its clock and refuses the others (429,
// Retry-After: 1), as
// when another application or another instance uses the account's
// share. payhook's workers, 20 reading at once with no api_rate of their
// own, are refused reads; the source's reads pause for the Retry-After,
// and each event refused or met by the pause is put off and read again,
// counted as no attempt: every event is processed at its first attempt,
// through River's real workers, on both engines.
func TestRateLimitedProviderLosesNoAttempt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		// The provider's clock stands still but when the test moves it:
		// past the first second's worth (5 requests), every request is
		// refused, however fast or slow this machine runs them, until the
		// test, having seen refusals, moves the clock on.
		var offset atomic.Int64
		base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		clock := func() time.Time { return base.Add(time.Duration(offset.Load())) }
		p, err := sim.New(sim.Config{Flavour: flavour.Stripe(), Sender: nowhere{}, APIRate: 5, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		api := &statuses{api: p.Handler()}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		key, _ := p.Keys()
		const n = 4
		for i := range n {
			chk, err := p.CreateCheckout(sim.EnvTest, int64(100+i), "usd", fmt.Sprintf("ord_%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.CompleteCheckout(sim.EnvTest, chk.ID); err != nil {
				t.Fatal(err)
			}
		}
		client, err := provider.NewClient("stripe", adapter.ClientConfig{BaseURL: srv.URL, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		page, err := client.(adapter.EventLister).ListEvents(ctx, adapter.EventQuery{})
		if err != nil || page.Next != "" {
			t.Fatalf("the events listed: %v, next page %q; want one page", err, page.Next)
		}
		now := time.Now()
		var evs []*payhook.Event
		a, _ := provider.Lookup("stripe")
		for _, body := range page.Events {
			env, err := a.Envelope(body)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, &payhook.Event{Source: "stripe", EventID: env.EventID, Type: env.Type,
				OccurredAt: env.OccurredAt, ReceivedAt: now, Payload: body})
		}
		if len(evs) < n {
			t.Fatalf("%d events listed for %d checkouts paid", len(evs), n)
		}
		db := open(t, dbURL)
		q := running(t, process.Config{DB: db, Sources: []payhook.Source{{Name: "stripe", Provider: "stripe", Fetch: client.Fetch}}})
		if _, err := q.Ingest(ctx, evs); err != nil {
			t.Fatal(err)
		}
		left, moved, seen := len(evs), time.Now(), int64(0)
		for left > 0 {
			waiting := 0
			for _, ev := range evs {
				got, err := db.Event(ctx, ev.ID)
				if err != nil {
					t.Fatal(err)
				}
				switch got.Status {
				case payhook.StatusReceived:
					waiting++
				case payhook.StatusProcessed:
					if got.Attempts != 1 {
						t.Fatalf("event %s (%s) processed after %d attempts (%q); want 1: a 429 is no attempt",
							ev.EventID, ev.Type, got.Attempts, got.LastError)
					}
				default:
					t.Fatalf("event %s (%s) %s: %s", ev.EventID, ev.Type, got.Status, got.LastError)
				}
			}
			if waiting < left {
				left, moved = waiting, time.Now()
			}
			if n := api.refused.Load(); n > seen {
				// Refused: another second's worth, in a while.
				seen = n
				offset.Add(int64(time.Second))
			}
			if time.Since(moved) > stall {
				t.Fatalf("%d of %d events still waiting, none processed for %s", left, len(evs), stall)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if api.refused.Load() == 0 {
			t.Fatalf("the API refused no read of %d events: the test did not meet the rate limit", len(evs))
		}
		t.Logf("%d events processed at their first attempt; the API refused %d reads", len(evs), api.refused.Load())
	})
}
