package flavour

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The neutral event types (the recipe's provider, billete).
const (
	CheckoutCompleted    = "checkout.completed"
	PaymentSucceeded     = "payment.succeeded"
	PaymentRefunded      = "payment.refunded"
	RefundFailed         = "refund.failed"
	PaymentChargedBack   = "payment.charged_back"
	ChargebackWon        = "payment.chargeback_won"
	SubscriptionCreated  = "subscription.created"
	SubscriptionUpdated  = "subscription.updated"
	SubscriptionRenewed  = "subscription.renewed"
	SubscriptionCanceled = "subscription.canceled"
	SubscriptionEnded    = "subscription.ended"
	InvoiceSettled       = "invoice.settled"
	WebhookEndpointTest  = "webhook_endpoint.test"
)

const (
	// maxLimit is the largest page Select returns.
	maxLimit    = 1000
	contentType = "application/json; charset=utf-8"
	alnum       = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	lowerAlnum  = "0123456789abcdefghijklmnopqrstuvwxyz"
	// errPrefixEventsQuery starts EventsQuery's errors.
	errPrefixEventsQuery = "events query"
)

// Types returns the neutral event types, in the order of Event's doc.
func Types() []string {
	return []string{
		CheckoutCompleted, PaymentSucceeded, PaymentRefunded, RefundFailed, PaymentChargedBack, ChargebackWon,
		SubscriptionCreated, SubscriptionUpdated, SubscriptionRenewed, SubscriptionCanceled, SubscriptionEnded,
		InvoiceSettled, WebhookEndpointTest,
	}
}

// ErrQuery is wrapped by every error of EventsQuery: a malformed or
// unknown parameter, or an unknown event type. The events API answers it
// with 400.
var ErrQuery = errors.New("bad events query")

// ErrCursor is returned by Select when the cursor names no listed event.
var ErrCursor = errors.New("no such event for cursor")

// Match reports whether ev passes q's filters (Type and CreatedFrom; the
// cursor and limit are Select's). q.Type may be a comma-separated list of
// neutral types: a provider's type name that covers several neutral types
// (Stripe's customer.subscription.updated, Paddle's adjustment.created...)
// is parsed into such a list, so compare with Match rather than ==.
func (q Query) Match(ev Event) bool {
	if q.Type != "" && !slices.Contains(strings.Split(q.Type, ","), ev.Type) {
		return false
	}
	if q.Charge != "" && (ev.Data == nil || ev.Data["payment_id"] != q.Charge) {
		return false
	}
	return q.CreatedFrom.IsZero() || !ev.CreatedAt.Before(q.CreatedFrom)
}

// Select returns one page of evs (which must be in Seq order) for q: the
// events that Match q, starting after the event whose ID is q.Cursor, at
// most q.Limit of them (0: 100; above 1000: 1000), and the cursor of the
// next page, "" when this is the last one. It returns ErrCursor when
// q.Cursor is set but is no event of evs.
func Select(evs []Event, q Query) (page []Event, next string, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxLimit)
	start := 0
	if q.Cursor != "" {
		i := slices.IndexFunc(evs, func(e Event) bool { return e.ID == q.Cursor })
		if i < 0 {
			return nil, "", fmt.Errorf("%w: %q", ErrCursor, q.Cursor)
		}
		start = i + 1
	}
	page = []Event{}
	for _, ev := range evs[start:] {
		if !q.Match(ev) {
			continue
		}
		if len(page) == limit {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, ev)
	}
	return page, "", nil
}

// randomString returns n characters drawn uniformly from chars with r.
// A read error (crypto/rand never returns one) panics: a secret must not
// be made of what was not drawn.
func randomString(r io.Reader, n int, chars string) string {
	b := make([]byte, n)
	buf := make([]byte, n*2)
	// Rejection sampling keeps the draw unbiased.
	limit := 256 - 256%len(chars)
	for i := 0; i < n; {
		if _, err := io.ReadFull(r, buf); err != nil {
			panic(fmt.Sprintf("flavour: draw a secret: %v", err))
		}
		for _, c := range buf {
			if int(c) < limit {
				b[i] = chars[int(c)%len(chars)]
				if i++; i == n {
					break
				}
			}
		}
	}
	return string(b)
}

// hmacHex returns the hex HMAC-SHA256 of the parts under key.
func hmacHex(key string, parts ...[]byte) string {
	m := hmac.New(sha256.New, []byte(key))
	for _, p := range parts {
		m.Write(p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// checkSecrets returns an error when secrets is empty or holds an empty
// secret.
func checkSecrets(name string, secrets []string) error {
	if len(secrets) == 0 {
		return fmt.Errorf("%s: no signing secret", name)
	}
	for i, s := range secrets {
		if s == "" {
			return fmt.Errorf("%s: signing secret %d is empty", name, i+1)
		}
	}
	return nil
}

// baseHeader returns the headers every delivery carries.
func baseHeader(userAgent string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set("User-Agent", userAgent)
	return h
}

// typeMap translates neutral types to a provider's names and back.
type typeMap struct {
	to       map[string]string // neutral -> provider
	fallback func(string) string
}

// name returns the provider's name of neutral type t.
func (m typeMap) name(t string) string {
	if n, ok := m.to[t]; ok {
		return n
	}
	if m.fallback != nil {
		return m.fallback(t)
	}
	return t
}

// neutral returns the neutral types the provider's name n stands for, in
// Types order; a trailing "*" matches every name with that prefix.
func (m typeMap) neutral(n string) []string {
	var out []string
	for _, t := range Types() {
		p := m.name(t)
		if p == n || strings.HasSuffix(n, "*") && strings.HasPrefix(p, strings.TrimSuffix(n, "*")) {
			out = append(out, t)
		}
	}
	return out
}

// parseTypes turns a comma-separated list of provider type names into
// Query.Type. alsoNeutral accepts neutral names too.
func (m typeMap) parseTypes(param, value string, alsoNeutral bool) (string, error) {
	var out []string
	for n := range strings.SplitSeq(value, ",") {
		n = strings.TrimSpace(n)
		ts := m.neutral(n)
		if len(ts) == 0 && alsoNeutral && slices.Contains(Types(), n) {
			ts = []string{n}
		}
		if len(ts) == 0 {
			return "", fmt.Errorf("%s: %s: unknown event type %q: %w", errPrefixEventsQuery, param, n, ErrQuery)
		}
		for _, t := range ts {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return strings.Join(out, ","), nil
}

// params reads r's query, rejecting a parameter given twice.
func params(r *http.Request) (map[string]string, error) {
	v := r.URL.Query()
	out := make(map[string]string, len(v))
	for k, vs := range v {
		if len(vs) != 1 {
			return nil, fmt.Errorf("%s: parameter %s given %d times: %w", errPrefixEventsQuery, k, len(vs), ErrQuery)
		}
		out[k] = vs[0]
	}
	return out, nil
}

// parseLimit reads a page size between 1 and max.
func parseLimit(param, s string, max int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("%s: %s must be an integer from 1 to %d, not %q: %w", errPrefixEventsQuery, param, max, s, ErrQuery)
	}
	return n, nil
}

// parseRFC3339 reads an RFC 3339 time.
func parseRFC3339(param, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %s must be an RFC 3339 time, not %q: %w", errPrefixEventsQuery, param, s, ErrQuery)
	}
	return t, nil
}

// parseCursor checks an event-id cursor.
func parseCursor(param, s string) (string, error) {
	if s == "" || strings.ContainsAny(s, " ,\t\n") {
		return "", fmt.Errorf("%s: %s must be an event id, not %q: %w", errPrefixEventsQuery, param, s, ErrQuery)
	}
	return s, nil
}

// clone returns a shallow copy of m, never nil.
func clone(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return maps.Clone(m)
}

// rename moves m[from] to m[to] when present.
func rename(m map[string]any, from, to string) {
	if v, ok := m[from]; ok {
		delete(m, from)
		m[to] = v
	}
}

// str returns m[k] as a string ("" when absent or not a string).
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// pick returns the fields of m named keys that are present and not nil.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			out[k] = v
		}
	}
	return out
}

// disputeID returns the id of the dispute a chargeback event's payment
// data is about: data.dispute_id as the sim sets it, else "dp_" + the
// payment id (what payhook's billete mapping falls back to).
func disputeID(d map[string]any) string {
	if id := str(d, "dispute_id"); id != "" {
		return id
	}
	return "dp_" + str(d, "id")
}

// sub returns m[k] as an object, or nil.
func sub(m map[string]any, k string) map[string]any {
	o, _ := m[k].(map[string]any)
	return o
}

// unix converts a time-ish value (time.Time, RFC 3339 string, number) to
// unix seconds; anything else is returned unchanged.
func unix(v any) any {
	switch t := v.(type) {
	case time.Time:
		return t.Unix()
	case *time.Time:
		if t != nil {
			return t.Unix()
		}
	case string:
		if p, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return p.Unix()
		}
	}
	return v
}

// rfc3339 converts a time-ish value to an RFC 3339 string; anything else
// is returned unchanged.
func rfc3339(v any) any {
	switch t := v.(type) {
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	case int64:
		return time.Unix(t, 0).UTC().Format(time.RFC3339)
	case int:
		return time.Unix(int64(t), 0).UTC().Format(time.RFC3339)
	}
	return v
}

// amountString renders an amount in minor units as a string (Paddle).
func amountString(v any) any {
	switch n := v.(type) {
	case int:
		return strconv.Itoa(n)
	case int64:
		return strconv.FormatInt(n, 10)
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64)
	case json.Number:
		return n.String()
	}
	return v
}

// rawList renders each event with body into a JSON array, never null.
func rawList(evs []Event, body func(Event) ([]byte, error)) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(evs))
	for _, ev := range evs {
		b, err := body(ev)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
