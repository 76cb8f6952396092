package provider_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// nowhere is a Sender that delivers nothing: only the API is under test.
type nowhere struct{}

func (nowhere) Send(deliver.Target, flavour.Event)  {}
func (nowhere) Log(string) []deliver.Attempt        { return nil }
func (nowhere) Resend(string, deliver.Target) error { return nil }

// clock is a settable clock for the simulator.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// listAll follows every page of l for q, checking each item with env.
func listAll(t *testing.T, l adapter.EventLister, envelope func([]byte) (payhook.Envelope, error), q adapter.EventQuery) []payhook.Envelope {
	t.Helper()
	var out []payhook.Envelope
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("more than 100 pages: the cursor goes round")
		}
		page, err := l.ListEvents(context.Background(), q)
		if err != nil {
			t.Fatalf("ListEvents(%+v) = %v", q, err)
		}
		for _, b := range page.Events {
			env, err := envelope(b)
			if err != nil {
				t.Fatalf("listed event %s: %v", b, err)
			}
			out = append(out, env)
		}
		if page.Next == "" {
			return out
		}
		q.Cursor = page.Next
	}
}

// Each lister pages through the simulator's events list in its flavour,
// every item read by its adapter's Envelope, and filters by type and time.
func TestEventListersAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider string
		flavour  flavour.Flavour
		subType  string // the provider's name of subscription.created
		fromOK   bool   // the list filters by time
	}{
		{"billete", flavour.Billete(), "subscription.created", true},
		{"stripe", flavour.Stripe(), "customer.subscription.created", true},
		{"paddle", flavour.Paddle(), "subscription.created", false},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			clk := &clock{t: t0}
			p, err := sim.New(sim.Config{Flavour: tc.flavour, Sender: nowhere{}, Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			api := httptest.NewServer(p.Handler())
			defer api.Close()
			key, _ := p.Keys()
			for i := range 5 {
				clk.set(t0.Add(time.Duration(i) * time.Hour))
				if _, err := p.CreateSubscription(sim.EnvTest, "cus_1", "basic"); err != nil {
					t.Fatal(err)
				}
				co, err := p.CreateCheckout(sim.EnvTest, 1000, "EUR", "")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.CompleteCheckout(sim.EnvTest, co.ID); err != nil {
					t.Fatal(err)
				}
			}
			a, _ := provider.Lookup(tc.provider)
			c, err := provider.NewClient(tc.provider, adapter.ClientConfig{BaseURL: api.URL, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			l := c.(adapter.EventLister)
			all, _ := p.Events(sim.EnvTest, flavour.Query{Limit: 1000})
			var want []string
			for _, ev := range all {
				want = append(want, tc.flavour.EventID(ev))
			}
			ids := func(envs []payhook.Envelope) []string {
				var out []string
				for _, e := range envs {
					out = append(out, e.EventID)
				}
				slices.Sort(out)
				return out
			}
			slices.Sort(want)
			if got := ids(listAll(t, l, a.Envelope, adapter.EventQuery{Limit: 2})); !slices.Equal(got, want) {
				t.Fatalf("listed %q; want every event %q", got, want)
			}
			subs := listAll(t, l, a.Envelope, adapter.EventQuery{Limit: 2, Types: []string{tc.subType}})
			if len(subs) != 5 {
				t.Fatalf("listed %d events of type %s; want 5", len(subs), tc.subType)
			}
			for _, e := range subs {
				if e.Type != tc.subType {
					t.Fatalf("type filter %s listed a %s", tc.subType, e.Type)
				}
			}
			if tc.fromOK {
				from := listAll(t, l, a.Envelope, adapter.EventQuery{From: t0.Add(3 * time.Hour), Types: []string{tc.subType}})
				if len(from) != 2 {
					t.Fatalf("listed %d events from 15:00; want 2", len(from))
				}
			}
			if _, err := l.ListEvents(context.Background(), adapter.EventQuery{Undelivered: true}); tc.provider != "stripe" && !errors.Is(err, payhook.ErrInvalid) {
				t.Fatalf("ListEvents(undelivered) = %v; want ErrInvalid", err)
			}
		})
	}
}

// A misbehaving API: each fault is a clear error of its kind.
func TestEventListersFaults(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"billete", "stripe", "paddle"} {
		for _, tc := range []struct {
			name    string
			status  int
			header  map[string]string
			body    string
			check   func(error) bool
			explain string
		}{
			{"429 with Retry-After", 429, map[string]string{"Retry-After": "7"}, `{"error":"slow down"}`,
				func(err error) bool {
					var ae *adapter.APIError
					return errors.As(err, &ae) && ae.Temporary() && ae.RetryAfter == 7*time.Second
				}, "an APIError, temporary, retry after 7s"},
			{"503", 503, nil, `down`,
				func(err error) bool { var ae *adapter.APIError; return errors.As(err, &ae) && ae.Temporary() }, "a temporary APIError"},
			{"401", 401, nil, `{"error":"bad key"}`,
				func(err error) bool { var ae *adapter.APIError; return errors.As(err, &ae) && !ae.Temporary() }, "an APIError, not temporary"},
			{"not JSON", 200, nil, `<html>oops`,
				func(err error) bool { return errors.Is(err, payhook.ErrMalformed) }, "ErrMalformed"},
			{"no list", 200, nil, `{"object":"list"}`,
				func(err error) bool { return errors.Is(err, payhook.ErrMalformed) }, "ErrMalformed"},
			{"empty page that says more", 200, nil,
				`{"object":"list","data":[],"has_more":true,"next_cursor":"evt_9","meta":{"pagination":{"has_more":true,"next":"/events?after=evt_9"}}}`,
				func(err error) bool { return errors.Is(err, payhook.ErrMalformed) }, "ErrMalformed"},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					for k, v := range tc.header {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tc.status)
					w.Write([]byte(tc.body))
				}))
				defer api.Close()
				c, _ := provider.NewClient(name, adapter.ClientConfig{BaseURL: api.URL, Key: "sk_test_x"})
				_, err := c.(adapter.EventLister).ListEvents(context.Background(), adapter.EventQuery{})
				if !tc.check(err) {
					t.Fatalf("ListEvents = %v; want %s", err, tc.explain)
				}
			})
		}
	}
}
