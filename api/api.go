// Package api is payhook's read API for applications and operators: the
// billing state (payments, orders, subscriptions, ledger balances), the
// alerts and the stored events, as JSON, behind a bearer admin token
// (PAYHOOK_ADMIN_TOKEN in the server, which serves it through package
// console: a console session works too). It is HTTP only: the lookups and
// the views it answers are billing's (billing.LookupPayment,
// billing.EventViews...), shared with the CLI.
//
// Routes (every one needs "Authorization: Bearer <token>"):
//
//	GET  /api/v1/payments/{id}         a payment by provider reference, with its ledger postings;
//	                                   ?source=S when the reference exists in several sources (else 409)
//	GET  /api/v1/payments              ?source= &kind= &status= &order_id= &limit= (newest first)
//	GET  /api/v1/orders/{id}           an order by the application's order id; ?source= as for payments
//	                                   (the same order id in a test and a live source is two orders)
//	GET  /api/v1/orders                ?source= &status= &limit=
//	GET  /api/v1/subscriptions/{id}    a subscription by provider reference; ?source= as for payments
//	GET  /api/v1/subscriptions         ?source= &status= &customer= &limit=
//	GET  /api/v1/ledger/balances       balances per currency and account, and each currency's sum (0)
//	GET  /api/v1/alerts                ?acknowledged=false &kind= &limit= (most recently seen first)
//	POST /api/v1/alerts/{id}/ack       acknowledge an alert; ?count=N: only as seen with that count
//	                                   (raised again since: 409, left open)
//	GET  /api/v1/events/{id}           an event by payhook's row id, payload inline
//	GET  /api/v1/events                ?source= &status= &event_id= &limit= (newest first, payload inline)
//
// Lists answer an object holding the array ({"payments": [...]}); limit
// defaults to 100 and is at most 1000. Errors answer {"error": "..."} with
// the status of payhook.HTTPStatus: 404 for what does not exist, 400 for
// a bad parameter (payhook.ErrInvalid), 409 for an ambiguous reference or
// order id (payhook.ErrConflict, with "sources": [...]); and 401 with
// WWW-Authenticate: Bearer for a missing or wrong token, 405 for another
// method.
//
// The handler uses full paths, so it works on its own or mounted at
// "/api/v1/" of another mux.
package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/store"
)

// Prefix is where the API's routes live.
const Prefix = "/api/v1/"

// MaxLimit caps the limit parameter of the lists.
const MaxLimit = 1000

// Config configures the API.
type Config struct {
	// DB is the payhook database (migrated). Required.
	DB *store.DB
	// Token is the bearer admin token every request must carry. Required
	// unless Authorize is set: the API is never served without a check.
	Token string
	// Authorize, if set, decides instead of Token whether a request may
	// be served (the console lets its sessions in); a refused request is
	// answered 401.
	Authorize func(r *http.Request) bool
	// Logger logs failures answered with 5xx; nil means slog.Default().
	Logger *slog.Logger
}

type api struct {
	db        *store.DB // for acknowledging alerts
	reads     *store.DB // db.Reader(): every other answer's
	tokenHash [sha256.Size]byte
	authorize func(r *http.Request) bool
	log       *slog.Logger
	mux       *http.ServeMux
}

// New returns the API handler. An empty Token without Authorize, or a nil
// DB, is an error wrapping payhook.ErrConfig.
func New(cfg Config) (http.Handler, error) {
	if cfg.Token == "" && cfg.Authorize == nil {
		return nil, fmt.Errorf("api: empty admin token (set PAYHOOK_ADMIN_TOKEN): %w", payhook.ErrConfig)
	}
	if cfg.DB == nil {
		return nil, fmt.Errorf("api: no database: %w", payhook.ErrConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &api{db: cfg.DB, reads: cfg.DB.Reader(), tokenHash: sha256.Sum256([]byte(cfg.Token)), authorize: cfg.Authorize, log: cfg.Logger, mux: http.NewServeMux()}
	a.mux.HandleFunc("GET /api/v1/payments/{id}", a.payment)
	a.mux.HandleFunc("GET /api/v1/payments", a.payments)
	a.mux.HandleFunc("GET /api/v1/orders/{id}", a.order)
	a.mux.HandleFunc("GET /api/v1/orders", a.orders)
	a.mux.HandleFunc("GET /api/v1/subscriptions/{id}", a.subscription)
	a.mux.HandleFunc("GET /api/v1/subscriptions", a.subscriptions)
	a.mux.HandleFunc("GET /api/v1/ledger/balances", a.balances)
	a.mux.HandleFunc("GET /api/v1/alerts", a.alerts)
	a.mux.HandleFunc("POST /api/v1/alerts/{id}/ack", a.ackAlert)
	a.mux.HandleFunc("GET /api/v1/events/{id}", a.event)
	a.mux.HandleFunc("GET /api/v1/events", a.events)
	a.mux.HandleFunc("/", a.noRoute)
	return a, nil
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="payhook"`)
		writeJSON(w, http.StatusUnauthorized, errorBody{Error: "missing or wrong bearer token"})
		return
	}
	if err := CheckText(r); err != nil {
		a.fail(w, r, err)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// CheckText returns an error wrapping payhook.ErrInvalid when r's path or
// a query parameter holds text no column can hold (not UTF-8, or a NUL):
// nothing stored matches it, and PostgreSQL fails a query comparing with
// it (a 500) where SQLite finds nothing. The console's pages check theirs
// too.
func CheckText(r *http.Request) error {
	if payhook.Storable(r.URL.Path) != r.URL.Path {
		return fmt.Errorf("%w: the path is not valid UTF-8 or holds a NUL: no reference is", payhook.ErrInvalid)
	}
	return CheckValues("parameter", r.URL.Query())
}

// CheckValues returns an error wrapping payhook.ErrInvalid when a name or
// a value of vs (a query's parameters, a form's fields: what they are)
// holds text no column can hold (not UTF-8, or a NUL): nothing stored
// matches it, and PostgreSQL would fail a query comparing with it.
func CheckValues(what string, vs url.Values) error {
	for name, values := range vs {
		for _, v := range values {
			if payhook.Storable(name) != name || payhook.Storable(v) != v {
				return fmt.Errorf("%w: %s %q is not valid UTF-8 or holds a NUL: nothing stored matches it",
					payhook.ErrInvalid, what, payhook.Storable(name))
			}
		}
	}
	return nil
}

// authorized compares the bearer token in constant time (over hashes, so
// the length leaks nothing either).
func (a *api) authorized(r *http.Request) bool {
	if a.authorize != nil {
		return a.authorize(r)
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], a.tokenHash[:]) == 1
}

// noRoute answers 405 for a known path with another method, else 404.
func (a *api) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pattern := a.mux.Handler(r2); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method " + r.Method + " not allowed; use " + strings.Join(allow, " or ")})
		return
	}
	writeJSON(w, http.StatusNotFound, errorBody{Error: "no such route: " + r.URL.Path})
}

type errorBody struct {
	Error   string   `json:"error"`
	Sources []string `json:"sources,omitempty"`
}

// badRequest returns an error wrapping payhook.ErrInvalid: a bad
// parameter, 400.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", payhook.ErrInvalid, fmt.Sprintf(format, args...))
}

// fail answers err with the status of payhook.HTTPStatus; an ambiguous
// reference (409) also names its sources. The detail of a 5xx is logged,
// not shown.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := payhook.HTTPStatus(err)
	if status >= 500 {
		a.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		writeJSON(w, status, errorBody{Error: strings.ToLower(http.StatusText(status))})
		return
	}
	body := errorBody{Error: err.Error()}
	var amb *billing.AmbiguousError
	if errors.As(err, &amb) {
		body = errorBody{Error: amb.Error() + "; add ?source=", Sources: amb.Sources}
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// limit reads ?limit=: 0 (the default of the read functions) when absent.
func limit(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > MaxLimit {
		return 0, badRequest("limit %q: want a number from 1 to %d", s, MaxLimit)
	}
	return n, nil
}

// oneOf checks an optional enumerated parameter.
func oneOf(r *http.Request, name string, allowed []string) (string, error) {
	v := r.URL.Query().Get(name)
	if v != "" && !slices.Contains(allowed, v) {
		return "", badRequest("%s %q: want one of %s", name, v, strings.Join(allowed, ", "))
	}
	return v, nil
}

func (a *api) payment(w http.ResponseWriter, r *http.Request) {
	p, err := billing.LookupPayment(r.Context(), a.reads, r.URL.Query().Get("source"), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (a *api) payments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := limit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status, err := oneOf(r, "status", billing.PaymentStatuses)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	kind, err := oneOf(r, "kind", []string{"fiat", "crypto"})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ps, err := billing.ListPayments(r.Context(), a.reads, billing.PaymentFilter{
		Source: q.Get("source"), Kind: kind, Status: status, OrderID: q.Get("order_id"), Limit: n,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Payments []billing.PaymentView `json:"payments"`
	}{ps})
}

func (a *api) order(w http.ResponseWriter, r *http.Request) {
	o, err := billing.LookupOrder(r.Context(), a.reads, r.URL.Query().Get("source"), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (a *api) orders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := limit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status, err := oneOf(r, "status", billing.OrderStatuses)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	list, err := billing.ListOrders(r.Context(), a.reads, billing.OrderFilter{Source: q.Get("source"), Status: status, Limit: n})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Orders []billing.OrderView `json:"orders"`
	}{list})
}

func (a *api) subscription(w http.ResponseWriter, r *http.Request) {
	s, err := billing.LookupSubscription(r.Context(), a.reads, r.URL.Query().Get("source"), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *api) subscriptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := limit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status, err := oneOf(r, "status", billing.SubscriptionStatuses)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ss, err := billing.ListSubscriptions(r.Context(), a.reads, billing.SubscriptionFilter{
		Source: q.Get("source"), Status: status, Customer: q.Get("customer"), Limit: n,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Subscriptions []billing.SubscriptionView `json:"subscriptions"`
	}{ss})
}

func (a *api) balances(w http.ResponseWriter, r *http.Request) {
	b, err := billing.LedgerBalances(r.Context(), a.reads)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (a *api) alerts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := limit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// ListAlerts refuses a kind neither payhook's nor stored.
	f := billing.AlertFilter{Kind: q.Get("kind"), Limit: n}
	switch ack := q.Get("acknowledged"); ack {
	case "":
	case "false":
		f.Unacknowledged = true
	default:
		a.fail(w, r, badRequest("acknowledged %q: only acknowledged=false (the alerts still open) is supported", ack))
		return
	}
	as, err := billing.ListAlerts(r.Context(), a.reads, f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Alerts []billing.AlertView `json:"alerts"`
	}{as})
}

func (a *api) ackAlert(w http.ResponseWriter, r *http.Request) {
	id, err := rowID(r, "alert")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// ?count=N: the count the client saw; an alert raised again since
	// stays open (409) rather than have the ack hide what was not seen.
	seen := 0
	if v := r.URL.Query().Get("count"); v != "" {
		if seen, err = strconv.Atoi(v); err != nil || seen <= 0 {
			a.fail(w, r, fmt.Errorf("%w: alert %d: count %q: want the count seen, a positive number", payhook.ErrInvalid, id, v))
			return
		}
	}
	if err := billing.AckAlertSeen(r.Context(), a.db, id, seen); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID           int64 `json:"id"`
		Acknowledged bool  `json:"acknowledged"`
	}{id, true})
}

func (a *api) event(w http.ResponseWriter, r *http.Request) {
	id, err := rowID(r, "event")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ev, err := a.reads.Event(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, billing.EventViews([]*payhook.Event{ev}, true)[0])
}

func (a *api) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := limit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status := payhook.Status(q.Get("status"))
	if status != "" && !status.Valid() {
		a.fail(w, r, badRequest("status %q: want received, processed, ignored or failed", status))
		return
	}
	evs, err := a.reads.ListEvents(r.Context(), store.Filter{
		Source: q.Get("source"), Status: status, EventID: q.Get("event_id"), Limit: n,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Events []billing.EventView `json:"events"`
	}{billing.EventViews(evs, true)})
}

// rowID reads the {id} of a route taking payhook's numeric row id.
func rowID(r *http.Request, what string) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("%s id %q: want payhook's numeric id", what, s)
	}
	return id, nil
}
