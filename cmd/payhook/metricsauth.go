package main

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"

	"github.com/payhook/payhook/console"
)

// metricsAccess returns /metrics' handler as serve mounts it:
//
//   - with a metrics token (PAYHOOK_METRICS_TOKEN or admin.metrics_token),
//     it takes that bearer token, or the console's login when there is a
//     console, on whichever listener serves it;
//   - else on the admin listener (--admin-addr), which is private, it is
//     open: a scraper needs no secret;
//   - else on the public listener, it is behind the console's login (the
//     admin token as a bearer token) when there is a console, and open
//     otherwise, with a warning logged at start.
//
// A metrics token shorter than console.MinTokenBytes is an error wrapping
// payhook.ErrConfig.
func metricsAccess(h http.Handler, token string, con *console.Console, adminListener bool, addr string, log *slog.Logger) (http.Handler, error) {
	switch {
	case token != "":
		if err := console.CheckToken("the metrics token", token); err != nil {
			return nil, err
		}
		var login http.Handler
		if con != nil {
			login = con.Protect(h)
		}
		return metricsToken(h, token, login), nil
	case adminListener:
		log.Info("/metrics served without authentication on the admin listener", "addr", addr)
		return readOnly(h), nil
	case con != nil:
		return con.Protect(h), nil
	}
	log.Warn("/metrics served without authentication on the public listener: anyone who reaches it reads the event counts per source; "+
		"set PAYHOOK_METRICS_TOKEN, or --admin-addr to serve it on a private listener", "addr", addr)
	return readOnly(h), nil
}

// metricsToken lets a GET through with the bearer token; any other
// request goes to login, or is answered 401 when login is nil.
func metricsToken(h http.Handler, token string, login http.Handler) http.Handler {
	return readOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			h.ServeHTTP(w, r)
			return
		}
		if login != nil {
			login.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="payhook metrics"`)
		http.Error(w, "send the metrics token as a bearer token", http.StatusUnauthorized)
	}))
}

// readOnly answers 405 to anything but GET and HEAD.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}
