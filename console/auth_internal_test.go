package console

import (
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestClientIP: a login attempt counts against the peer, or behind a
// trusted proxy against the X-Forwarded-For hop the proxy added (the last
// one: those before it are the client's to make up, and counted against
// them a new one made each attempt a first); an IPv6 client by its /64.
func TestClientIP(t *testing.T) {
	for _, c := range []struct {
		name  string
		trust bool
		peer  string
		xff   []string
		want  string
	}{
		{"peer", false, "203.0.113.7:4242", nil, "203.0.113.7"},
		{"forwarded, untrusted", false, "203.0.113.7:4242", []string{"198.51.100.1"}, "203.0.113.7"},
		{"forwarded by the proxy", true, "10.0.0.1:4242", []string{"203.0.113.7"}, "203.0.113.7"},
		{"made up before the proxy's", true, "10.0.0.1:4242", []string{"198.51.100.99, 203.0.113.7"}, "203.0.113.7"},
		{"two headers", true, "10.0.0.1:4242", []string{"198.51.100.99", "203.0.113.7"}, "203.0.113.7"},
		{"IPv6 peer", false, "[2001:db8:1:2:3:4:5:6]:4242", nil, "2001:db8:1:2::/64"},
		{"IPv6 forwarded", true, "10.0.0.1:4242", []string{"2001:db8:1:2:ffff::1"}, "2001:db8:1:2::/64"},
		{"IPv4 in IPv6", false, "[::ffff:203.0.113.7]:4242", nil, "::ffff:203.0.113.7"},
		{"forwarded with a port", true, "10.0.0.1:4242", []string{"198.51.100.99, 203.0.113.7:41234"}, "203.0.113.7"},
		{"forwarded IPv6 with a port", true, "10.0.0.1:4242", []string{"[2001:db8:1:2::1]:443"}, "2001:db8:1:2::/64"},
		{"forwarded IPv6 in brackets", true, "10.0.0.1:4242", []string{"[2001:db8:1:2::1]"}, "2001:db8:1:2::/64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &Auth{trustProxy: c.trust}
			r := httptest.NewRequest("POST", "/console/login", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := a.clientIP(r); got != c.want {
				t.Errorf("clientIP = %q; want %q", got, c.want)
			}
		})
	}
}

// TestUnknownUserCostsAKnownOne: an unknown user's password is compared
// against a hash of the users' own cost, so that a login's time does not
// tell which names exist (it was a cost-4 hash against cost-12 users').
func TestUnknownUserCostsAKnownOne(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost+2)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAuth(Config{Users: []User{{Name: "ana", Hash: string(hash)}}, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	if cost, err := bcrypt.Cost(a.dummy); err != nil || cost != bcrypt.MinCost+2 {
		t.Errorf("the unknown user's hash has cost %d (%v); want %d, the users'", cost, err, bcrypt.MinCost+2)
	}
	if a.checkLogin("nobody", "secret") || !a.checkLogin("ana", "secret") {
		t.Error("login: an unknown user got in, or a known one did not")
	}
}

// TestFlash: a page shows only the console's own messages after an
// action, never a query's text.
func TestFlash(t *testing.T) {
	for _, c := range []struct{ query, want string }{
		{"done=replayed", "replayed"},
		{"done=bulk-replay&n=12", "bulk replay of 12 events started"},
		{"done=bulk-replay&n=x", ""},
		{"done=Your+session+expired%2C+log+in+at+evil.example", ""},
		{"", ""},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := flash(q); got != c.want {
			t.Errorf("flash(%q) = %q; want %q", c.query, got, c.want)
		}
	}
}
