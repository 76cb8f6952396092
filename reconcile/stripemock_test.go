package reconcile_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/internal/stripemock"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

// Backfill against stripe-mock, Stripe's own emulator: its events (real
// Stripe shapes, of a type payhook's mapping does not know) are listed
// and stored; with a malformed and an unknown item slipped into its page,
// those are reported and the rest stored; several types (types[]) are a
// request it accepts.
func TestBackfillAgainstStripeMock(t *testing.T) {
	t.Parallel()
	mock := stripemock.Start(t)
	// A proxy that adds two items to the end of stripe-mock's page.
	spoiled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, mock+r.URL.RequestURI(), nil)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		i := bytes.LastIndex(b, []byte("]"))
		if resp.StatusCode != 200 || i < 0 {
			w.WriteHeader(resp.StatusCode)
			w.Write(b)
			return
		}
		extra := `,{"object":"event","id":"evt_bad_type","type":7,"created":1234567890,"livemode":false,"data":{"object":{}}},` +
			`{"object":"mystery","id":17}`
		w.Write(append(append(b[:i:i], extra...), b[i:]...))
	}))
	t.Cleanup(spoiled.Close)

	a, _ := provider.Lookup("stripe")
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		queue, err := jobs.New(db, jobs.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, url, source string
			refused           int
			types             []string
		}{
			{"stripe-mock", mock, "mock", 0, nil},
			{"stripe-mock with a malformed and an unknown item", spoiled.URL, "spoiled", 2, nil},
			// stripe-mock checks types[] against Stripe's OpenAPI spec (it
			// refuses a parameter it does not know) but does not filter.
			{"stripe-mock asked for two types", mock, "types", 0, []string{"charge.refunded", "charge.succeeded"}},
		} {
			c, err := provider.NewClient("stripe", adapter.ClientConfig{BaseURL: tc.url, Key: "sk_test_123"})
			if err != nil {
				t.Fatal(err)
			}
			cfg := reconcile.BackfillConfig{DB: db, Inbox: queue, Source: payhook.Source{Name: tc.source, Provider: "stripe", Environment: "test"},
				Envelope: a.Envelope, Lister: c.(adapter.EventLister), Types: tc.types} // From zero: stripe-mock's events are of 2009
			sum, err := reconcile.Backfill(ctx, cfg)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if sum.New == 0 || sum.Refused != tc.refused || sum.Listed != sum.New+sum.Refused {
				t.Fatalf("%s: summary %+v; want its events new and %d refused", tc.name, sum, tc.refused)
			}
			if tc.refused > 0 && (sum.Refusals[0].EventID != "evt_bad_type" || !strings.Contains(sum.Refusals[0].Reason, `"type"`)) {
				t.Fatalf("%s: refusal %+v; want evt_bad_type refused for its type", tc.name, sum.Refusals[0])
			}
			evs, err := db.ListEvents(ctx, store.Filter{Source: tc.source})
			if err != nil || len(evs) != sum.New {
				t.Fatalf("%s: %d events stored, %v; want %d", tc.name, len(evs), err, sum.New)
			}
			for _, ev := range evs {
				if !strings.HasPrefix(ev.EventID, "evt_") || ev.ReceivedVia != payhook.ViaBackfill || ev.Environment != "test" || ev.OccurredAt.IsZero() {
					t.Fatalf("%s: stored %+v; want a Stripe event, of test, backfilled", tc.name, ev)
				}
			}
			again, err := reconcile.Backfill(ctx, cfg)
			if err != nil || again.New != 0 || again.Known != sum.New {
				t.Fatalf("%s: second backfill %+v, %v; want nothing new", tc.name, again, err)
			}
		}
	})
}
