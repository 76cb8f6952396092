// Package sim is payhook's simulated payment provider: its resources
// (webhook endpoints, checkouts, payments, refunds, subscriptions, crypto
// invoices), the events their changes create, and the HTTP API that drives
// them. Deliveries go through a Sender (the deliver package's dispatcher);
// a flavour (the flavour package) makes it look like a real provider.
package sim

import (
	crand "crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

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
)

// Sender delivers events to endpoints; *deliver.Dispatcher satisfies it.
type Sender interface {
	Send(t deliver.Target, ev flavour.Event)
	Log(endpointID string) []deliver.Attempt
	// Resend sends a delivery again, to the endpoint as it is now.
	Resend(deliveryID string, to deliver.Target) error
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
	// Rand is where the signing secrets of new and rotated endpoints are
	// drawn from. Default crypto/rand: a secret must not be guessable. A
	// simulation gives one seeded by its run, so that a seed replays the
	// same secrets.
	Rand io.Reader
	// APIVersion is the provider's API version: the default of new
	// endpoints and the version of events.list; default "2026-01-01".
	APIVersion string
	// Grace is how long a rotated-out secret keeps signing; 0 means 24h,
	// a negative value none.
	Grace time.Duration
	// TestKey and LiveKey are the API keys; generated ("sk_test_..." and
	// "sk_live_...") when empty.
	TestKey, LiveKey string
	// APIRate, if above 0, is how many API requests a second the provider
	// answers in each environment, a second's worth at once at most
	// (measured on Now); beyond, it answers 429 rate_limit with a
	// Retry-After of the seconds until the next it would answer, as real
	// providers do (Stripe takes 25 requests a second in a sandbox,
	// Paddle 240 a minute). 0: no limit.
	APIRate float64
}

// Error is an API error; Type is one of "invalid_request",
// "authentication", "not_found", "conflict", "rate_limit". errors.Is
// matches it against ErrInvalid, ErrAuth, ErrNotFound, ErrConflict and
// ErrRateLimit by Type.
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
	// ErrRateLimit is the answer beyond Config.APIRate: 429, with a
	// Retry-After.
	ErrRateLimit = &Error{Type: "rate_limit", Message: "too many requests; see Retry-After"}
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

	limits map[string]*rate.Limiter // env -> its API rate, with APIRate
}

// world is one environment: its resources, each map with its ids in
// creation order, and its event log.
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
	if cfg.Rand == nil {
		cfg.Rand = crand.Reader
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
	if cfg.APIRate < 0 || math.IsNaN(cfg.APIRate) || math.IsInf(cfg.APIRate, 0) {
		return nil, fmt.Errorf("sim: APIRate %g is not a rate (0 for none)", cfg.APIRate)
	}
	p := &Provider{
		cfg:  cfg,
		keys: map[string]string{cfg.TestKey: EnvTest, cfg.LiveKey: EnvLive},
		rng:  rand.New(rand.NewPCG(seed, 0x70617968)),
		envs: map[string]*world{EnvTest: newWorld(), EnvLive: newWorld()},
	}
	if cfg.APIRate > 0 {
		burst := max(1, int(math.Ceil(cfg.APIRate)))
		p.limits = map[string]*rate.Limiter{EnvTest: rate.NewLimiter(rate.Limit(cfg.APIRate), burst),
			EnvLive: rate.NewLimiter(rate.Limit(cfg.APIRate), burst)}
	}
	return p, nil
}

// apiWait returns 0 when env's API answers one more request now
// (Config.APIRate), else how long until it would.
func (p *Provider) apiWait(env string) time.Duration {
	l := p.limits[env]
	if l == nil {
		return 0
	}
	now := p.cfg.Now()
	r := l.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now) // refused: the request takes no turn
	}
	return d
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

// tx is one change to an environment's world, made with p.mu held: the
// events it emits are recorded at once and handed to the Sender once the
// lock is released.
type tx struct {
	p   *Provider
	env string
	w   *world
	out []delivery
}

// read runs f on env's world with p.mu held and releases it, whatever f
// returns.
func read[T any](p *Provider, env string, f func(w *world) (T, error)) (T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.world(env)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(w)
}

// change runs f on env's world with p.mu held, like read, then, with
// p.mu released, sends the events f emitted. Every change of the provider
// goes through it, so no method unlocks by hand and none sends while
// holding the lock (a Sender may call back, e.g. Target.Secrets). The
// events f emitted are in the log, so they are sent even when f fails; f
// fails before it emits anything.
func change[T any](p *Provider, env string, f func(t *tx) (T, error)) (T, error) {
	t := &tx{p: p, env: env}
	v, err := read(p, env, func(w *world) (T, error) {
		t.w = w
		return f(t)
	})
	for _, d := range t.out {
		p.cfg.Sender.Send(d.target, d.ev)
	}
	return v, err
}

// delivery is one event to hand to the Sender once p.mu is released.
type delivery struct {
	target deliver.Target
	ev     flavour.Event
}

// emit records an event in the world's log and queues its deliveries to
// the endpoints subscribed to it (only to only, when set). It returns the
// event as recorded.
func (t *tx) emit(typ, objectID string, data map[string]any, only string) flavour.Event {
	p, w := t.p, t.w
	ev := flavour.Event{
		ID:          p.newID("evt_"),
		Type:        typ,
		CreatedAt:   p.now(),
		Environment: t.env,
		APIVersion:  p.cfg.APIVersion,
		ObjectID:    objectID,
		Data:        data,
		Seq:         int64(len(w.events)) + 1,
	}
	w.events = append(w.events, ev)
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
		t.out = append(t.out, delivery{target: p.target(e), ev: out})
	}
	return ev
}

// lookup returns a copy of env's resource of the kind with the id, or
// an error matching ErrNotFound.
func lookup[T any](p *Provider, env, kind, id string, of func(*world) map[string]*T, copyOf func(*T) T) (T, error) {
	return read(p, env, func(w *world) (T, error) {
		v, ok := of(w)[id]
		if !ok {
			var zero T
			return zero, notFound(kind, id)
		}
		return copyOf(v), nil
	})
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
