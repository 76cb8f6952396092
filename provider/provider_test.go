package provider_test

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/crypto"
	"github.com/payhook/payhook/provider/hmac"
	"github.com/payhook/payhook/provider/paddle"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/provider/stripe"
)

func TestNames(t *testing.T) {
	t.Parallel()
	want := []string{"billete", "crypto", "hmac", "paddle", "standard", "stripe"}
	if got := provider.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v; want %v", got, want)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	whsec := []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("key"))}
	plain := []string{"secret"}
	tests := []struct {
		opts    provider.Options
		check   func(payhook.Verifier) bool
		wantErr error
	}{
		{provider.Options{Provider: "stripe", Secrets: plain}, func(v payhook.Verifier) bool { _, ok := v.(*stripe.Verifier); return ok }, nil},
		{provider.Options{Provider: "paddle", Secrets: plain}, func(v payhook.Verifier) bool { _, ok := v.(*paddle.Verifier); return ok }, nil},
		{provider.Options{Provider: "standard", Secrets: whsec}, func(v payhook.Verifier) bool { _, ok := v.(*standard.Verifier); return ok }, nil},
		{provider.Options{Provider: "billete", Secrets: whsec}, func(v payhook.Verifier) bool { _, ok := v.(*billete.Verifier); return ok }, nil},
		{provider.Options{Provider: "crypto", Secrets: plain}, func(v payhook.Verifier) bool { _, ok := v.(*crypto.Verifier); return ok }, nil},
		{provider.Options{Provider: "hmac", Secrets: plain, HMAC: hmac.Config{Header: "X-Sig"}}, func(v payhook.Verifier) bool { _, ok := v.(*hmac.Verifier); return ok }, nil},
		{provider.Options{Provider: "hmac", Secrets: plain}, nil, payhook.ErrConfig},
		{provider.Options{Provider: "standard", Secrets: plain}, nil, payhook.ErrConfig},
		{provider.Options{Provider: "stripe"}, nil, payhook.ErrConfig},
		{provider.Options{Provider: "Stripe", Secrets: plain}, nil, payhook.ErrConfig},
		{provider.Options{Provider: "", Secrets: plain}, nil, payhook.ErrConfig},
	}
	for _, tc := range tests {
		t.Run(tc.opts.Provider, func(t *testing.T) {
			t.Parallel()
			v, err := provider.New(tc.opts)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("New(%+v) = %v; want %v", tc.opts, err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if v != nil {
					t.Errorf("New returned a verifier with an error")
				}
				return
			}
			if !tc.check(v) {
				t.Errorf("New(%q) = %T; wrong type", tc.opts.Provider, v)
			}
		})
	}
}

func TestReportsEnvironment(t *testing.T) {
	t.Parallel()
	want := map[string]bool{"stripe": true, "billete": true, "paddle": false, "standard": false, "crypto": false, "hmac": false}
	for _, name := range provider.Names() {
		if got, ok := want[name]; !ok || provider.ReportsEnvironment(name) != got {
			t.Errorf("ReportsEnvironment(%q) = %v; want %v", name, provider.ReportsEnvironment(name), got)
		}
	}
	for _, name := range []string{"", "Stripe", "nope"} {
		if provider.ReportsEnvironment(name) {
			t.Errorf("ReportsEnvironment(%q) = true; want false", name)
		}
	}
}

// Each adapter says what it has; the registry answers from them alone.
func TestAdapters(t *testing.T) {
	t.Parallel()
	type parts struct{ envelope, environment, api bool }
	want := map[string]parts{
		"billete":  {envelope: true, environment: true, api: true},
		"crypto":   {envelope: true},
		"hmac":     {},
		"paddle":   {envelope: true, api: true},
		"standard": {},
		"stripe":   {envelope: true, environment: true, api: true},
	}
	for _, name := range provider.Names() {
		a, ok := provider.Lookup(name)
		if !ok || a.Name != name || a.Verifier == nil {
			t.Errorf("Lookup(%q) = %q (verifier %v), %v; want the adapter %q with a verifier", name, a.Name, a.Verifier != nil, ok, name)
		}
		got := parts{a.Envelope != nil, a.ReportsEnvironment, a.Client != nil}
		if got != want[name] {
			t.Errorf("adapter %s has %+v; want %+v", name, got, want[name])
		}
		for typ, r := range a.Resources {
			if a.Client == nil || len(r.Path) == 0 || !strings.Contains(r.Route, "{id}") {
				t.Errorf("adapter %s fetches %s (%+v) but has no client, no path or no {id} in its route", name, typ, r)
			}
		}
	}
	if got, want := provider.APIs(), []string{"billete", "paddle", "stripe"}; !slices.Equal(got, want) {
		t.Errorf("APIs() = %v; want %v", got, want)
	}
	if _, ok := provider.Lookup("Stripe"); ok {
		t.Errorf("Lookup(%q) found an adapter; names are exact", "Stripe")
	}
}

func TestNewClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider string
		check    func(adapter.Client) bool
	}{
		{"stripe", func(c adapter.Client) bool { _, ok := c.(*stripe.Client); return ok }},
		{"billete", func(c adapter.Client) bool { _, ok := c.(*billete.Client); return ok }},
		{"paddle", func(c adapter.Client) bool { _, ok := c.(*paddle.Client); return ok }},
		{"hmac", nil},
		{"nope", nil},
		{"", nil},
	} {
		c, err := provider.NewClient(tc.provider, adapter.ClientConfig{BaseURL: "http://127.0.0.1:1", Key: "sk_test_x"})
		switch {
		case tc.check == nil && (!errors.Is(err, payhook.ErrConfig) || c != nil):
			t.Errorf("NewClient(%q) = %v, %v; want an error wrapping ErrConfig", tc.provider, c, err)
		case tc.check != nil && (err != nil || !tc.check(c)):
			t.Errorf("NewClient(%q) = %T, %v; want the provider's client", tc.provider, c, err)
		case tc.check != nil:
			// Every client a backfill can use lists events.
			if _, ok := c.(adapter.EventLister); !ok {
				t.Errorf("NewClient(%q) = %T; want an adapter.EventLister", tc.provider, c)
			}
		}
	}
	// The client is the adapter's, with the source's credentials: it
	// reaches the base URL (nothing listens there).
	c, err := provider.NewClient("stripe", adapter.ClientConfig{BaseURL: "http://127.0.0.1:1", Key: "sk_test_x"})
	if err != nil {
		t.Fatal(err)
	}
	ev := &payhook.Event{Type: "customer.subscription.updated", Payload: []byte(`{"data":{"object":{"id":"sub_1"}}}`)}
	if _, err := c.Fetch(context.Background(), ev); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Fetch through a client of http://127.0.0.1:1 = %v; want the failure to reach it", err)
	}
}
