package sim

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// Scenario is a business story played through the fault model against one
// webhook endpoint.
type Scenario struct {
	Name        string
	Description string
	// Faults are the scenario's own faults; RunConfig.Faults replaces them.
	Faults deliver.Faults
	play   func(s *story) error
}

// Scenarios are the stories payhook sim ships, by name.
var Scenarios = map[string]Scenario{
	"storm": {
		Name: "storm",
		Description: "checkouts paid, some refunded (fully, partly, failed) and some charged back, a third of " +
			"those disputes won back; " +
			"subscriptions created, upgraded, renewed, canceled and ended; crypto invoices settled, one with a " +
			"reused chain reference; delivered with duplicates, parallel bursts, reordering, delays and one outage",
		Faults: deliver.Faults{
			Duplicate: 0.5, Burst: 0.25, BurstSize: 5, ReorderWindow: 20, Delay: 2 * time.Minute,
			// Down from the start, so the first deliveries fail whatever
			// the machine's speed: 10 minutes, 600 ms at the default scale.
			Outages: []deliver.Outage{{From: 0, To: 10 * time.Minute}},
		},
		play: func(s *story) error { return s.mixed(250, 80, 40) },
	},
	"outage": {
		Name: "outage",
		Description: "a smaller mixed story while the target is down for its first 30 minutes; 5% of the events are " +
			"dropped for good and only the events API (GET /events) can bring them back",
		Faults: deliver.Faults{
			Drop: 0.05, Duplicate: 0.1, ReorderWindow: 10,
			Outages: []deliver.Outage{{From: 0, To: 30 * time.Minute}},
		},
		play: func(s *story) error { return s.mixed(100, 30, 20) },
	},
}

// ScenarioNames returns the names of Scenarios, sorted.
func ScenarioNames() []string {
	names := make([]string, 0, len(Scenarios))
	for n := range Scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RunConfig configures Run.
type RunConfig struct {
	// Target is the webhook URL the endpoint delivers to (required).
	Target string
	// Secret is the endpoint's signing secret, the one the receiver has
	// configured; empty means a new one (see Result.Secret).
	Secret string
	// Flavour is the provider played; default billete.
	Flavour flavour.Flavour
	// Seed makes the story and the faults reproducible.
	Seed int64
	// Rand is where the secrets (of the endpoint, when Secret is empty)
	// and the delivery ids' prefix are drawn from; default crypto/rand.
	// Give one seeded like Seed to replay them too.
	Rand io.Reader
	// TimeScale divides every delay of the retry schedule and of the
	// faults; default 1000 (the first retry after 60 ms).
	TimeScale float64
	// Size multiplies the story's counts; default 1.
	Size float64
	// Faults, if set, replace the scenario's.
	Faults *deliver.Faults
	// Environment is "test" (default) or "live".
	Environment string
	// Client sends the deliveries; default: the dispatcher's own.
	Client *http.Client
	// Logger receives the dispatcher's logs (alerts about a failing
	// endpoint among them); default slog.Default().
	Logger *slog.Logger
	// APIKey is the API key of Environment, the one a receiver under test
	// reads resources with; empty means generated (Provider.Keys).
	APIKey string
	// APIRate is the provider's API rate limit (Config.APIRate); 0 for
	// none.
	APIRate float64
	// Clock is the time of the provider and of its deliveries (see
	// deliver.Clock); nil means the real one.
	Clock deliver.Clock
	// Sender, if set, delivers the run's events instead of a dispatcher
	// (Faults, TimeScale, Client and Clock's timers are then unused), and
	// Run returns once the story is played, without waiting for any
	// delivery: the caller drives them, as a deterministic simulation
	// does. Result.Stats is then zero and no ExpectedEvent is Delivered
	// yet: the caller sets Delivered for the events it got a 2xx for.
	Sender Sender
	// Started, if set, is called with the provider before the story is
	// played, e.g. to serve its API (Handler) while the run lasts so that
	// the receiver can fetch the resources its events are about.
	Started func(p *Provider)
}

// Result is what a run did and the state the receiver should end with.
type Result struct {
	Scenario    string `json:"scenario"`
	Flavour     string `json:"flavour"`
	Provider    string `json:"provider"` // payhook's provider name for this flavour
	Seed        int64  `json:"seed"`
	Environment string `json:"environment"`
	// Target is the URL the events were delivered to (RunConfig.Target).
	Target     string        `json:"target"`
	EndpointID string        `json:"endpoint_id"`
	Secret     string        `json:"-"`
	Stats      deliver.Stats `json:"stats"`
	Expected   Expected      `json:"expected"`
}

// Expected is the truth a receiver is compared against after a run.
type Expected struct {
	// Events are all events the provider created for the endpoint's
	// environment, in creation order.
	Events        []ExpectedEvent   `json:"events"`
	Payments      []Payment         `json:"payments"`
	Refunds       []Refund          `json:"refunds"`
	Orders        []ExpectedOrder   `json:"orders"`
	Subscriptions []Subscription    `json:"subscriptions"`
	Invoices      []ExpectedInvoice `json:"invoices"`
	Alerts        []ExpectedAlert   `json:"alerts"`
	// Balances is the money kept per currency, in minor units: fiat
	// payments minus their refunds, nothing of a payment charged back (a
	// payment whose dispute was won keeps amount - refunded again), plus
	// credited crypto invoices.
	Balances map[string]int64 `json:"balances"`
}

// ExpectedEvent is one provider event.
type ExpectedEvent struct {
	ID string `json:"id"`
	// StoredID is the event id payhook stores for it (the flavour's).
	StoredID string `json:"stored_id"`
	Type     string `json:"type"`
	ObjectID string `json:"object_id"`
	// Delivered: some delivery of it was answered 2xx. A dropped event is
	// not, and only the events API finds it.
	Delivered bool `json:"delivered"`
}

// ExpectedOrder is an application order carried in checkout or invoice
// metadata.
type ExpectedOrder struct {
	ID string `json:"id"`
	// Status is "paid" once a payment for it succeeded, or a settlement
	// was credited; else "pending".
	Status string `json:"status"`
	// PaidBy is the payment or invoice that paid it.
	PaidBy string `json:"paid_by,omitempty"`
}

// ExpectedInvoice is a crypto invoice and whether it may be credited: an
// invoice settled with a chain reference already bound to another one is
// not.
type ExpectedInvoice struct {
	Invoice
	Credited bool `json:"credited"`
}

// ExpectedAlert is an alert the receiver must raise.
type ExpectedAlert struct {
	Kind    string `json:"kind"`
	Subject string `json:"subject"`
}

// AlertReusedReference is the kind of alert for a crypto settlement whose
// chain reference another invoice already used.
const AlertReusedReference = "crypto_reference_reused"

// Run plays the named scenario against cfg.Target and waits until every
// delivery has been acknowledged or has given up. It returns the result
// and the provider, whose API (Handler) still answers reads, e.g.
// GET /events; its deliveries have ended with the run, so events created
// on it afterwards are recorded but not delivered.
func Run(ctx context.Context, name string, cfg RunConfig) (*Result, *Provider, error) {
	sc, ok := Scenarios[name]
	if !ok {
		return nil, nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(ScenarioNames(), ", "))
	}
	if cfg.Flavour == nil {
		cfg.Flavour = flavour.Billete()
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1000
	}
	if cfg.Size <= 0 {
		cfg.Size = 1
	}
	if cfg.Environment == "" {
		cfg.Environment = EnvTest
	}
	if cfg.Secret == "" {
		cfg.Secret = cfg.Flavour.NewSecretFrom(cmp.Or[io.Reader](cfg.Rand, crand.Reader))
	}
	faults := sc.Faults
	if cfg.Faults != nil {
		faults = *cfg.Faults
	}
	var d *deliver.Dispatcher
	sender, delivered := cfg.Sender, func(string) bool { return false }
	if sender == nil {
		d = deliver.New(deliver.Config{
			TimeScale: cfg.TimeScale, Faults: faults, Seed: cfg.Seed, Client: cfg.Client, Logger: cfg.Logger,
			Clock: cfg.Clock, Rand: cfg.Rand,
		})
		defer d.Close()
		sender, delivered = d, d.Delivered
	}
	pc := Config{Flavour: cfg.Flavour, Sender: sender, Seed: cfg.Seed, Rand: cfg.Rand, APIRate: cfg.APIRate}
	if cfg.Clock != nil {
		pc.Now = cfg.Clock.Now
	}
	if cfg.Environment == EnvLive {
		pc.LiveKey = cfg.APIKey
	} else {
		pc.TestKey = cfg.APIKey
	}
	p, err := New(pc)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Started != nil {
		cfg.Started(p)
	}
	ep, err := p.CreateEndpointWithSecret(cfg.Environment, cfg.Target, []string{"*"}, "", cfg.Secret)
	if err != nil {
		return nil, nil, fmt.Errorf("create endpoint: %w", err)
	}
	s := &story{p: p, env: cfg.Environment, endpoint: ep.ID, flavour: cfg.Flavour.Name(), size: cfg.Size,
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5ce7a710))}
	if err := sc.play(s); err != nil {
		return nil, nil, fmt.Errorf("play %s: %w", name, err)
	}
	var stats deliver.Stats
	if d != nil {
		if err := d.Wait(ctx); err != nil {
			return nil, nil, fmt.Errorf("wait for deliveries: %w", err)
		}
		stats = d.Stats()
	}
	st, err := p.Snapshot(cfg.Environment)
	if err != nil {
		return nil, nil, err
	}
	res := &Result{
		Scenario: name, Flavour: cfg.Flavour.Name(), Provider: cfg.Flavour.Provider(), Seed: cfg.Seed,
		Environment: cfg.Environment, Target: cfg.Target, EndpointID: ep.ID, Secret: cfg.Secret, Stats: stats,
		Expected: expect(st, cfg.Flavour, s.reused, delivered),
	}
	return res, p, nil
}

// story drives the provider through a business story.
type story struct {
	p        *Provider
	env      string
	endpoint string
	flavour  string
	size     float64
	rng      *rand.Rand
	orders   int
	// reused holds the invoices settled with a chain reference that an
	// earlier invoice used.
	reused map[string]bool
}

func (s *story) n(base int) int { return max(1, int(float64(base)*s.size+0.5)) }

func (s *story) amount() int64 { return 500 + s.rng.Int64N(49_500) }

func (s *story) currency() string {
	if s.rng.IntN(10) < 7 {
		return "USD"
	}
	return "EUR"
}

func (s *story) order() string {
	s.orders++
	return fmt.Sprintf("ord_%05d", s.orders)
}

// mixed plays fiat checkouts and subscriptions (not on the crypto flavour)
// and crypto invoices (on billete and crypto, which settle them), then a
// test event.
func (s *story) mixed(checkouts, subscriptions, invoices int) error {
	if s.flavour != "crypto" {
		if err := s.checkouts(s.n(checkouts)); err != nil {
			return err
		}
		if err := s.subscriptions(s.n(subscriptions)); err != nil {
			return err
		}
	} else {
		invoices *= 6
	}
	if s.flavour == "billete" || s.flavour == "crypto" {
		if err := s.invoices(s.n(invoices)); err != nil {
			return err
		}
	}
	_, err := s.p.SendTest(s.env, s.endpoint)
	return err
}

// checkouts completes n checkouts; of their payments a fifth are refunded
// (alternately in full, in part, and in two parts), one in fifty has a
// failed refund, and a tenth are charged back, as is one in thirty after
// its partial refund. Then every third chargeback, from the second on, is
// won by the merchant: its payment goes back to succeeded or
// partially_refunded.
func (s *story) checkouts(n int) error {
	var pays []Payment
	for range n {
		c, err := s.p.CreateCheckout(s.env, s.amount(), s.currency(), s.order())
		if err != nil {
			return err
		}
		pay, err := s.p.CompleteCheckout(s.env, c.ID)
		if err != nil {
			return err
		}
		pays = append(pays, pay)
	}
	var disputed []string // charged back payments, in order
	for i, pay := range pays {
		key := func(k int) string { return fmt.Sprintf("refund-%s-%d", pay.ID, k) }
		var err error
		switch {
		case i%5 == 0 && i%3 == 0:
			_, err = s.p.Refund(s.env, pay.ID, pay.Amount, key(1), false)
		case i%5 == 0 && i%3 == 1:
			if _, err = s.p.Refund(s.env, pay.ID, pay.Amount/3, key(1), false); err == nil && i%30 == 10 {
				_, err = s.p.Chargeback(s.env, pay.ID)
				disputed = append(disputed, pay.ID)
			}
		case i%5 == 0:
			if _, err = s.p.Refund(s.env, pay.ID, pay.Amount/4, key(1), false); err == nil {
				_, err = s.p.Refund(s.env, pay.ID, pay.Amount/4, key(2), false)
			}
		case i%50 == 7:
			_, err = s.p.Refund(s.env, pay.ID, pay.Amount, key(1), true)
		case i%10 == 3:
			_, err = s.p.Chargeback(s.env, pay.ID)
			disputed = append(disputed, pay.ID)
		}
		if err != nil {
			return err
		}
	}
	for k, id := range disputed {
		if k%3 == 1 {
			if _, err := s.p.WinChargeback(s.env, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// subscriptions creates n subscriptions; most upgrade and renew, some
// cancel, and some of those end.
func (s *story) subscriptions(n int) error {
	plans := []string{"basic", "pro", "team"}
	for i := range n {
		sub, err := s.p.CreateSubscription(s.env, fmt.Sprintf("cus_%04d", i+1), plans[i%2])
		if err != nil {
			return err
		}
		steps := []func() (Subscription, error){}
		if i%8 != 0 {
			steps = append(steps, func() (Subscription, error) { return s.p.UpdateSubscription(s.env, sub.ID, plans[1+i%2]) })
		}
		if i%3 != 0 {
			steps = append(steps, func() (Subscription, error) { return s.p.RenewSubscription(s.env, sub.ID) })
		}
		if i%4 == 1 {
			steps = append(steps, func() (Subscription, error) { return s.p.CancelSubscription(s.env, sub.ID) })
			if i%8 == 1 {
				steps = append(steps, func() (Subscription, error) { return s.p.EndSubscription(s.env, sub.ID) })
			}
		}
		for _, step := range steps {
			if _, err := step(); err != nil {
				return err
			}
		}
	}
	return nil
}

// invoices settles n crypto invoices; the last one reuses the chain
// reference of the first.
func (s *story) invoices(n int) error {
	s.reused = map[string]bool{}
	var first string
	for i := range n {
		inv, err := s.p.CreateInvoice(s.env, s.amount(), "BTC", s.order())
		if err != nil {
			return err
		}
		ref := fmt.Sprintf("tx_%016x", s.rng.Uint64())
		if i == 0 {
			first = ref
		}
		if i == n-1 && n > 1 {
			ref = first
			s.reused[inv.ID] = true
		}
		if _, err := s.p.SettleInvoice(s.env, inv.ID, ref); err != nil {
			return err
		}
	}
	return nil
}

// expect computes the truth from the provider's final state.
func expect(st State, f flavour.Flavour, reused map[string]bool, delivered func(string) bool) Expected {
	exp := Expected{
		Payments: st.Payments, Refunds: st.Refunds, Subscriptions: st.Subscriptions,
		Events: []ExpectedEvent{}, Orders: []ExpectedOrder{}, Invoices: []ExpectedInvoice{},
		Alerts: []ExpectedAlert{}, Balances: map[string]int64{},
	}
	for _, ev := range st.Events {
		exp.Events = append(exp.Events, ExpectedEvent{ID: ev.ID, StoredID: f.EventID(ev), Type: ev.Type,
			ObjectID: ev.ObjectID, Delivered: delivered(ev.ID)})
	}
	orders := map[string]*ExpectedOrder{}
	var orderIDs []string
	order := func(id string) *ExpectedOrder {
		if orders[id] == nil {
			orders[id] = &ExpectedOrder{ID: id, Status: "pending"}
			orderIDs = append(orderIDs, id)
		}
		return orders[id]
	}
	for _, c := range st.Checkouts {
		o := order(c.Metadata["order_id"])
		if c.Status == "completed" {
			o.Status, o.PaidBy = "paid", c.PaymentID
		}
	}
	for _, p := range st.Payments {
		// A won dispute puts the payment back to succeeded or
		// partially_refunded: it keeps amount - refunded again.
		kept := p.Amount - p.RefundedAmount
		if p.Status == "charged_back" {
			kept = 0
		}
		exp.Balances[p.Currency] += kept
	}
	for _, inv := range st.Invoices {
		o := order(inv.OrderID)
		credited := inv.Status == "settled" && !reused[inv.ID]
		if credited {
			o.Status, o.PaidBy = "paid", inv.ID
			exp.Balances[inv.Currency] += inv.Amount
		}
		if reused[inv.ID] {
			exp.Alerts = append(exp.Alerts, ExpectedAlert{Kind: AlertReusedReference, Subject: inv.ChainRef})
		}
		exp.Invoices = append(exp.Invoices, ExpectedInvoice{Invoice: inv, Credited: credited})
	}
	for _, id := range orderIDs {
		exp.Orders = append(exp.Orders, *orders[id])
	}
	return exp
}

// Summary says in a few lines what the run sent and how it was answered.
func (r *Result) Summary() string {
	var b strings.Builder
	st := r.Stats
	undelivered := 0
	for _, ev := range r.Expected.Events {
		if !ev.Delivered {
			undelivered++
		}
	}
	fmt.Fprintf(&b, "%s (flavour %s, seed %d): %d events, %d delivery attempts\n",
		r.Scenario, r.Flavour, r.Seed, len(r.Expected.Events), st.Attempts)
	fmt.Fprintf(&b, "  answered 2xx        %d\n", st.Acked)
	fmt.Fprintf(&b, "  failed attempts     %d (%d during the outage), retried on schedule\n", st.Failed, st.Outage)
	fmt.Fprintf(&b, "  duplicates sent     %d, parallel bursts %d\n", st.Duplicates, st.Bursts)
	fmt.Fprintf(&b, "  dropped on purpose  %d; gave up %d; events never acknowledged %d\n", st.Dropped, st.GaveUp, undelivered)
	return b.String()
}

// Undelivered returns the events no delivery got acknowledged for.
func (e Expected) Undelivered() []ExpectedEvent {
	return slices.DeleteFunc(slices.Clone(e.Events), func(ev ExpectedEvent) bool { return ev.Delivered })
}
