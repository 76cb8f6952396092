package outbox

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestDialRefusesNonPublic: the address is checked when dialled, not only
// when the URL is loaded: a sink whose name resolves to a private address
// (here: the URL changed under it, as a DNS answer can) never connects.
func TestDialRefusesNonPublic(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	h, err := NewHTTP(HTTPConfig{URL: "https://app.example.com/payhook", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.URL = srv.URL // what app.example.com would resolve to
	_, err = h.Send(context.Background(), Fact{ID: "fct_1", Type: "order.paid", Data: []byte(`{}`)})
	if !errors.Is(err, errNonPublic) {
		t.Fatalf("Send to %s = %v; want the dial refused", srv.URL, err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the server got %d requests; want none", hits.Load())
	}
}

func TestDialControl(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr    string
		private bool
		refused bool
	}{
		{"127.0.0.1:80", false, true},
		{"169.254.169.254:80", false, true},
		{"[::1]:443", false, true},
		{"10.1.2.3:443", false, true},
		{"172.16.0.9:443", false, true},
		{"192.168.0.1:443", false, true},
		{"[fe80::1]:443", false, true},
		{"[fd00:ec2::254]:80", false, true},
		{"[::ffff:127.0.0.1]:80", false, true},
		{"100.64.0.1:80", false, true},
		{"0.0.0.0:80", false, true},
		{"93.184.216.34:443", false, false},
		{"[2606:2800:220:1:248:1893:25c8:1946]:443", false, false},
		{"127.0.0.1:80", true, false},
	} {
		err := dialControl(tc.private)("tcp", tc.addr, nil)
		if refused := errors.Is(err, errNonPublic); refused != tc.refused {
			t.Errorf("dial %s (allow_private %v) = %v; want refused %v", tc.addr, tc.private, err, tc.refused)
		}
	}
}
