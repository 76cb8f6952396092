package provider_test

import (
	"encoding/base64"
	"errors"
	"slices"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
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
