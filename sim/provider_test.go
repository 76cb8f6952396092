package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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

func (s *fakeSender) Resend(deliveryID string) error {
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

func TestEndpointSecretShownOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	created := h.must(t, 201, h.test, "POST", "/webhook_endpoints", map[string]any{
		"url": "https://shop.example/hook", "events": []string{"checkout.completed"}, "api_version": "2025-06-01",
	})
	id, _ := created["id"].(string)
	secret, _ := created["secret"].(string)
	if id == "" || secret == "" || created["url"] != "https://shop.example/hook" || created["api_version"] != "2025-06-01" || created["environment"] != "test" {
		t.Fatalf("created: %v", created)
	}

	got := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+id, nil)
	if _, ok := got["secret"]; ok {
		t.Errorf("GET shows the secret: %v", got)
	}
	listed := h.must(t, 200, h.test, "GET", "/webhook_endpoints", nil)["data"].([]any)
	if len(listed) != 1 {
		t.Fatalf("list: %v", listed)
	}
	if _, ok := listed[0].(map[string]any)["secret"]; ok {
		t.Errorf("list shows the secret: %v", listed)
	}
	if bytes.Contains(h.do(t, h.test, "GET", "/webhook_endpoints", nil).body, []byte(secret)) {
		t.Errorf("the secret appears in the list body")
	}

	// The secret shown is the one deliveries are signed with.
	h.must(t, 202, h.test, "POST", "/webhook_endpoints/"+id+"/test", nil)
	sent := h.sender.Sent()
	if len(sent) != 1 || !slices.Equal(sent[0].target.Secrets(), []string{secret}) {
		t.Fatalf("sent %+v", sent)
	}
	if sent[0].target.URL != "https://shop.example/hook" || sent[0].target.Flavour == nil {
		t.Errorf("target %+v", sent[0].target)
	}

	// Update, then delete.
	upd := h.must(t, 200, h.test, "POST", "/webhook_endpoints/"+id, map[string]any{"events": []string{"*"}, "api_version": "2026-01-01"})
	if upd["api_version"] != "2026-01-01" || upd["url"] != "https://shop.example/hook" || fmt.Sprint(upd["events"]) != "[*]" {
		t.Errorf("updated: %v", upd)
	}
	if _, ok := upd["secret"]; ok {
		t.Errorf("update shows the secret")
	}
	h.must(t, 200, h.test, "DELETE", "/webhook_endpoints/"+id, nil)
	if r := h.do(t, h.test, "GET", "/webhook_endpoints/"+id, nil); r.status != 404 {
		t.Errorf("GET after delete: %d", r.status)
	}
	h.payment(t, 100, "o1")
	if n := len(h.sender.Sent()); n != 1 {
		t.Errorf("a deleted endpoint still receives: %d sends", n)
	}
}

func TestRotateSecretGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Grace = time.Hour })
	created := h.must(t, 201, h.test, "POST", "/webhook_endpoints", map[string]any{"url": "http://127.0.0.1:1/", "events": []string{"*"}})
	id, old := created["id"].(string), created["secret"].(string)
	// A target handed out before the rotation follows it: Secrets is read
	// at call time.
	before, err := h.p.Target(EnvTest, id)
	if err != nil {
		t.Fatal(err)
	}

	rot := h.must(t, 200, h.test, "POST", "/webhook_endpoints/"+id+"/rotate_secret", nil)
	fresh, _ := rot["secret"].(string)
	if fresh == "" || fresh == old {
		t.Fatalf("rotate: %v", rot)
	}
	if _, ok := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+id, nil)["secret"]; ok {
		t.Errorf("GET shows the secret after rotation")
	}

	for _, step := range []struct {
		advance time.Duration
		want    []string
	}{
		{0, []string{fresh, old}},
		{59 * time.Minute, []string{fresh, old}},
		{time.Minute, []string{fresh}}, // exactly Grace later
		{24 * time.Hour, []string{fresh}},
	} {
		h.clock.Add(step.advance)
		if got := before.Secrets(); !slices.Equal(got, step.want) {
			t.Errorf("after +%v: secrets %v, want %v", step.advance, got, step.want)
		}
	}

	// A second rotation: the rotated-out secret signs beside the newest.
	newest := h.must(t, 200, h.test, "POST", "/webhook_endpoints/"+id+"/rotate_secret", nil)["secret"].(string)
	h.must(t, 202, h.test, "POST", "/webhook_endpoints/"+id+"/test", nil)
	sent := h.sender.Sent()
	if got := sent[len(sent)-1].target.Secrets(); !slices.Equal(got, []string{newest, fresh}) {
		t.Errorf("after second rotation: %v", got)
	}
	if r := h.do(t, h.live, "POST", "/webhook_endpoints/"+id+"/rotate_secret", nil); r.status != 404 {
		t.Errorf("rotating with the other env's key: %d", r.status)
	}
}

func TestRefundIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.endpoint(t, h.test, "*")
	pay := h.payment(t, 1000, "o1")
	refund := func(key string, amount int64) response {
		return h.do(t, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": amount}, "Idempotency-Key", key)
	}
	refunded := func() int {
		n := 0
		for _, typ := range h.eventTypes(t, EnvTest) {
			if typ == "payment.refunded" {
				n++
			}
		}
		return n
	}

	first := refund("k1", 300)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	r1 := first.json(t)
	again := refund("k1", 300)
	if again.status != 201 || again.json(t)["id"] != r1["id"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("same key: %d %s (replayed %q), want refund %v", again.status, again.body, again.header.Get("Idempotent-Replayed"), r1["id"])
	}
	if p := h.must(t, 200, h.test, "GET", "/payments/"+pay, nil); p["refunded_amount"] != 300.0 || p["status"] != "partially_refunded" {
		t.Errorf("after one refund, twice asked: %v", p)
	}
	if n := refunded(); n != 1 {
		t.Errorf("%d payment.refunded events, want 1", n)
	}

	second := refund("k2", 300)
	if second.status != 201 || second.json(t)["id"] == r1["id"] {
		t.Errorf("other key: %d %s", second.status, second.body)
	}

	over := refund("k3", 401)
	if over.status != 400 || over.errType(t) != "invalid_request" {
		t.Errorf("over-refund: %d %s", over.status, over.body)
	}
	if n := refunded(); n != 2 {
		t.Errorf("%d payment.refunded events after the over-refund, want 2", n)
	}

	if r := refund("k1", 200); r.status != 409 || r.errType(t) != "conflict" {
		t.Errorf("same key, other amount: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": 300, "simulate_failure": true}, "Idempotency-Key", "k1"); r.status != 409 {
		t.Errorf("same key, now failing: %d %s", r.status, r.body)
	}

	last := refund("k3", 400) // k3 was not taken by the rejected request
	if last.status != 201 {
		t.Fatalf("rest: %d %s", last.status, last.body)
	}
	p := h.must(t, 200, h.test, "GET", "/payments/"+pay, nil)
	if p["refunded_amount"] != 1000.0 || p["status"] != "refunded" {
		t.Errorf("fully refunded: %v", p)
	}

	// payment.refunded carries the payment after the refund and the refund.
	st, _ := h.p.Snapshot(EnvTest)
	ev := st.Events[len(st.Events)-1]
	ref, _ := ev.Data["refund"].(map[string]any)
	if ev.Type != "payment.refunded" || ev.ObjectID != pay || ev.Data["status"] != "refunded" || ev.Data["refunded_amount"] != int64(1000) ||
		ref["id"] != last.json(t)["id"] || ref["amount"] != int64(400) || ref["status"] != "succeeded" {
		t.Errorf("last event %+v", ev)
	}
	if len(st.Refunds) != 3 {
		t.Errorf("%d refunds, want 3", len(st.Refunds))
	}
	if r := h.do(t, h.test, "GET", "/refunds/"+r1["id"].(string), nil); r.status != 200 {
		t.Errorf("GET refund: %d", r.status)
	}
}

func TestRefundConcurrentSameKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pay := h.payment(t, 1000, "o1")
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Go(func() {
			r, err := h.p.Refund(EnvTest, pay, 100, "same", false)
			if err != nil {
				t.Error(err)
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	if ids[0] == "" || slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
		t.Errorf("ids %v", ids)
	}
	if p, _ := h.p.GetPayment(EnvTest, pay); p.RefundedAmount != 100 {
		t.Errorf("refunded %d, want 100", p.RefundedAmount)
	}
}

func TestRefundFailureAndChargeback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "refund.failed", "payment.charged_back")
	pay := h.payment(t, 1000, "o1")
	r := h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": 250, "simulate_failure": true})
	if r["status"] != "failed" || r["reason"] == nil || r["payment_id"] != pay {
		t.Errorf("failed refund: %v", r)
	}
	if p := h.must(t, 200, h.test, "GET", "/payments/"+pay, nil); p["status"] != "succeeded" || p["refunded_amount"] != 0.0 {
		t.Errorf("payment after a failed refund: %v", p)
	}
	cb := h.must(t, 200, h.test, "POST", "/payments/"+pay+"/chargeback", nil)
	if cb["status"] != "charged_back" {
		t.Errorf("chargeback: %v", cb)
	}
	if r := h.do(t, h.test, "POST", "/payments/"+pay+"/chargeback", nil); r.status != 409 {
		t.Errorf("second chargeback: %d", r.status)
	}
	if r := h.do(t, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": 1}); r.status != 409 {
		t.Errorf("refund of a charged-back payment: %d", r.status)
	}
	if got := h.sender.to(ep); !slices.Equal(got, []string{"refund.failed", "payment.charged_back"}) {
		t.Errorf("sent %v", got)
	}
	sent := h.sender.Sent()
	if d := sent[0].ev.Data; d["id"] != r["id"] || d["status"] != "failed" || d["amount"] != int64(250) {
		t.Errorf("refund.failed data %v", d)
	}
}

func TestEventsPagination(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var subs []string
	for i := range 25 {
		s, err := h.p.CreateSubscription(EnvTest, fmt.Sprintf("cus_%d", i), "basic")
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s.ID)
		h.clock.Add(time.Second)
	}
	for _, id := range subs[:3] {
		if _, err := h.p.RenewSubscription(EnvTest, id); err != nil {
			t.Fatal(err)
		}
	}
	// 28 events: 25 created (at +0s..+24s), 3 renewed (at +25s).

	type page struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Seq  int64  `json:"seq"`
		} `json:"data"`
		Next string `json:"next_cursor"`
	}
	walk := func(t *testing.T, query string) (ids []string, sizes []int) {
		t.Helper()
		cursor := ""
		for range 100 {
			q := query
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			r := h.do(t, h.test, "GET", "/events?"+q, nil)
			if r.status != 200 {
				t.Fatalf("GET /events?%s: %d %s", q, r.status, r.body)
			}
			var pg page
			if err := json.Unmarshal(r.body, &pg); err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(pg.Data))
			for _, ev := range pg.Data {
				ids = append(ids, ev.ID)
			}
			if pg.Next == "" {
				return ids, sizes
			}
			if pg.Next != pg.Data[len(pg.Data)-1].ID {
				t.Fatalf("cursor %q is not the last event of the page", pg.Next)
			}
			cursor = pg.Next
		}
		t.Fatal("no last page")
		return nil, nil
	}

	st, _ := h.p.Snapshot(EnvTest)
	all := make([]string, len(st.Events))
	for i, ev := range st.Events {
		all[i] = ev.ID
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
	}
	created := all[:25]
	from := h.clock.t.Add(-10 * time.Second) // +15s: created 15..24, the 3 renewals

	for _, tc := range []struct {
		name  string
		query string
		want  []string
		sizes []int
	}{
		{"all, limit 10", "limit=10", all, []int{10, 10, 8}},
		{"all, default limit", "", all, []int{28}},
		{"type, limit 10", "limit=10&type=subscription.created", created, []int{10, 10, 5}},
		{"type renewed", "type=subscription.renewed&limit=2", all[25:], []int{2, 1}},
		{"created_from", "limit=10&created_from=" + url.QueryEscape(from.Format(time.RFC3339Nano)), all[15:], []int{10, 3}},
		{"exact fit", "limit=14", all, []int{14, 14}},
		{"nothing", "type=invoice.settled", nil, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, sizes := walk(t, tc.query)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("ids %v\nwant %v", ids, tc.want)
			}
			if !slices.Equal(sizes, tc.sizes) {
				t.Errorf("page sizes %v, want %v", sizes, tc.sizes)
			}
		})
	}

	// The Go method agrees, and events carry what the recipe says.
	evs, next := h.p.Events(EnvTest, flavour.Query{Limit: 3, Cursor: all[1]})
	if len(evs) != 3 || evs[0].ID != all[2] || next != all[4] {
		t.Errorf("Events after %s: %d events, next %q", all[1], len(evs), next)
	}
	ev := evs[0]
	if ev.Environment != "test" || ev.APIVersion != DefaultAPIVersion || ev.Type != "subscription.created" || ev.ObjectID != subs[2] || ev.Data["id"] != subs[2] {
		t.Errorf("event %+v", ev)
	}
	evs[0].Data["id"] = "mutated"
	if again, _ := h.p.Events(EnvTest, flavour.Query{Limit: 3, Cursor: all[1]}); again[0].Data["id"] != subs[2] {
		t.Errorf("a caller's change reached the log")
	}
}

func TestTestEventReachesOnlyItsEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.endpoint(t, h.test, "*")
	b := h.endpoint(t, h.test, "*")
	c := h.endpoint(t, h.test, "webhook_endpoint.test")
	ev := h.must(t, 202, h.test, "POST", "/webhook_endpoints/"+b+"/test", nil)
	if ev["type"] != "webhook_endpoint.test" || ev["id"] == "" {
		t.Errorf("test event: %v", ev)
	}
	sent := h.sender.Sent()
	if len(sent) != 1 || sent[0].target.ID != b || sent[0].ev.Type != "webhook_endpoint.test" || sent[0].ev.Data["endpoint_id"] != b {
		t.Fatalf("sent %+v", sent)
	}
	if len(h.sender.to(a)) != 0 || len(h.sender.to(c)) != 0 {
		t.Errorf("other endpoints received the test event")
	}
	if r := h.do(t, h.live, "POST", "/webhook_endpoints/"+b+"/test", nil); r.status != 404 {
		t.Errorf("test through the live key: %d", r.status)
	}
}

func TestEventRouting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	settled := h.must(t, 201, h.test, "POST", "/webhook_endpoints", map[string]any{
		"url": "http://127.0.0.1:1/a", "events": []string{"invoice.settled"}, "api_version": "2025-01-01",
	})["id"].(string)
	all := h.endpoint(t, h.test, "*")
	two := h.endpoint(t, h.test, "checkout.completed", "subscription.renewed")
	liveAll := h.endpoint(t, h.live, "*")

	h.payment(t, 100, "o1")
	inv, _ := h.p.CreateInvoice(EnvTest, 5000, "BTC", "o2")
	if _, err := h.p.SettleInvoice(EnvTest, inv.ID, "tx1"); err != nil {
		t.Fatal(err)
	}
	s, _ := h.p.CreateSubscription(EnvTest, "cus", "basic")
	if _, err := h.p.RenewSubscription(EnvTest, s.ID); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		endpoint string
		want     []string
	}{
		{settled, []string{"invoice.settled"}},
		{all, []string{"checkout.completed", "payment.succeeded", "invoice.settled", "subscription.created", "subscription.renewed"}},
		{two, []string{"checkout.completed", "subscription.renewed"}},
		{liveAll, nil},
	} {
		if got := h.sender.to(tc.endpoint); !slices.Equal(got, tc.want) {
			t.Errorf("endpoint %s got %v, want %v", tc.endpoint, got, tc.want)
		}
	}

	// Each endpoint gets the event in its own api_version; the log keeps
	// the provider's; all copies share the event id.
	var copies []flavour.Event
	for _, se := range h.sender.Sent() {
		if se.ev.Type == "invoice.settled" {
			copies = append(copies, se.ev)
			if se.target.Flavour == nil || se.target.URL == "" {
				t.Errorf("target %+v", se.target)
			}
		}
	}
	if len(copies) != 2 || copies[0].ID != copies[1].ID || copies[0].APIVersion != "2025-01-01" || copies[1].APIVersion != DefaultAPIVersion {
		t.Errorf("invoice.settled copies %+v", copies)
	}

	// Changing an endpoint's events and version applies to what follows.
	if _, err := h.p.UpdateEndpoint(EnvTest, settled, EndpointUpdate{Events: &[]string{"subscription.canceled"}, APIVersion: ptr("2026-01-01")}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.CancelSubscription(EnvTest, s.ID); err != nil {
		t.Fatal(err)
	}
	for _, se := range h.sender.Sent() {
		if se.target.ID == settled && se.ev.Type == "subscription.canceled" && se.ev.APIVersion != "2026-01-01" {
			t.Errorf("after update: api_version %q", se.ev.APIVersion)
		}
	}
	if got := h.sender.to(settled); !slices.Equal(got, []string{"invoice.settled", "subscription.canceled"}) {
		t.Errorf("after update: %v", got)
	}
}

func ptr[T any](v T) *T { return &v }

func TestInvoiceSettlesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	inv := h.must(t, 201, h.test, "POST", "/invoices", map[string]any{"amount": 150000, "currency": "BTC", "order_id": "o9"})
	id := inv["id"].(string)
	if inv["status"] != "new" || inv["order_id"] != "o9" || id[:4] != "inv_" {
		t.Fatalf("invoice %v", inv)
	}
	if len(h.sender.Sent()) != 0 {
		t.Errorf("creating an invoice sent an event")
	}
	if r := h.do(t, h.test, "POST", "/invoices/"+id+"/settle", map[string]any{}); r.status != 400 {
		t.Errorf("settle without chain_ref: %d", r.status)
	}
	s := h.must(t, 200, h.test, "POST", "/invoices/"+id+"/settle", map[string]any{"chain_ref": "0xabc"})
	if s["status"] != "settled" || s["chain_ref"] != "0xabc" {
		t.Errorf("settled: %v", s)
	}
	r := h.do(t, h.test, "POST", "/invoices/"+id+"/settle", map[string]any{"chain_ref": "0xdef"})
	if r.status != 409 || r.errType(t) != "conflict" {
		t.Errorf("second settle: %d %s", r.status, r.body)
	}
	if g := h.must(t, 200, h.test, "GET", "/invoices/"+id, nil); g["chain_ref"] != "0xabc" || g["status"] != "settled" {
		t.Errorf("GET after second settle: %v", g)
	}
	if got := h.sender.to(ep); !slices.Equal(got, []string{"invoice.settled"}) {
		t.Errorf("sent %v", got)
	}
	d := h.sender.Sent()[0].ev.Data
	if d["id"] != id || d["order_id"] != "o9" || d["chain_ref"] != "0xabc" || d["status"] != "settled" || d["amount"] != int64(150000) || d["currency"] != "BTC" {
		t.Errorf("invoice.settled data %v", d)
	}
	// A chain reference may be reused on another invoice (a scenario does).
	other, _ := h.p.CreateInvoice(EnvTest, 1, "BTC", "o10")
	if _, err := h.p.SettleInvoice(EnvTest, other.ID, "0xabc"); err != nil {
		t.Errorf("reused chain_ref: %v", err)
	}
	if _, err := h.p.SettleInvoice(EnvTest, other.ID, "0xabc"); !errors.Is(err, ErrConflict) {
		t.Errorf("Go settle twice: %v", err)
	}
}

func TestSubscriptionLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	start := h.clock.Now()
	s := h.must(t, 201, h.test, "POST", "/subscriptions", map[string]any{"customer": "cus_1", "plan": "basic"})
	id := s["id"].(string)
	if s["status"] != "active" || s["plan"] != "basic" || s["customer"] != "cus_1" {
		t.Fatalf("created %v", s)
	}
	for _, step := range []struct {
		path   string
		body   any
		status int
		plan   string
		state  string
		period time.Duration // current_period_end - start
	}{
		{"", map[string]any{"plan": "pro"}, 200, "pro", "active", SubscriptionPeriod},
		{"/renew", nil, 200, "pro", "active", 2 * SubscriptionPeriod},
		{"/cancel", nil, 200, "pro", "canceled", 2 * SubscriptionPeriod},
		{"/renew", nil, 409, "", "", 0},
		{"", map[string]any{"plan": "basic"}, 409, "", "", 0},
		{"/cancel", nil, 409, "", "", 0},
		{"/end", nil, 200, "pro", "ended", 7 * time.Hour / 4}, // ends now, the 7th quarter hour
		{"/end", nil, 409, "", "", 0},
	} {
		h.clock.Add(time.Hour / 4)
		r := h.do(t, h.test, "POST", "/subscriptions/"+id+step.path, step.body)
		if r.status != step.status {
			t.Fatalf("POST %s: %d %s, want %d", step.path, r.status, r.body, step.status)
		}
		if step.status != 200 {
			continue
		}
		m := r.json(t)
		end, _ := time.Parse(time.RFC3339Nano, m["current_period_end"].(string))
		if m["plan"] != step.plan || m["status"] != step.state || end.Sub(start) != step.period || m["updated_at"] != h.clock.Now().Format(time.RFC3339Nano) {
			t.Errorf("POST %s: %v", step.path, m)
		}
	}
	want := []string{"subscription.created", "subscription.updated", "subscription.renewed", "subscription.canceled", "subscription.ended"}
	if got := h.sender.to(ep); !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
	if got := h.eventTypes(t, EnvTest); !slices.Equal(got, want) {
		t.Errorf("log %v, want %v", got, want)
	}
	sent := h.sender.Sent()
	if d := sent[1].ev.Data; d["plan"] != "pro" || d["status"] != "active" || d["customer"] != "cus_1" || d["id"] != id {
		t.Errorf("subscription.updated data %v", d)
	}
	if d := sent[4].ev.Data; d["status"] != "ended" {
		t.Errorf("subscription.ended data %v", d)
	}
	if g := h.must(t, 200, h.test, "GET", "/subscriptions/"+id, nil); g["status"] != "ended" {
		t.Errorf("GET %v", g)
	}
}

func TestCheckoutComplete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	c := h.must(t, 201, h.test, "POST", "/checkouts", map[string]any{"amount": 4999, "currency": "eur", "metadata": map[string]string{"order_id": "ord_42"}})
	id := c["id"].(string)
	if c["status"] != "open" || c["metadata"].(map[string]any)["order_id"] != "ord_42" || c["amount"] != 4999.0 {
		t.Fatalf("checkout %v", c)
	}
	if len(h.sender.Sent()) != 0 {
		t.Errorf("an open checkout sent an event")
	}
	pay := h.must(t, 200, h.test, "POST", "/checkouts/"+id+"/complete", nil)
	payID := pay["id"].(string)
	if pay["status"] != "succeeded" || pay["order_id"] != "ord_42" || pay["checkout_id"] != id || pay["amount"] != 4999.0 || pay["currency"] != "eur" || pay["refunded_amount"] != 0.0 {
		t.Errorf("payment %v", pay)
	}
	if r := h.do(t, h.test, "POST", "/checkouts/"+id+"/complete", nil); r.status != 409 {
		t.Errorf("second complete: %d %s", r.status, r.body)
	}
	if g := h.must(t, 200, h.test, "GET", "/checkouts/"+id, nil); g["status"] != "completed" || g["payment_id"] != payID {
		t.Errorf("GET checkout %v", g)
	}

	sent := h.sender.Sent()
	if got := h.sender.to(ep); !slices.Equal(got, []string{"checkout.completed", "payment.succeeded"}) {
		t.Fatalf("sent %v", got)
	}
	cd, pd := sent[0].ev.Data, sent[1].ev.Data
	if meta, _ := cd["metadata"].(map[string]any); meta["order_id"] != "ord_42" || cd["id"] != id || cd["payment_id"] != payID || cd["status"] != "completed" || cd["amount"] != int64(4999) {
		t.Errorf("checkout.completed data %v", cd)
	}
	if pd["order_id"] != "ord_42" || pd["id"] != payID || pd["checkout_id"] != id || pd["status"] != "succeeded" || sent[1].ev.ObjectID != payID {
		t.Errorf("payment.succeeded data %v", pd)
	}
	if sent[0].ev.Seq != 1 || sent[1].ev.Seq != 2 || sent[0].ev.Environment != "test" || sent[0].ev.ID[:4] != "evt_" {
		t.Errorf("events %+v %+v", sent[0].ev, sent[1].ev)
	}

	st, err := h.p.Snapshot(EnvTest)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Checkouts) != 1 || len(st.Payments) != 1 || st.Payments[0].OrderID != "ord_42" || len(st.Events) != 2 || len(st.Endpoints) != 1 {
		t.Errorf("snapshot %+v", st)
	}
	if _, err := json.Marshal(st); err != nil {
		t.Errorf("snapshot does not marshal: %v", err)
	}
}

func TestDeliveriesAndResend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	liveEp := h.endpoint(t, h.live, "*")
	h.sender.mu.Lock()
	h.sender.logs[ep] = []deliver.Attempt{{DeliveryID: "dlv_1", EventID: "evt_1", EventType: "checkout.completed", N: 1, Status: 500}}
	h.sender.logs[liveEp] = []deliver.Attempt{{DeliveryID: "dlv_live", N: 1, Status: 200}}
	h.sender.failing["dlv_gone"] = true
	h.sender.logs[ep] = append(h.sender.logs[ep], deliver.Attempt{DeliveryID: "dlv_gone", N: 1})
	h.sender.mu.Unlock()

	log := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+ep+"/deliveries", nil)["data"].([]any)
	if len(log) != 2 || log[0].(map[string]any)["delivery_id"] != "dlv_1" || log[0].(map[string]any)["status"] != 500.0 {
		t.Errorf("log %v", log)
	}
	other := h.endpoint(t, h.test, "*")
	if l := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+other+"/deliveries", nil)["data"].([]any); len(l) != 0 {
		t.Errorf("empty log %v", l)
	}
	if r := h.do(t, h.test, "GET", "/webhook_endpoints/"+liveEp+"/deliveries", nil); r.status != 404 {
		t.Errorf("other env's log: %d", r.status)
	}

	h.must(t, 202, h.test, "POST", "/deliveries/dlv_1/resend", nil)
	for _, tc := range []struct {
		id     string
		status int
	}{{"dlv_nope", 404}, {"dlv_live", 404}, {"dlv_gone", 409}} {
		if r := h.do(t, h.test, "POST", "/deliveries/"+tc.id+"/resend", nil); r.status != tc.status {
			t.Errorf("resend %s: %d %s, want %d", tc.id, r.status, r.body, tc.status)
		}
	}
	h.sender.mu.Lock()
	defer h.sender.mu.Unlock()
	if !slices.Equal(h.sender.resent, []string{"dlv_1"}) {
		t.Errorf("resent %v", h.sender.resent)
	}
}

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

// A chargeback the merchant wins: the payment returns to its status before
// the dispute, and payment.chargeback_won carries the chargeback's dispute
// id. Only a charged back payment can win, and a payment is disputed once.
func TestWinChargeback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "payment.charged_back", "payment.chargeback_won")
	full := h.payment(t, 1000, "o1")
	part := h.payment(t, 2000, "o2")
	if r := h.do(t, h.test, "POST", "/payments/"+full+"/chargeback/win", nil); r.status != 409 {
		t.Errorf("win of a payment not charged back: %d", r.status)
	}
	if r := h.do(t, h.test, "POST", "/payments/pay_nope/chargeback/win", nil); r.status != 404 {
		t.Errorf("win of an unknown payment: %d", r.status)
	}
	h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": part, "amount": 500})

	for _, c := range []struct{ pay, status string }{{full, "succeeded"}, {part, "partially_refunded"}} {
		cb := h.must(t, 200, h.test, "POST", "/payments/"+c.pay+"/chargeback", nil)
		if cb["status"] != "charged_back" || cb["dispute_id"] != "dp_"+c.pay || cb["charged_back_at"] == nil {
			t.Errorf("chargeback: %v", cb)
		}
		won := h.must(t, 200, h.test, "POST", "/payments/"+c.pay+"/chargeback/win", nil)
		if won["status"] != c.status || won["dispute_id"] != "dp_"+c.pay || won["charged_back_at"] != cb["charged_back_at"] {
			t.Errorf("won: %v, want status %s", won, c.status)
		}
		if p := h.must(t, 200, h.test, "GET", "/payments/"+c.pay, nil); p["status"] != c.status {
			t.Errorf("payment after the win: %v", p)
		}
		if r := h.do(t, h.test, "POST", "/payments/"+c.pay+"/chargeback/win", nil); r.status != 409 {
			t.Errorf("second win: %d", r.status)
		}
		if r := h.do(t, h.test, "POST", "/payments/"+c.pay+"/chargeback", nil); r.status != 409 {
			t.Errorf("second chargeback after a win: %d", r.status)
		}
	}
	// Refunds go on after a won dispute.
	h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": part, "amount": 1500})
	if p := h.must(t, 200, h.test, "GET", "/payments/"+part, nil); p["status"] != "refunded" || p["refunded_amount"] != 2000.0 {
		t.Errorf("refund after the win: %v", p)
	}

	want := []string{"payment.charged_back", "payment.chargeback_won", "payment.charged_back", "payment.chargeback_won"}
	if got := h.sender.to(ep); !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	var disputes []any
	for _, s := range h.sender.Sent() {
		if s.target.ID == ep && s.ev.Type == "payment.chargeback_won" {
			disputes = append(disputes, s.ev.Data["dispute_id"], s.ev.Data["status"], s.ev.ObjectID)
		}
	}
	if w := []any{"dp_" + full, "succeeded", full, "dp_" + part, "partially_refunded", part}; !slices.Equal(disputes, w) {
		t.Errorf("won events %v, want %v", disputes, w)
	}
}
