// Package sim is payhook's simulated payment provider: its resources
// (webhook endpoints, checkouts, payments, refunds, subscriptions, crypto
// invoices), the events their changes create, and the HTTP API that drives
// them. Deliveries go through a Sender (the deliver package's dispatcher);
// a flavour (the flavour package) makes it look like a real provider.
package sim

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// Environments. Each is its own world: endpoints, resources and events.
const (
	EnvTest = "test"
	EnvLive = "live"
)

// Defaults of Config.
const (
	DefaultAPIVersion = "2026-01-01"
	DefaultGrace      = 24 * time.Hour
	// SubscriptionPeriod is the length of a subscription period: creating
	// a subscription starts one, renewing it adds one.
	SubscriptionPeriod = 30 * 24 * time.Hour
)

// EventTypes are the neutral event types an endpoint can subscribe to
// (besides "*", every type).
var EventTypes = []string{
	"checkout.completed",
	"payment.succeeded",
	"payment.refunded",
	"payment.charged_back",
	"payment.chargeback_won",
	"refund.failed",
	"subscription.created",
	"subscription.updated",
	"subscription.renewed",
	"subscription.canceled",
	"subscription.ended",
	"invoice.settled",
	"webhook_endpoint.test",
}

// Sender delivers events to endpoints; *deliver.Dispatcher satisfies it.
type Sender interface {
	Send(t deliver.Target, ev flavour.Event)
	Log(endpointID string) []deliver.Attempt
	Resend(deliveryID string) error
}

// Config configures a Provider.
type Config struct {
	// Flavour renders, signs and lists events (required).
	Flavour flavour.Flavour
	// Sender delivers events (required).
	Sender Sender
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Seed seeds the ids (and generated API keys), so runs are
	// reproducible.
	Seed int64
	// APIVersion is the provider's API version: the default of new
	// endpoints and the version of events.list; default "2026-01-01".
	APIVersion string
	// Grace is how long a rotated-out secret keeps signing; 0 means 24h,
	// a negative value none.
	Grace time.Duration
	// TestKey and LiveKey are the API keys; generated ("sk_test_..." and
	// "sk_live_...") when empty.
	TestKey, LiveKey string
}

// Error is an API error; Type is one of "invalid_request",
// "authentication", "not_found", "conflict". errors.Is matches it against
// ErrInvalid, ErrAuth, ErrNotFound and ErrConflict by Type.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Is reports whether target is an *Error of the same Type.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Type == e.Type
}

// Sentinel errors, for errors.Is.
var (
	ErrInvalid  = &Error{Type: "invalid_request", Message: "invalid request"}
	ErrAuth     = &Error{Type: "authentication", Message: "invalid API key"}
	ErrNotFound = &Error{Type: "not_found", Message: "not found"}
	ErrConflict = &Error{Type: "conflict", Message: "conflict"}
)

func invalid(format string, a ...any) error {
	return &Error{Type: "invalid_request", Message: fmt.Sprintf(format, a...)}
}

func notFound(kind, id string) error {
	return &Error{Type: "not_found", Message: fmt.Sprintf("no such %s: %q", kind, id)}
}

func conflict(format string, a ...any) error {
	return &Error{Type: "conflict", Message: fmt.Sprintf(format, a...)}
}

// Endpoint is a webhook endpoint. Its secret is never part of it: it is
// shown once, by CreateEndpoint and RotateSecret.
type Endpoint struct {
	ID          string    `json:"id"`
	Object      string    `json:"object"`
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	APIVersion  string    `json:"api_version"`
	Environment string    `json:"environment"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// EndpointUpdate changes an endpoint; nil fields stay as they are.
type EndpointUpdate struct {
	URL        *string   `json:"url,omitempty"`
	Events     *[]string `json:"events,omitempty"`
	APIVersion *string   `json:"api_version,omitempty"`
}

// Checkout is a checkout session: open until completed, which creates
// its payment.
type Checkout struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	Amount    int64             `json:"amount"`
	Currency  string            `json:"currency"`
	Status    string            `json:"status"` // open | completed
	Metadata  map[string]string `json:"metadata"`
	PaymentID string            `json:"payment_id,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// Payment is the money a completed checkout collected.
type Payment struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"` // succeeded | partially_refunded | refunded | charged_back
	RefundedAmount int64  `json:"refunded_amount"`
	OrderID        string `json:"order_id"`
	CheckoutID     string `json:"checkout_id"`
	// DisputeID is the id of the payment's chargeback ("dp_" + the
	// payment id), set when it is charged back; the event of a won
	// dispute carries the same id. A payment is disputed at most once.
	DisputeID string `json:"dispute_id,omitempty"`
	// ChargedBackAt is when it was charged back.
	ChargedBackAt time.Time `json:"charged_back_at,omitzero"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Refund is a refund of (part of) a payment.
type Refund struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	PaymentID string    `json:"payment_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"` // succeeded | failed
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Subscription is a customer's subscription to a plan.
type Subscription struct {
	ID               string    `json:"id"`
	Object           string    `json:"object"`
	Customer         string    `json:"customer"`
	Plan             string    `json:"plan"`
	Status           string    `json:"status"` // active | canceled | ended
	CurrentPeriodEnd time.Time `json:"current_period_end"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// Invoice is a crypto invoice; settling it is final.
type Invoice struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"` // new | settled
	OrderID   string    `json:"order_id"`
	ChainRef  string    `json:"chain_ref,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// State is everything of one environment, each list in creation order.
type State struct {
	Environment   string          `json:"environment"`
	Endpoints     []Endpoint      `json:"endpoints"`
	Checkouts     []Checkout      `json:"checkouts"`
	Payments      []Payment       `json:"payments"`
	Refunds       []Refund        `json:"refunds"`
	Subscriptions []Subscription  `json:"subscriptions"`
	Invoices      []Invoice       `json:"invoices"`
	Events        []flavour.Event `json:"events"`
}

// Provider is the simulated payment provider.
type Provider struct {
	cfg  Config
	keys map[string]string // API key -> env

	mu   sync.Mutex
	rng  *rand.Rand
	envs map[string]*world
}

type endpointState struct {
	Endpoint
	secret    string
	previous  string
	rotatedAt time.Time
	deleted   bool
}

type idemRecord struct {
	paymentID string
	amount    int64
	fail      bool
	refundID  string
}

type world struct {
	endpoints     map[string]*endpointState
	endpointOrder []string
	checkouts     map[string]*Checkout
	checkoutOrder []string
	payments      map[string]*Payment
	paymentOrder  []string
	refunds       map[string]*Refund
	refundOrder   []string
	subs          map[string]*Subscription
	subOrder      []string
	invoices      map[string]*Invoice
	invoiceOrder  []string
	idem          map[string]idemRecord
	events        []flavour.Event
}

func newWorld() *world {
	return &world{
		endpoints: map[string]*endpointState{},
		checkouts: map[string]*Checkout{},
		payments:  map[string]*Payment{},
		refunds:   map[string]*Refund{},
		subs:      map[string]*Subscription{},
		invoices:  map[string]*Invoice{},
		idem:      map[string]idemRecord{},
	}
}

// New returns a provider with empty test and live environments.
func New(cfg Config) (*Provider, error) {
	if cfg.Flavour == nil {
		return nil, errors.New("sim: Config.Flavour is required")
	}
	if cfg.Sender == nil {
		return nil, errors.New("sim: Config.Sender is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAPIVersion
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	seed := uint64(cfg.Seed)
	// Keys come from their own generator so that giving them or not does
	// not change the ids of a run.
	keyRNG := rand.New(rand.NewPCG(seed, 0x6b657973))
	if cfg.TestKey == "" {
		cfg.TestKey = "sk_test_" + alnum(keyRNG, 24)
	}
	if cfg.LiveKey == "" {
		cfg.LiveKey = "sk_live_" + alnum(keyRNG, 24)
	}
	if cfg.TestKey == cfg.LiveKey {
		return nil, errors.New("sim: the test and live keys must differ")
	}
	return &Provider{
		cfg:  cfg,
		keys: map[string]string{cfg.TestKey: EnvTest, cfg.LiveKey: EnvLive},
		rng:  rand.New(rand.NewPCG(seed, 0x70617968)),
		envs: map[string]*world{EnvTest: newWorld(), EnvLive: newWorld()},
	}, nil
}

// Keys returns the test and live API keys.
func (p *Provider) Keys() (test, live string) { return p.cfg.TestKey, p.cfg.LiveKey }

// Flavour returns the provider's flavour.
func (p *Provider) Flavour() flavour.Flavour { return p.cfg.Flavour }

// APIVersion returns the provider's API version.
func (p *Provider) APIVersion() string { return p.cfg.APIVersion }

// EnvForKey returns the environment an API key selects, or an
// authentication error.
func (p *Provider) EnvForKey(key string) (string, error) {
	for k, env := range p.keys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			return env, nil
		}
	}
	return "", &Error{Type: "authentication", Message: "invalid or missing API key"}
}

const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func alnum(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// newID returns prefix + 24 random characters; p.mu must be held.
func (p *Provider) newID(prefix string) string { return prefix + alnum(p.rng, 24) }

func (p *Provider) now() time.Time { return p.cfg.Now().UTC().Round(0) }

// world returns env's world; p.mu must be held.
func (p *Provider) world(env string) (*world, error) {
	w, ok := p.envs[env]
	if !ok {
		return nil, invalid("unknown environment %q (test or live)", env)
	}
	return w, nil
}

// delivery is one event to hand to the Sender once p.mu is released.
type delivery struct {
	target deliver.Target
	ev     flavour.Event
}

// send hands deliveries to the Sender; p.mu must not be held.
func (p *Provider) send(ds []delivery) {
	for _, d := range ds {
		p.cfg.Sender.Send(d.target, d.ev)
	}
}

// emit records an event in w's log and returns its deliveries to the
// endpoints subscribed to it (only to only, when set). p.mu must be held.
func (p *Provider) emit(env string, w *world, typ, objectID string, data map[string]any, only string) []delivery {
	ev := flavour.Event{
		ID:          p.newID("evt_"),
		Type:        typ,
		CreatedAt:   p.now(),
		Environment: env,
		APIVersion:  p.cfg.APIVersion,
		ObjectID:    objectID,
		Data:        data,
		Seq:         int64(len(w.events)) + 1,
	}
	w.events = append(w.events, ev)
	var ds []delivery
	for _, id := range w.endpointOrder {
		e := w.endpoints[id]
		if e.deleted || (only != "" && id != only) {
			continue
		}
		if only == "" && !slices.Contains(e.Events, typ) && !slices.Contains(e.Events, "*") {
			continue
		}
		out := copyEvent(ev)
		out.APIVersion = e.APIVersion
		ds = append(ds, delivery{target: p.target(e), ev: out})
	}
	return ds
}

// target is the deliver.Target of e; its Secrets reads the clock and the
// endpoint's secrets at call time.
func (p *Provider) target(e *endpointState) deliver.Target {
	return deliver.Target{
		ID:      e.ID,
		URL:     e.URL,
		Flavour: p.cfg.Flavour,
		Secrets: func() []string {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.secrets(e)
		},
	}
}

// secrets returns e's signing secrets now; p.mu must be held.
func (p *Provider) secrets(e *endpointState) []string {
	s := []string{e.secret}
	if e.previous != "" && p.cfg.Grace > 0 && p.now().Before(e.rotatedAt.Add(p.cfg.Grace)) {
		s = append(s, e.previous)
	}
	return s
}

// ---- webhook endpoints ----

func (p *Provider) checkEvents(events []string) error {
	if len(events) == 0 {
		return invalid(`events is required (["*"] for every type)`)
	}
	for _, t := range events {
		if t != "*" && !slices.Contains(EventTypes, t) {
			return invalid("unknown event type %q", t)
		}
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("url must be an absolute http(s) URL, got %q", raw)
	}
	return nil
}

// CreateEndpoint creates a webhook endpoint in env and returns it with its
// signing secret, which is never shown again. apiVersion "" means the
// provider's version.
func (p *Provider) CreateEndpoint(env, rawURL string, events []string, apiVersion string) (Endpoint, string, error) {
	return p.createEndpoint(env, rawURL, events, apiVersion, p.cfg.Flavour.NewSecret())
}

// CreateEndpointWithSecret is CreateEndpoint with a signing secret chosen
// by the caller: the one a receiver under test already has configured.
// Real providers make their own; the simulator lets scenarios adopt one.
func (p *Provider) CreateEndpointWithSecret(env, rawURL string, events []string, apiVersion, secret string) (Endpoint, error) {
	if secret == "" {
		return Endpoint{}, invalid("empty signing secret")
	}
	e, _, err := p.createEndpoint(env, rawURL, events, apiVersion, secret)
	return e, err
}

func (p *Provider) createEndpoint(env, rawURL string, events []string, apiVersion, secret string) (Endpoint, string, error) {
	if err := checkURL(rawURL); err != nil {
		return Endpoint{}, "", err
	}
	if err := p.checkEvents(events); err != nil {
		return Endpoint{}, "", err
	}
	if apiVersion == "" {
		apiVersion = p.cfg.APIVersion
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.world(env)
	if err != nil {
		return Endpoint{}, "", err
	}
	now := p.now()
	e := &endpointState{
		Endpoint: Endpoint{
			ID: p.newID("we_"), Object: "webhook_endpoint", URL: rawURL,
			Events: slices.Clone(events), APIVersion: apiVersion, Environment: env,
			CreatedAt: now, UpdatedAt: now,
		},
		secret: secret,
	}
	w.endpoints[e.ID] = e
	w.endpointOrder = append(w.endpointOrder, e.ID)
	return e.public(), e.secret, nil
}

func (e *endpointState) public() Endpoint {
	out := e.Endpoint
	out.Events = slices.Clone(e.Events)
	return out
}

// endpoint returns env's live endpoint id; p.mu must be held.
func (p *Provider) endpoint(env, id string) (*endpointState, error) {
	w, err := p.world(env)
	if err != nil {
		return nil, err
	}
	e, ok := w.endpoints[id]
	if !ok || e.deleted {
		return nil, notFound("webhook endpoint", id)
	}
	return e, nil
}

// GetEndpoint returns an endpoint of env (without its secret).
func (p *Provider) GetEndpoint(env, id string) (Endpoint, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.endpoint(env, id)
	if err != nil {
		return Endpoint{}, err
	}
	return e.public(), nil
}

// Endpoints lists env's endpoints in creation order (without secrets).
func (p *Provider) Endpoints(env string) ([]Endpoint, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.world(env)
	if err != nil {
		return nil, err
	}
	out := []Endpoint{}
	for _, id := range w.endpointOrder {
		if e := w.endpoints[id]; !e.deleted {
			out = append(out, e.public())
		}
	}
	return out, nil
}

// UpdateEndpoint changes an endpoint's URL, events or API version. Every
// delivery created afterwards, retries included, uses the new values.
func (p *Provider) UpdateEndpoint(env, id string, u EndpointUpdate) (Endpoint, error) {
	if u.URL != nil {
		if err := checkURL(*u.URL); err != nil {
			return Endpoint{}, err
		}
	}
	if u.Events != nil {
		if err := p.checkEvents(*u.Events); err != nil {
			return Endpoint{}, err
		}
	}
	if u.APIVersion != nil && *u.APIVersion == "" {
		return Endpoint{}, invalid("api_version must not be empty")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.endpoint(env, id)
	if err != nil {
		return Endpoint{}, err
	}
	if u.URL != nil {
		e.URL = *u.URL
	}
	if u.Events != nil {
		e.Events = slices.Clone(*u.Events)
	}
	if u.APIVersion != nil {
		e.APIVersion = *u.APIVersion
	}
	e.UpdatedAt = p.now()
	return e.public(), nil
}

// DeleteEndpoint deletes an endpoint: no new event goes to it.
func (p *Provider) DeleteEndpoint(env, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.endpoint(env, id)
	if err != nil {
		return err
	}
	e.deleted = true
	return nil
}

// RotateSecret gives an endpoint a new secret and returns it (the only
// time it is shown). The previous secret keeps signing, next to the new
// one, for Config.Grace.
func (p *Provider) RotateSecret(env, id string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.endpoint(env, id)
	if err != nil {
		return "", err
	}
	e.previous, e.secret = e.secret, p.cfg.Flavour.NewSecret()
	e.rotatedAt = p.now()
	e.UpdatedAt = e.rotatedAt
	return e.secret, nil
}

// Target returns the delivery target of an endpoint, as Send receives it.
func (p *Provider) Target(env, id string) (deliver.Target, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.endpoint(env, id)
	if err != nil {
		return deliver.Target{}, err
	}
	return p.target(e), nil
}

// SendTest creates a webhook_endpoint.test event and sends it to that
// endpoint only.
func (p *Provider) SendTest(env, endpointID string) (flavour.Event, error) {
	p.mu.Lock()
	e, err := p.endpoint(env, endpointID)
	if err != nil {
		p.mu.Unlock()
		return flavour.Event{}, err
	}
	w := p.envs[env]
	ds := p.emit(env, w, "webhook_endpoint.test", e.ID, map[string]any{"endpoint_id": e.ID}, e.ID)
	ev := copyEvent(w.events[len(w.events)-1])
	p.mu.Unlock()
	p.send(ds)
	return ev, nil
}

// Deliveries returns an endpoint's delivery log (Sender.Log).
func (p *Provider) Deliveries(env, endpointID string) ([]deliver.Attempt, error) {
	if _, err := p.GetEndpoint(env, endpointID); err != nil {
		return nil, err
	}
	log := p.cfg.Sender.Log(endpointID)
	if log == nil {
		log = []deliver.Attempt{}
	}
	return log, nil
}

// ResendDelivery sends a delivery of one of env's endpoints once more
// (Sender.Resend).
func (p *Provider) ResendDelivery(env, deliveryID string) error {
	eps, err := p.Endpoints(env)
	if err != nil {
		return err
	}
	found := false
	for _, e := range eps {
		for _, a := range p.cfg.Sender.Log(e.ID) {
			if a.DeliveryID == deliveryID {
				found = true
				break
			}
		}
		if found {
			break
		}
	}
	if !found {
		return notFound("delivery", deliveryID)
	}
	if err := p.cfg.Sender.Resend(deliveryID); err != nil {
		return conflict("cannot resend %s: %v", deliveryID, err)
	}
	return nil
}

// ---- checkouts and payments ----

func checkMoney(amount int64, currency string) error {
	if amount <= 0 {
		return invalid("amount must be a positive integer of minor units, got %d", amount)
	}
	if currency == "" {
		return invalid("currency is required")
	}
	return nil
}

// CreateCheckout opens a checkout for an order.
func (p *Provider) CreateCheckout(env string, amount int64, currency, orderID string) (Checkout, error) {
	if err := checkMoney(amount, currency); err != nil {
		return Checkout{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.world(env)
	if err != nil {
		return Checkout{}, err
	}
	now := p.now()
	c := &Checkout{
		ID: p.newID("chk_"), Object: "checkout", Amount: amount, Currency: currency,
		Status: "open", Metadata: map[string]string{"order_id": orderID},
		CreatedAt: now, UpdatedAt: now,
	}
	w.checkouts[c.ID] = c
	w.checkoutOrder = append(w.checkoutOrder, c.ID)
	return c.clone(), nil
}

func (c *Checkout) clone() Checkout {
	out := *c
	out.Metadata = maps.Clone(c.Metadata)
	return out
}

// GetCheckout returns a checkout of env.
func (p *Provider) GetCheckout(env, id string) (Checkout, error) {
	return lookup(p, env, "checkout", id, func(w *world) map[string]*Checkout { return w.checkouts }, (*Checkout).clone)
}

// CompleteCheckout completes an open checkout: it creates the payment and
// emits checkout.completed, then payment.succeeded.
func (p *Provider) CompleteCheckout(env, id string) (Payment, error) {
	p.mu.Lock()
	w, err := p.world(env)
	if err != nil {
		p.mu.Unlock()
		return Payment{}, err
	}
	c, ok := w.checkouts[id]
	if !ok {
		p.mu.Unlock()
		return Payment{}, notFound("checkout", id)
	}
	if c.Status != "open" {
		p.mu.Unlock()
		return Payment{}, conflict("checkout %s is already %s", id, c.Status)
	}
	now := p.now()
	pay := &Payment{
		ID: p.newID("pay_"), Object: "payment", Amount: c.Amount, Currency: c.Currency,
		Status: "succeeded", OrderID: c.Metadata["order_id"], CheckoutID: c.ID,
		CreatedAt: now, UpdatedAt: now,
	}
	w.payments[pay.ID] = pay
	w.paymentOrder = append(w.paymentOrder, pay.ID)
	c.Status, c.PaymentID, c.UpdatedAt = "completed", pay.ID, now
	ds := p.emit(env, w, "checkout.completed", c.ID, c.data(), "")
	ds = append(ds, p.emit(env, w, "payment.succeeded", pay.ID, pay.data(), "")...)
	out := *pay
	p.mu.Unlock()
	p.send(ds)
	return out, nil
}

// lookup returns a copy of env's resource of the kind with the id, or
// an error matching ErrNotFound.
func lookup[T any](p *Provider, env, kind, id string, of func(*world) map[string]*T, copyOf func(*T) T) (T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var zero T
	w, err := p.world(env)
	if err != nil {
		return zero, err
	}
	v, ok := of(w)[id]
	if !ok {
		return zero, notFound(kind, id)
	}
	return copyOf(v), nil
}

// GetPayment returns a payment of env.
func (p *Provider) GetPayment(env, id string) (Payment, error) {
	return lookup(p, env, "payment", id, func(w *world) map[string]*Payment { return w.payments }, func(v *Payment) Payment { return *v })
}

// Refund refunds amount of a payment. With an idempotencyKey, the same key
// returns the same refund and never refunds twice; the same key with other
// parameters is a conflict. Refunding more than what is left is invalid
// and changes nothing. fail makes the refund fail: status failed, a
// refund.failed event, the payment unchanged.
func (p *Provider) Refund(env, paymentID string, amount int64, idempotencyKey string, fail bool) (Refund, error) {
	r, _, err := p.refund(env, paymentID, amount, idempotencyKey, fail)
	return r, err
}

// refund is Refund that also says whether the key replayed an earlier one.
func (p *Provider) refund(env, paymentID string, amount int64, key string, fail bool) (Refund, bool, error) {
	p.mu.Lock()
	w, err := p.world(env)
	if err != nil {
		p.mu.Unlock()
		return Refund{}, false, err
	}
	if key != "" {
		if rec, ok := w.idem[key]; ok {
			defer p.mu.Unlock()
			if rec.paymentID != paymentID || rec.amount != amount || rec.fail != fail {
				return Refund{}, false, conflict("Idempotency-Key %q was already used with other parameters", key)
			}
			return *w.refunds[rec.refundID], true, nil
		}
	}
	r, ds, err := p.newRefund(env, w, paymentID, amount, fail)
	if err != nil {
		p.mu.Unlock()
		return Refund{}, false, err
	}
	if key != "" {
		w.idem[key] = idemRecord{paymentID: paymentID, amount: amount, fail: fail, refundID: r.ID}
	}
	p.mu.Unlock()
	p.send(ds)
	return r, false, nil
}

// newRefund creates a refund; p.mu must be held.
func (p *Provider) newRefund(env string, w *world, paymentID string, amount int64, fail bool) (Refund, []delivery, error) {
	if paymentID == "" {
		return Refund{}, nil, invalid("payment_id is required")
	}
	pay, ok := w.payments[paymentID]
	if !ok {
		return Refund{}, nil, notFound("payment", paymentID)
	}
	if amount <= 0 {
		return Refund{}, nil, invalid("amount must be a positive integer of minor units, got %d", amount)
	}
	if pay.Status == "charged_back" {
		return Refund{}, nil, conflict("payment %s is charged back", paymentID)
	}
	if left := pay.Amount - pay.RefundedAmount; amount > left {
		return Refund{}, nil, invalid("amount %d is more than the %d left to refund on payment %s", amount, left, paymentID)
	}
	now := p.now()
	r := &Refund{
		ID: p.newID("re_"), Object: "refund", PaymentID: paymentID, Amount: amount,
		Currency: pay.Currency, Status: "succeeded", CreatedAt: now,
	}
	w.refunds[r.ID] = r
	w.refundOrder = append(w.refundOrder, r.ID)
	var ds []delivery
	if fail {
		r.Status, r.Reason = "failed", "simulated_failure"
		ds = p.emit(env, w, "refund.failed", r.ID, r.data(), "")
	} else {
		pay.RefundedAmount += amount
		pay.Status = "partially_refunded"
		if pay.RefundedAmount == pay.Amount {
			pay.Status = "refunded"
		}
		pay.UpdatedAt = now
		data := pay.data()
		data["refund"] = r.data()
		ds = p.emit(env, w, "payment.refunded", pay.ID, data, "")
	}
	return *r, ds, nil
}

// GetRefund returns a refund of env.
func (p *Provider) GetRefund(env, id string) (Refund, error) {
	return lookup(p, env, "refund", id, func(w *world) map[string]*Refund { return w.refunds }, func(v *Refund) Refund { return *v })
}

// Chargeback charges a payment back (payment.charged_back), opening its
// dispute DisputeID ("dp_" + the payment id). A payment already charged
// back, fully refunded or whose dispute was won is a conflict: a payment
// is disputed at most once.
func (p *Provider) Chargeback(env, paymentID string) (Payment, error) {
	p.mu.Lock()
	w, err := p.world(env)
	if err != nil {
		p.mu.Unlock()
		return Payment{}, err
	}
	pay, ok := w.payments[paymentID]
	if !ok {
		p.mu.Unlock()
		return Payment{}, notFound("payment", paymentID)
	}
	if pay.Status == "charged_back" || pay.Status == "refunded" {
		p.mu.Unlock()
		return Payment{}, conflict("payment %s is %s", paymentID, pay.Status)
	}
	if pay.DisputeID != "" {
		p.mu.Unlock()
		return Payment{}, conflict("payment %s was already disputed (%s, won)", paymentID, pay.DisputeID)
	}
	now := p.now()
	pay.Status, pay.UpdatedAt = "charged_back", now
	pay.DisputeID, pay.ChargedBackAt = "dp_"+pay.ID, now
	ds := p.emit(env, w, "payment.charged_back", pay.ID, pay.data(), "")
	out := *pay
	p.mu.Unlock()
	p.send(ds)
	return out, nil
}

// WinChargeback closes a charged back payment's dispute in the merchant's
// favour (payment.chargeback_won, data the payment with its dispute_id):
// the money comes back and the payment returns to the status it had
// before, succeeded or partially_refunded by its refunded amount. A
// payment that is not charged back is a conflict.
func (p *Provider) WinChargeback(env, paymentID string) (Payment, error) {
	p.mu.Lock()
	w, err := p.world(env)
	if err != nil {
		p.mu.Unlock()
		return Payment{}, err
	}
	pay, ok := w.payments[paymentID]
	if !ok {
		p.mu.Unlock()
		return Payment{}, notFound("payment", paymentID)
	}
	if pay.Status != "charged_back" {
		p.mu.Unlock()
		return Payment{}, conflict("payment %s is %s, not charged_back", paymentID, pay.Status)
	}
	pay.Status = "succeeded"
	if pay.RefundedAmount > 0 {
		pay.Status = "partially_refunded"
	}
	pay.UpdatedAt = p.now()
	ds := p.emit(env, w, "payment.chargeback_won", pay.ID, pay.data(), "")
	out := *pay
	p.mu.Unlock()
	p.send(ds)
	return out, nil
}

// ---- subscriptions ----

// CreateSubscription subscribes a customer to a plan (subscription.created).
func (p *Provider) CreateSubscription(env, customer, plan string) (Subscription, error) {
	if customer == "" || plan == "" {
		return Subscription{}, invalid("customer and plan are required")
	}
	p.mu.Lock()
	w, err := p.world(env)
	if err != nil {
		p.mu.Unlock()
		return Subscription{}, err
	}
	now := p.now()
	s := &Subscription{
		ID: p.newID("sub_"), Object: "subscription", Customer: customer, Plan: plan,
		Status: "active", CurrentPeriodEnd: now.Add(SubscriptionPeriod),
		CreatedAt: now, UpdatedAt: now,
	}
	w.subs[s.ID] = s
	w.subOrder = append(w.subOrder, s.ID)
	ds := p.emit(env, w, "subscription.created", s.ID, s.data(), "")
	out := *s
	p.mu.Unlock()
	p.send(ds)
	return out, nil
}

// GetSubscription returns a subscription of env.
func (p *Provider) GetSubscription(env, id string) (Subscription, error) {
	return lookup(p, env, "subscription", id, func(w *world) map[string]*Subscription { return w.subs }, func(v *Subscription) Subscription { return *v })
}

// event returns s's current state as the event of its last change would
// carry it (see flavour.Retriever).
func (s *Subscription) event(env string) flavour.Event {
	typ := map[string]string{"canceled": "subscription.canceled", "ended": "subscription.ended"}[s.Status]
	if typ == "" {
		typ = "subscription.updated"
	}
	return flavour.Event{Type: typ, CreatedAt: s.UpdatedAt, Environment: env, ObjectID: s.ID, Data: s.data()}
}

// changeSubscription applies change to subscription id if its status is
// one of from, and emits typ.
func (p *Provider) changeSubscription(env, id, typ string, from []string, change func(s *Subscription, now time.Time)) (Subscription, error) {
	p.mu.Lock()
	w, err := p.world(env)
	if err != nil {
		p.mu.Unlock()
		return Subscription{}, err
	}
	s, ok := w.subs[id]
	if !ok {
		p.mu.Unlock()
		return Subscription{}, notFound("subscription", id)
	}
	if !slices.Contains(from, s.Status) {
		p.mu.Unlock()
		return Subscription{}, conflict("subscription %s is %s", id, s.Status)
	}
	now := p.now()
	// Every change moves updated_at forward, by a microsecond (what
	// databases keep) at least, so that it orders the subscription's
	// states even when the clock has not moved.
	if next := s.UpdatedAt.Add(time.Microsecond); now.Before(next) {
		now = next
	}
	change(s, now)
	s.UpdatedAt = now
	ds := p.emit(env, w, typ, s.ID, s.data(), "")
	out := *s
	p.mu.Unlock()
	p.send(ds)
	return out, nil
}

// UpdateSubscription changes the plan of an active subscription
// (subscription.updated).
func (p *Provider) UpdateSubscription(env, id, plan string) (Subscription, error) {
	if plan == "" {
		return Subscription{}, invalid("plan is required")
	}
	return p.changeSubscription(env, id, "subscription.updated", []string{"active"},
		func(s *Subscription, _ time.Time) { s.Plan = plan })
}

// RenewSubscription extends an active subscription by one period
// (subscription.renewed).
func (p *Provider) RenewSubscription(env, id string) (Subscription, error) {
	return p.changeSubscription(env, id, "subscription.renewed", []string{"active"},
		func(s *Subscription, _ time.Time) { s.CurrentPeriodEnd = s.CurrentPeriodEnd.Add(SubscriptionPeriod) })
}

// CancelSubscription cancels an active subscription; it runs until it
// ends (subscription.canceled).
func (p *Provider) CancelSubscription(env, id string) (Subscription, error) {
	return p.changeSubscription(env, id, "subscription.canceled", []string{"active"},
		func(s *Subscription, _ time.Time) { s.Status = "canceled" })
}

// EndSubscription ends an active or canceled subscription, for good
// (subscription.ended).
func (p *Provider) EndSubscription(env, id string) (Subscription, error) {
	return p.changeSubscription(env, id, "subscription.ended", []string{"active", "canceled"},
		func(s *Subscription, now time.Time) {
			s.Status = "ended"
			if now.Before(s.CurrentPeriodEnd) {
				s.CurrentPeriodEnd = now
			}
		})
}

// ---- crypto invoices ----

// CreateInvoice creates a crypto invoice for an order, waiting for
// payment (status new; no event).
func (p *Provider) CreateInvoice(env string, amount int64, currency, orderID string) (Invoice, error) {
	if err := checkMoney(amount, currency); err != nil {
		return Invoice{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.world(env)
	if err != nil {
		return Invoice{}, err
	}
	now := p.now()
	inv := &Invoice{
		ID: p.newID("inv_"), Object: "invoice", Amount: amount, Currency: currency,
		Status: "new", OrderID: orderID, CreatedAt: now, UpdatedAt: now,
	}
	w.invoices[inv.ID] = inv
	w.invoiceOrder = append(w.invoiceOrder, inv.ID)
	return *inv, nil
}

// GetInvoice returns an invoice of env.
func (p *Provider) GetInvoice(env, id string) (Invoice, error) {
	return lookup(p, env, "invoice", id, func(w *world) map[string]*Invoice { return w.invoices }, func(v *Invoice) Invoice { return *v })
}

// SettleInvoice settles an invoice with the on-chain reference of its
// payment (invoice.settled). Settling is final: settling again is a
// conflict. The chain reference is not checked against other invoices, so
// a scenario can reuse one on purpose.
func (p *Provider) SettleInvoice(env, id, chainRef string) (Invoice, error) {
	if chainRef == "" {
		return Invoice{}, invalid("chain_ref is required")
	}
	p.mu.Lock()
	w, err := p.world(env)
	if err != nil {
		p.mu.Unlock()
		return Invoice{}, err
	}
	inv, ok := w.invoices[id]
	if !ok {
		p.mu.Unlock()
		return Invoice{}, notFound("invoice", id)
	}
	if inv.Status != "new" {
		p.mu.Unlock()
		return Invoice{}, conflict("invoice %s is already %s", id, inv.Status)
	}
	inv.Status, inv.ChainRef, inv.UpdatedAt = "settled", chainRef, p.now()
	ds := p.emit(env, w, "invoice.settled", inv.ID, inv.data(), "")
	out := *inv
	p.mu.Unlock()
	p.send(ds)
	return out, nil
}

// ---- events ----

// Events returns one page of env's events, oldest first, and the cursor
// of the next page ("" on the last page). An unknown environment or
// cursor gives an empty page.
func (p *Provider) Events(env string, q flavour.Query) (page []flavour.Event, next string) {
	page, next, _ = p.events(env, q)
	return page, next
}

func (p *Provider) events(env string, q flavour.Query) ([]flavour.Event, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.world(env)
	if err != nil {
		return nil, "", err
	}
	page, next, err := flavour.Select(w.events, q)
	if err != nil {
		return []flavour.Event{}, "", invalid("%v", err)
	}
	for i := range page {
		page[i] = copyEvent(page[i])
	}
	return page, next, nil
}

// Snapshot returns all of env's resources and events, each list in
// creation order, for computing what a receiver should end with.
// Deleted endpoints are left out.
func (p *Provider) Snapshot(env string) (State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.world(env)
	if err != nil {
		return State{}, err
	}
	st := State{
		Environment: env, Endpoints: []Endpoint{}, Checkouts: []Checkout{}, Payments: []Payment{},
		Refunds: []Refund{}, Subscriptions: []Subscription{}, Invoices: []Invoice{}, Events: []flavour.Event{},
	}
	for _, id := range w.endpointOrder {
		if e := w.endpoints[id]; !e.deleted {
			st.Endpoints = append(st.Endpoints, e.public())
		}
	}
	for _, id := range w.checkoutOrder {
		st.Checkouts = append(st.Checkouts, w.checkouts[id].clone())
	}
	for _, id := range w.paymentOrder {
		st.Payments = append(st.Payments, *w.payments[id])
	}
	for _, id := range w.refundOrder {
		st.Refunds = append(st.Refunds, *w.refunds[id])
	}
	for _, id := range w.subOrder {
		st.Subscriptions = append(st.Subscriptions, *w.subs[id])
	}
	for _, id := range w.invoiceOrder {
		st.Invoices = append(st.Invoices, *w.invoices[id])
	}
	for _, ev := range w.events {
		st.Events = append(st.Events, copyEvent(ev))
	}
	return st, nil
}

// ---- event data ----

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (c *Checkout) data() map[string]any {
	meta := map[string]any{}
	for k, v := range c.Metadata {
		meta[k] = v
	}
	return map[string]any{
		"id": c.ID, "object": c.Object, "amount": c.Amount, "currency": c.Currency,
		"status": c.Status, "metadata": meta, "payment_id": c.PaymentID,
		"created_at": ts(c.CreatedAt), "updated_at": ts(c.UpdatedAt),
	}
}

func (pay *Payment) data() map[string]any {
	d := map[string]any{
		"id": pay.ID, "object": pay.Object, "amount": pay.Amount, "currency": pay.Currency,
		"status": pay.Status, "refunded_amount": pay.RefundedAmount, "order_id": pay.OrderID,
		"checkout_id": pay.CheckoutID, "created_at": ts(pay.CreatedAt), "updated_at": ts(pay.UpdatedAt),
	}
	if pay.DisputeID != "" {
		d["dispute_id"] = pay.DisputeID
	}
	if !pay.ChargedBackAt.IsZero() {
		d["charged_back_at"] = ts(pay.ChargedBackAt)
	}
	return d
}

func (r *Refund) data() map[string]any {
	d := map[string]any{
		"id": r.ID, "object": r.Object, "payment_id": r.PaymentID, "amount": r.Amount,
		"currency": r.Currency, "status": r.Status, "created_at": ts(r.CreatedAt),
	}
	if r.Reason != "" {
		d["reason"] = r.Reason
	}
	return d
}

func (s *Subscription) data() map[string]any {
	return map[string]any{
		"id": s.ID, "object": s.Object, "customer": s.Customer, "plan": s.Plan, "status": s.Status,
		"current_period_end": ts(s.CurrentPeriodEnd), "created_at": ts(s.CreatedAt), "updated_at": ts(s.UpdatedAt),
	}
}

func (inv *Invoice) data() map[string]any {
	return map[string]any{
		"id": inv.ID, "object": inv.Object, "amount": inv.Amount, "currency": inv.Currency,
		"status": inv.Status, "order_id": inv.OrderID, "chain_ref": inv.ChainRef,
		"created_at": ts(inv.CreatedAt), "updated_at": ts(inv.UpdatedAt),
	}
}

// copyEvent returns ev with a deep copy of its Data, so that no two
// holders share a map.
func copyEvent(ev flavour.Event) flavour.Event {
	ev.Data, _ = deepCopy(ev.Data).(map[string]any)
	return ev
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}
