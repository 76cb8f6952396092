package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// The real dispatcher is a Sender.
var _ Sender = (*deliver.Dispatcher)(nil)

// ---- fakes ----

// fakeSender records what the provider sends.
type fakeSender struct {
	mu      sync.Mutex
	sent    []sentEvent
	logs    map[string][]deliver.Attempt
	resent  []string
	failing map[string]bool // delivery ids whose Resend fails
}

type sentEvent struct {
	target deliver.Target
	ev     flavour.Event
}

func (s *fakeSender) Send(t deliver.Target, ev flavour.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, sentEvent{t, ev})
}

func (s *fakeSender) Log(endpointID string) []deliver.Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs[endpointID])
}

func (s *fakeSender) Resend(deliveryID string, _ deliver.Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing[deliveryID] {
		return errors.New("endpoint gone")
	}
	s.resent = append(s.resent, deliveryID)
	return nil
}

func (s *fakeSender) Sent() []sentEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// to returns the types sent to endpoint id, in order.
func (s *fakeSender) to(id string) []string {
	var types []string
	for _, se := range s.Sent() {
		if se.target.ID == id {
			types = append(types, se.ev.Type)
		}
	}
	return types
}

// fakeFlavour is a minimal flavour: billete-like query names, a JSON page.
type fakeFlavour struct{ n atomic.Int64 }

func (*fakeFlavour) Name() string     { return "fake" }
func (*fakeFlavour) Provider() string { return "standard" }
func (f *fakeFlavour) NewSecret() string {
	return fmt.Sprintf("whsec_fake%d", f.n.Add(1))
}
func (f *fakeFlavour) NewSecretFrom(io.Reader) string                { return f.NewSecret() }
func (*fakeFlavour) Body(ev flavour.Event, _ string) ([]byte, error) { return json.Marshal(ev) }
func (*fakeFlavour) Sign([]string, flavour.Event, string, []byte, time.Time) (http.Header, error) {
	return http.Header{}, nil
}
func (*fakeFlavour) EventsPath() string              { return "/events" }
func (*fakeFlavour) EventID(ev flavour.Event) string { return ev.ID }

func (*fakeFlavour) EventsQuery(r *http.Request) (flavour.Query, error) {
	v := r.URL.Query()
	q := flavour.Query{Type: v.Get("type"), Cursor: v.Get("cursor")}
	if s := v.Get("created_from"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, fmt.Errorf("created_from: %v", err)
		}
		q.CreatedFrom = t
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return q, fmt.Errorf("limit: %q is not 1..1000", s)
		}
		q.Limit = n
	}
	return q, nil
}

func (*fakeFlavour) EventsPage(evs []flavour.Event, next string) ([]byte, error) {
	data := make([]map[string]any, len(evs))
	for i, ev := range evs {
		data[i] = eventJSON(ev)
	}
	return json.Marshal(map[string]any{"data": data, "next_cursor": next})
}

// clock is a controllable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ---- harness ----

type harness struct {
	p      *Provider
	sender *fakeSender
	clock  *clock
	srv    *httptest.Server
	test   string // test key
	live   string // live key
}

func newHarness(t *testing.T, mod ...func(*Config)) *harness {
	t.Helper()
	h := &harness{sender: &fakeSender{logs: map[string][]deliver.Attempt{}, failing: map[string]bool{}}, clock: newClock()}
	cfg := Config{Flavour: &fakeFlavour{}, Sender: h.sender, Now: h.clock.Now, Seed: 7}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	h.test, h.live = p.Keys()
	h.srv = httptest.NewServer(p.Handler())
	t.Cleanup(h.srv.Close)
	return h
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (r response) errType(t *testing.T) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	if e == nil {
		t.Fatalf("no error object in %s", r.body)
	}
	return e["type"].(string)
}

// do sends a request with key as bearer key ("" for none); body is
// marshalled unless it is a string; headers are name, value pairs.
func (h *harness) do(t *testing.T, key, method, path string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, data}
}

// must sends a request and fails the test unless it answers want.
func (h *harness) must(t *testing.T, want int, key, method, path string, body any, headers ...string) map[string]any {
	t.Helper()
	r := h.do(t, key, method, path, body, headers...)
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	return r.json(t)
}

func (h *harness) endpoint(t *testing.T, key string, events ...string) string {
	t.Helper()
	m := h.must(t, 201, key, "POST", "/webhook_endpoints", map[string]any{"url": "http://127.0.0.1:1/hook", "events": events})
	return m["id"].(string)
}

// payment creates and completes a checkout of amount.
func (h *harness) payment(t *testing.T, amount int64, orderID string) string {
	t.Helper()
	c := h.must(t, 201, h.test, "POST", "/checkouts", map[string]any{"amount": amount, "currency": "eur", "metadata": map[string]string{"order_id": orderID}})
	pay := h.must(t, 200, h.test, "POST", "/checkouts/"+c["id"].(string)+"/complete", nil)
	return pay["id"].(string)
}

func (h *harness) eventTypes(t *testing.T, env string) []string {
	t.Helper()
	st, err := h.p.Snapshot(env)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range st.Events {
		types = append(types, ev.Type)
	}
	return types
}

// ---- tests ----

func TestNewValidates(t *testing.T) {
	t.Parallel()
	s := &fakeSender{}
	for name, cfg := range map[string]Config{
		"no flavour":     {Sender: s},
		"no sender":      {Flavour: &fakeFlavour{}},
		"same keys":      {Flavour: &fakeFlavour{}, Sender: s, TestKey: "sk_x", LiveKey: "sk_x"},
		"unset defaults": {Flavour: &fakeFlavour{}, Sender: s},
	} {
		_, err := New(cfg)
		if (err == nil) != (name == "unset defaults") {
			t.Errorf("%s: New error %v", name, err)
		}
	}
	p, _ := New(Config{Flavour: &fakeFlavour{}, Sender: s, Seed: 1})
	test, live := p.Keys()
	if len(test) != len("sk_test_")+24 || test[:8] != "sk_test_" || live[:8] != "sk_live_" {
		t.Errorf("generated keys %q %q", test, live)
	}
}

func TestSeedMakesIDsReproducible(t *testing.T) {
	t.Parallel()
	ids := func(seed int64) []string {
		p, err := New(Config{Flavour: &fakeFlavour{}, Sender: &fakeSender{}, Seed: seed, Now: newClock().Now})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := p.CreateCheckout(EnvTest, 100, "eur", "o1")
		pay, _ := p.CompleteCheckout(EnvTest, c.ID)
		s, _ := p.CreateSubscription(EnvLive, "cus_1", "basic")
		st, _ := p.Snapshot(EnvTest)
		test, _ := p.Keys()
		return []string{test, c.ID, pay.ID, s.ID, st.Events[0].ID, st.Events[1].ID}
	}
	a, b, c := ids(42), ids(42), ids(43)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different ids:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("different seeds, same ids: %v", a)
	}
	for i, prefix := range []string{"sk_test_", "chk_", "pay_", "sub_", "evt_", "evt_"} {
		if len(a[i]) != len(prefix)+24 || a[i][:len(prefix)] != prefix {
			t.Errorf("id %q: want %s + 24 chars", a[i], prefix)
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name   string
		header string
	}{
		{"missing", ""},
		{"wrong key", "Bearer sk_test_nope"},
		{"not bearer", "Basic " + h.test},
		{"empty bearer", "Bearer "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"/webhook_endpoints", "/events", "/no/such/route"} {
				r := h.do(t, "", "GET", path, nil, "Authorization", tc.header)
				if r.status != 401 || r.errType(t) != "authentication" {
					t.Errorf("GET %s: %d %s, want 401 authentication", path, r.status, r.body)
				}
			}
		})
	}

	t.Run("environments are separate worlds", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.endpoint(t, h.test, "*")
		pay := h.payment(t, 500, "o1")
		chk := h.must(t, 200, h.test, "GET", "/payments/"+pay, nil)["checkout_id"].(string)
		for _, path := range []string{"/payments/" + pay, "/checkouts/" + chk} {
			if r := h.do(t, h.live, "GET", path, nil); r.status != 404 || r.errType(t) != "not_found" {
				t.Errorf("live GET %s: %d %s", path, r.status, r.body)
			}
		}
		if r := h.do(t, h.live, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": 1}); r.status != 404 {
			t.Errorf("live refund of a test payment: %d %s", r.status, r.body)
		}
		if l := h.must(t, 200, h.live, "GET", "/webhook_endpoints", nil)["data"].([]any); len(l) != 0 {
			t.Errorf("live endpoints: %v", l)
		}
		if l := h.must(t, 200, h.live, "GET", "/events", nil)["data"].([]any); len(l) != 0 {
			t.Errorf("live events: %v", l)
		}
		evs := h.must(t, 200, h.test, "GET", "/events", nil)["data"].([]any)
		if len(evs) != 2 || evs[0].(map[string]any)["environment"] != "test" {
			t.Errorf("test events: %v", evs)
		}
	})
}

// TestAPIRate: with Config.APIRate, each environment's API answers that
// many requests a second (a second's worth at once), and 429 rate_limit
// beyond, with a Retry-After of the seconds until the next it answers,
// on the provider's clock; a key that is
// wrong is told so first (401). Invalid rates are refused.
func TestAPIRate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.APIRate = 2 })
	for i, want := range []int{200, 200, 429, 429} {
		r := h.do(t, h.test, "GET", "/webhook_endpoints", nil)
		if r.status != want || want == 429 && (r.errType(t) != "rate_limit" || r.header.Get("Retry-After") != "1") {
			t.Fatalf("request %d in the first second: %d %v %s; want %d", i+1, r.status, r.header, r.body, want)
		}
	}
	if r := h.do(t, "", "GET", "/webhook_endpoints", nil, "Authorization", "Bearer sk_test_nope"); r.status != 401 {
		t.Errorf("a wrong key beyond the rate: %d; want 401", r.status)
	}
	if r := h.do(t, h.live, "GET", "/webhook_endpoints", nil); r.status != 200 {
		t.Errorf("the live environment, whose rate is its own: %d %s; want 200", r.status, r.body)
	}
	h.clock.Add(500 * time.Millisecond) // a request's worth
	for i, want := range []int{200, 429} {
		if r := h.do(t, h.test, "GET", "/webhook_endpoints", nil); r.status != want {
			t.Fatalf("request %d half a second on: %d %s; want %d", i+1, r.status, r.body, want)
		}
	}
	// A request every 10 s: the Retry-After says when the next is answered.
	slow := newHarness(t, func(c *Config) { c.APIRate = 0.1 })
	slow.do(t, slow.test, "GET", "/webhook_endpoints", nil)
	slow.clock.Add(2500 * time.Millisecond)
	if r := slow.do(t, slow.test, "GET", "/webhook_endpoints", nil); r.status != 429 || r.header.Get("Retry-After") != "8" {
		t.Errorf("at 0.1 a second, 2.5 s after a request: %d, Retry-After %q; want 429, 8", r.status, r.header.Get("Retry-After"))
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := New(Config{Flavour: &fakeFlavour{}, Sender: &fakeSender{}, APIRate: bad}); err == nil {
			t.Errorf("APIRate %g: no error", bad)
		}
	}
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		typ          string
	}{
		{"GET", "/nope", nil, 404, "not_found"},
		{"GET", "/checkouts/chk_nope", nil, 404, "not_found"},
		{"PUT", "/checkouts", nil, 405, "invalid_request"},
		{"DELETE", "/payments/pay_x", nil, 405, "invalid_request"},
		{"POST", "/checkouts", "{not json", 400, "invalid_request"},
		{"POST", "/checkouts", map[string]any{"amount": 1, "currency": "eur", "colour": "red"}, 400, "invalid_request"},
		{"POST", "/checkouts", map[string]any{"amount": 1.5, "currency": "eur"}, 400, "invalid_request"},
		{"POST", "/checkouts", map[string]any{"amount": 0, "currency": "eur"}, 400, "invalid_request"},
		{"POST", "/checkouts", map[string]any{"amount": 10}, 400, "invalid_request"},
		{"POST", "/webhook_endpoints", map[string]any{"url": "ftp://x", "events": []string{"*"}}, 400, "invalid_request"},
		{"POST", "/webhook_endpoints", map[string]any{"url": "http://x/"}, 400, "invalid_request"},
		{"POST", "/webhook_endpoints", map[string]any{"url": "http://x/", "events": []string{"payment.exploded"}}, 400, "invalid_request"},
		{"POST", "/subscriptions", map[string]any{"customer": "c"}, 400, "invalid_request"},
		{"GET", "/events?limit=abc", nil, 400, "invalid_request"},
		{"GET", "/events?cursor=evt_unknown", nil, 400, "invalid_request"},
	} {
		r := h.do(t, h.test, tc.method, tc.path, tc.body)
		if r.status != tc.status || r.errType(t) != tc.typ {
			t.Errorf("%s %s %v: %d %s, want %d %s", tc.method, tc.path, tc.body, r.status, r.body, tc.status, tc.typ)
		}
	}
	if r := h.do(t, h.test, "PUT", "/checkouts", nil); r.header.Get("Allow") == "" {
		t.Errorf("405 without Allow header")
	}
	if n := len(h.sender.Sent()); n != 0 {
		t.Errorf("%d sends after only errors", n)
	}
}

func ptr[T any](v T) *T { return &v }

func TestGoMethodsValidateEnv(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.p.CreateCheckout("prod", 1, "eur", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown env: %v", err)
	}
	if _, err := h.p.GetPayment(EnvTest, "pay_x"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		t.Errorf("missing payment: %v", err)
	}
	if evs, next := h.p.Events("prod", flavour.Query{}); len(evs) != 0 || next != "" {
		t.Errorf("events of an unknown env: %v %q", evs, next)
	}
}

// unlockedSender checks, at every Send, that the provider's lock is free
// and that it can call back into the provider (a target's secrets, a
// read), as a real Sender does.
type unlockedSender struct {
	fakeSender
	p    *Provider
	held []string // event types sent with the lock held
}

func (s *unlockedSender) Send(t deliver.Target, ev flavour.Event) {
	if !s.p.mu.TryLock() {
		s.held = append(s.held, ev.Type)
	} else {
		s.p.mu.Unlock()
		t.Secrets()
		s.p.Snapshot(ev.Environment)
	}
	s.fakeSender.Send(t, ev)
}

// TestSendsAfterUnlocking: every change that emits an event hands it to
// the Sender with the lock released, including a failing change's.
func TestSendsAfterUnlocking(t *testing.T) {
	t.Parallel()
	sender := &unlockedSender{fakeSender: fakeSender{logs: map[string][]deliver.Attempt{}}}
	p, err := New(Config{Flavour: &fakeFlavour{}, Sender: sender, Now: newClock().Now, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	sender.p = p
	ep, _, err := p.CreateEndpoint(EnvTest, "http://127.0.0.1:9/hook", []string{"*"}, "")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.CreateCheckout(EnvTest, 1000, "EUR", "ord_1")
	var pay Payment
	var sub Subscription
	inv, _ := p.CreateInvoice(EnvTest, 5, "BTC", "ord_2")
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"complete", func() (err error) { pay, err = p.CompleteCheckout(EnvTest, c.ID); return err }},
		{"refund", func() error { _, err := p.Refund(EnvTest, pay.ID, 100, "k", false); return err }},
		{"refund replayed", func() error { _, err := p.Refund(EnvTest, pay.ID, 100, "k", false); return err }},
		{"refund failed", func() error { _, err := p.Refund(EnvTest, pay.ID, 100, "", true); return err }},
		{"chargeback", func() error { _, err := p.Chargeback(EnvTest, pay.ID); return err }},
		{"win", func() error { _, err := p.WinChargeback(EnvTest, pay.ID); return err }},
		{"subscribe", func() (err error) { sub, err = p.CreateSubscription(EnvTest, "cus_1", "basic"); return err }},
		{"upgrade", func() error { _, err := p.UpdateSubscription(EnvTest, sub.ID, "pro"); return err }},
		{"renew", func() error { _, err := p.RenewSubscription(EnvTest, sub.ID); return err }},
		{"cancel", func() error { _, err := p.CancelSubscription(EnvTest, sub.ID); return err }},
		{"end", func() error { _, err := p.EndSubscription(EnvTest, sub.ID); return err }},
		{"settle", func() error { _, err := p.SettleInvoice(EnvTest, inv.ID, "tx_1"); return err }},
		{"test event", func() error { _, err := p.SendTest(EnvTest, ep.ID); return err }},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	// Failed changes: the lock is released too (a second call would hang).
	if _, err := p.Chargeback(EnvTest, "pay_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("chargeback of a missing payment: %v", err)
	}
	if _, err := p.SettleInvoice(EnvTest, inv.ID, "tx_2"); !errors.Is(err, ErrConflict) {
		t.Fatalf("settling twice: %v", err)
	}
	if !p.mu.TryLock() {
		t.Fatal("the provider's lock is held after the changes")
	}
	p.mu.Unlock()
	if len(sender.held) > 0 {
		t.Fatalf("sent with the lock held: %v", sender.held)
	}
	if got, want := len(sender.Sent()), 13; got != want { // 2 for the checkout, none for the replay
		t.Fatalf("%d events sent, want %d", got, want)
	}
}
