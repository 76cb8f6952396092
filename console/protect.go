package console

import "net/http"

// Protect returns h behind the console's login, for a read-only route
// mounted beside it (/metrics): a request needs the bearer admin token or
// a session, and must be a GET or HEAD; otherwise it is answered 401 (405
// for another method).
func (c *Console) Protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !c.auth.bearer(r) && c.auth.session(r) == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="payhook"`)
			http.Error(w, "login required: send the admin token as a bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
