package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
)

// Floor is a bare net/http server that reads each request's body and
// answers 204: what the machine, the loopback network and the generator
// allow at most, measured in the same run as the targets.
type Floor struct {
	// URL is the address deliveries are posted to.
	URL string
	srv *http.Server
}

// StartFloor starts a Floor on a loopback port.
func StartFloor() (*Floor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: floor: listen: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	return &Floor{URL: "http://" + ln.Addr().String() + "/webhooks/floor", srv: srv}, nil
}

// Close stops the floor.
func (f *Floor) Close() error { return f.srv.Close() }
