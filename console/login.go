package console

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

type loginData struct {
	Next  string
	User  string
	Error string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login", &view{Title: "Log in", Data: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

// login checks the admin token (no user name) or a user's password; each
// attempt, right or wrong, takes one from the client's bucket.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	d := loginData{Next: safeNext(r.PostFormValue("next")), User: r.PostFormValue("user")}
	if ok, wait := c.auth.limiter.allow(c.auth.clientIP(r)); !ok {
		secs := int(wait.Seconds()) + 1
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		d.Error = fmt.Sprintf("Too many login attempts from your address: try again in %d s.", secs)
		c.render(w, http.StatusTooManyRequests, "login", &view{Title: "Log in", Data: d})
		return
	}
	if !c.auth.checkLogin(d.User, r.PostFormValue("secret")) {
		c.log.Warn("console login refused", "user", d.User, "client", c.auth.clientIP(r))
		d.Error = "Wrong token, or wrong user name or password."
		c.render(w, http.StatusUnauthorized, "login", &view{Title: "Log in", Data: d})
		return
	}
	name := d.User
	if name == "" {
		name = "admin"
	}
	c.auth.newSession(w, r, name)
	c.log.Info("console login", "user", name, "client", c.auth.clientIP(r))
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) (string, error) {
	http.SetCookie(w, c.auth.cookie(r, "", c.cfg.Now()))
	// The session ends here, not only in this browser: a copy of its
	// cookie is refused too (Auth.session).
	if err := c.cfg.DB.EndSession(r.Context(), s.nonce, s.Expires, c.cfg.Now()); err != nil {
		return "", err
	}
	return "/console/login", nil
}

// safeNext keeps a redirect after login on the console: a local path
// under /console, else /console.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix) && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return Prefix
}

// jobs puts River's UI behind the login. Its actions are JSON requests of
// its own scripts, which cannot carry our CSRF token: a non-GET request
// must be same-origin by the browser's word (Sec-Fetch-Site) and JSON,
// which a cross-site form cannot send.
func (c *Console) jobs(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.auth.session(r) == nil {
			c.toLogin(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if r.Header.Get("Sec-Fetch-Site") != "same-origin" || ct != "application/json" {
				http.Error(w, "jobs UI: actions must be same-origin JSON requests", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
