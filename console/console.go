// Package console is payhook's web console and the home of its read API:
// server-rendered pages (html/template, assets embedded, no script needed)
// under /console, and /api/v1 (package api) behind the same login.
//
// Routes:
//
//	GET  /                               redirects to /console
//	GET  /console/login, POST same       log in with the admin token, or a user's name and password
//	POST /console/logout
//	GET  /console                        overview: counts and events per minute for 24 h (SVG)
//	GET  /console/events                 ?source= &type= &status= &via= &event_id= &since= &until= &before=
//	GET  /console/events/{id}            one event: payload, attempts, facts, postings
//	GET  /console/events/{id}/payload    the payload, byte-exact, as a download
//	POST /console/events/{id}/replay     process it again
//	GET  /console/events/replay          bulk replay's dry run: ?source= &status= &since= &type=
//	POST /console/events/replay          bulk replay, confirmed from its dry run (in the background)
//	GET  /console/payments               ?source= &status=; /console/payments/{source}/{ref} with postings
//	GET  /console/ledger                 balances per currency
//	GET  /console/subscriptions, /console/orders, /console/runs, /console/sources
//	GET  /console/deliveries             ?sink= &status=; POST /console/deliveries/{id}/resend
//	GET  /console/alerts                 ?all=1; POST /console/alerts/{id}/ack
//	     /console/jobs/                  River's UI (riverui), when Config.Jobs is set
//	     /api/v1/...                     the read API (package api)
//
// Every route but the login needs a session (the signed cookie the login
// sets: HttpOnly, SameSite=Strict, Secure over TLS); /api/v1 also takes
// the admin token as a bearer token. Every POST needs the session's CSRF
// token (the form field csrf or the X-CSRF-Token header) and passes
// net/http's CrossOriginProtection; the jobs UI, whose actions are its own
// JSON requests, takes non-GET requests only same-origin
// (Sec-Fetch-Site) and as application/json. Login attempts are limited
// per client address.
package console

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/api"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// Prefix is where the console's pages live.
const Prefix = "/console"

// JobsPrefix is where River's UI is mounted.
const JobsPrefix = "/console/jobs"

// Queue is what the console needs of the job queue (*jobs.Queue).
type Queue interface {
	// Replay processes an event again.
	Replay(ctx context.Context, id int64) error
	// Attempts lists an event's processing attempts.
	Attempts(ctx context.Context, id int64) ([]jobs.Attempt, error)
	// PlanReplay and ReplayBulk are the bulk replay, as payhook events
	// replay --status --source --since runs it.
	PlanReplay(ctx context.Context, f jobs.BulkFilter, show int) (*jobs.BulkPlan, error)
	ReplayBulk(ctx context.Context, p *jobs.BulkPlan, opts jobs.BulkOptions) (jobs.BulkResult, error)
}

// Source is a configured source as the console shows it.
type Source struct {
	Name        string
	Provider    string
	Environment string
	// Fingerprints are the fingerprints of its configured secrets, in
	// the order of the config (the first signs, while rotating).
	Fingerprints []string
}

// Config configures the console. Zero fields take the documented
// defaults.
type Config struct {
	// DB is the payhook database (migrated). Required.
	DB *store.DB
	// Queue replays events and lists their attempts. Required.
	Queue Queue
	// Sources are the configured sources, for the sources page and to read
	// events' facts.
	Sources []Source
	// Token is the admin token: it logs in, and it is /api/v1's bearer
	// token. At least MinTokenBytes long. Token or Users is required.
	Token string
	// Users may log in with their name and password.
	Users []User
	// TrustProxy trusts X-Forwarded-Proto (for the Secure cookie) and
	// X-Forwarded-For (for the login limit) from the proxy in front.
	// Default false: only the connection counts.
	TrustProxy bool
	// SessionTTL is how long a login lasts. Default 12 hours.
	SessionTTL time.Duration
	// LoginBurst login attempts are allowed at once per client address,
	// then one every LoginEvery. Defaults 10 and 6 seconds.
	LoginBurst int
	LoginEvery time.Duration
	// Resend, if set, sends an outbox delivery again (outbox.ResendTx and
	// its job, in one transaction): the deliveries page's Resend button.
	Resend func(ctx context.Context, delivery int64) error
	// ReplayRate is how many events a second the bulk replay re-enqueues.
	// Default jobs.DefaultReplayRate.
	ReplayRate float64
	// Jobs, if set, is River's UI (jobsui.Handler with JobsPrefix),
	// served under JobsPrefix behind the login.
	Jobs http.Handler
	// Logger logs failures answered with 5xx. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Console is the console's http.Handler: /console, /api/v1 and the
// redirect of /.
type Console struct {
	cfg    Config
	reads  *store.DB // cfg.DB.Reader(): what the pages read, never written
	auth   *Auth
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	api    http.Handler
	charts chartCache
	root   http.Handler
	bulk   bulkRun
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns the console. A missing DB or Queue, or bad credentials (see
// MinTokenBytes, User), is an error wrapping payhook.ErrConfig.
func New(cfg Config) (*Console, error) {
	if cfg.DB == nil || cfg.Queue == nil {
		return nil, fmt.Errorf("console: a database and a queue are required: %w", payhook.ErrConfig)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.LoginBurst <= 0 {
		cfg.LoginBurst = 10
	}
	if cfg.LoginEvery <= 0 {
		cfg.LoginEvery = 6 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	auth, err := newAuth(cfg)
	if err != nil {
		return nil, err
	}
	auth.ended = cfg.DB.SessionEnded
	c := &Console{cfg: cfg, reads: cfg.DB.Reader(), auth: auth, log: cfg.Logger, mux: http.NewServeMux()}
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.api, err = api.New(api.Config{DB: cfg.DB, Logger: cfg.Logger, Authorize: c.apiAuthorized})
	if err != nil {
		return nil, err
	}
	static, _ := fs.Sub(staticFS, "static")
	m := c.mux
	m.Handle("GET /console/static/", http.StripPrefix("/console/static/", cacheFor(http.FileServerFS(static))))
	m.HandleFunc("GET /console/login", c.loginPage)
	m.HandleFunc("POST /console/login", c.login)
	m.HandleFunc("POST /console/logout", c.action(c.logout))
	m.HandleFunc("GET /console", c.page(c.overview))
	m.HandleFunc("GET /console/{$}", c.page(c.overview))
	m.HandleFunc("GET /console/chart.svg", c.page(c.chartSVG))
	m.HandleFunc("GET /console/events", c.page(c.events))
	m.HandleFunc("GET /console/events/replay", c.page(c.replayPlan))
	m.HandleFunc("POST /console/events/replay", c.action(c.replayBulk))
	m.HandleFunc("GET /console/events/{id}", c.page(c.event))
	m.HandleFunc("GET /console/events/{id}/payload", c.page(c.payload))
	m.HandleFunc("POST /console/events/{id}/replay", c.action(c.replay))
	m.HandleFunc("GET /console/payments", c.page(c.payments))
	m.HandleFunc("GET /console/payments/{source}/{ref}", c.page(c.payment))
	m.HandleFunc("GET /console/ledger", c.page(c.ledger))
	m.HandleFunc("GET /console/subscriptions", c.page(c.subscriptions))
	m.HandleFunc("GET /console/orders", c.page(c.orders))
	m.HandleFunc("GET /console/alerts", c.page(c.alerts))
	m.HandleFunc("POST /console/alerts/{id}/ack", c.action(c.ack))
	m.HandleFunc("GET /console/runs", c.page(c.runs))
	m.HandleFunc("GET /console/deliveries", c.page(c.deliveries))
	m.HandleFunc("POST /console/deliveries/{id}/resend", c.action(c.resend))
	m.HandleFunc("GET /console/sources", c.page(c.sources))
	if cfg.Jobs != nil {
		m.Handle(JobsPrefix+"/", c.jobs(cfg.Jobs))
		m.Handle("GET "+JobsPrefix, http.RedirectHandler(JobsPrefix+"/", http.StatusSeeOther))
	}
	m.Handle(api.Prefix, c.api)
	m.Handle("GET /{$}", http.RedirectHandler(Prefix, http.StatusSeeOther))
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		if c.auth.session(r) == nil {
			c.toLogin(w, r)
			return
		}
		c.fail(w, r, fmt.Errorf("no such page %s: %w", r.URL.Path, payhook.ErrNotFound))
	})
	c.root = http.NewCrossOriginProtection().Handler(m)
	return c, nil
}

// ServeHTTP serves /console, /api/v1 and the redirect of /.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, JobsPrefix+"/") {
		// riverui runs its own scripts; the console runs none.
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Frame-Options", "DENY")
	}
	c.root.ServeHTTP(w, r)
}

// Mount registers the console's routes on mux: /console, /console/,
// /api/v1/ and GET / (redirected to /console).
func (c *Console) Mount(mux *http.ServeMux) {
	mux.Handle("/console", c)
	mux.Handle("/console/", c)
	mux.Handle(api.Prefix, c)
	mux.Handle("GET /{$}", c)
}

// apiAuthorized lets an /api/v1 request through with the bearer admin
// token, or with a session; a session's non-GET request also needs its
// CSRF token.
func (c *Console) apiAuthorized(r *http.Request) bool {
	if c.auth.bearer(r) {
		return true
	}
	s := c.auth.session(r)
	if s == nil {
		return false
	}
	return r.Method == http.MethodGet || r.Method == http.MethodHead || c.auth.validCSRF(r, s)
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string
	User    string
	CSRF    string
	Flash   string
	Data    any
	Query   url.Values
	Request *http.Request
}

type pageFunc func(w http.ResponseWriter, r *http.Request, v *view) error

// page wraps a GET handler: it needs a session (else a redirect to the
// login) and renders what the handler put in v, unless it wrote itself.
func (c *Console) page(fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.auth.session(r)
		if s == nil {
			c.toLogin(w, r)
			return
		}
		if err := api.CheckText(r); err != nil {
			c.fail(w, r, err)
			return
		}
		v := &view{User: s.User, CSRF: c.auth.csrf(s), Query: r.URL.Query(), Request: r, Flash: flash(r.URL.Query())}
		if err := fn(w, r, v); err != nil {
			c.fail(w, r, err)
			return
		}
		if v.Nav != "" {
			c.render(w, http.StatusOK, v.Nav, v)
		}
	}
}

// action wraps a POST handler: it needs a session and its CSRF token,
// and answers 303 to where the handler says.
func (c *Console) action(fn func(w http.ResponseWriter, r *http.Request, s *session) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		s := c.auth.session(r)
		if s == nil {
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		if !c.auth.validCSRF(r, s) {
			http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		// A form's text no column can hold is as bad as a query's
		// (api.CheckText): PostgreSQL would fail the query comparing
		// with it (a 500).
		if err := api.CheckValues("form field", r.PostForm); err != nil {
			c.fail(w, r, err)
			return
		}
		to, err := fn(w, r, s)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// toLogin redirects to the login page, coming back to r's page after.
func (c *Console) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "not logged in", http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

// fail answers err as a page with the status of payhook.HTTPStatus; the
// detail of a 5xx is logged, not shown.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := payhook.HTTPStatus(err)
	msg := err.Error()
	if status >= 500 {
		c.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		msg = strings.ToLower(http.StatusText(status))
	}
	v := &view{Title: http.StatusText(status), Data: msg}
	if s := c.auth.session(r); s != nil {
		v.User, v.CSRF = s.User, c.auth.csrf(s)
	}
	c.render(w, status, "error", v)
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v *view) {
	t, ok := c.pages[name]
	if !ok {
		panic("console: no template " + name)
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.Error("console render", "page", name, "err", err)
		http.Error(w, "internal server error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprint(w, b.String())
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// rowID reads the {id} of a route taking payhook's numeric row id.
func rowID(r *http.Request, what string) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: %s id %q: want payhook's numeric id", payhook.ErrInvalid, what, s)
	}
	return id, nil
}

// invalid returns an error wrapping payhook.ErrInvalid: a bad parameter.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", payhook.ErrInvalid, fmt.Sprintf(format, args...))
}

// flash is the message a page shows after an action redirected to it
// (its query's done): one of the console's own, never the query's text,
// so that a link made elsewhere cannot put words in the console's mouth.
func flash(q url.Values) string {
	switch done := q.Get("done"); done {
	case "replayed", "acknowledged", "resent":
		return done
	case "bulk-replay":
		if n, err := strconv.Atoi(q.Get("n")); err == nil && n >= 0 {
			return fmt.Sprintf("bulk replay of %d events started", n)
		}
	}
	return ""
}
