package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/store"
)

// Alert kinds raised by Reconcile.
const (
	// AlertDifference: the provider and payhook disagree about an
	// object; subject is source/kind/ref, raised once per difference
	// (the same difference found by the next run counts nothing), and
	// acknowledged by the first run that ends without error, compares
	// the object (it is in the run's window) and no longer reports a
	// difference of the subject (after which the same difference found
	// again raises it again).
	AlertDifference = billing.AlertReconcileDifference
	// AlertAPIVersionDrift: an event or a listed object came in another
	// API version than the source pins (billing.AlertAPIVersionDrift).
	AlertAPIVersionDrift = billing.AlertAPIVersionDrift
)

// What a Difference is.
const (
	// MissingHere: the provider has the object, payhook does not.
	MissingHere = "missing_here"
	// MissingAtProvider: payhook has the object and the provider does
	// not know it: retrieved, a 404 the run could trust (see
	// Config.Client). A payment, when the client cannot retrieve one:
	// the provider's list in the window does not have it.
	MissingAtProvider = "missing_at_provider"
	// Different: both have it, some fields differ.
	Different = "different"
)

// DefaultSince is how far back Reconcile looks when Config.Since is zero.
const DefaultSince = 24 * time.Hour

// DefaultMaxRetrieves is Config.MaxRetrieves when it is zero.
const DefaultMaxRetrieves = 1000

// Slack is how much earlier than the window the provider is listed, so
// that an object payhook stored inside the window but the provider
// created a little before it is not reported missing at the provider.
const Slack = time.Hour

// Config configures one reconciliation of one source.
type Config struct {
	// DB is payhook's database (required).
	DB *store.DB
	// Source is the source's name (required).
	Source string
	// Client is the source's API client; it must be an
	// adapter.ObjectLister (required). When it is also an
	// adapter.ObjectGetter, each payment and subscription payhook stored
	// in the window that the list did not have (created at the provider
	// before the window) is retrieved and compared as a listed one, and
	// one the provider does not know (a 404) is MissingAtProvider, once
	// the run trusts the client's 404s of that kind (see the package
	// doc); without one, such a subscription is neither compared nor
	// reported, and such a payment is MissingAtProvider unless payhook's
	// captured_at is before the window.
	Client adapter.Client
	// Since is the start of the window: objects created at or after it
	// are compared. If zero, Now minus DefaultSince.
	Since time.Time
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
	// APIVersion is the version the source pins; a listed object of
	// another version raises AlertAPIVersionDrift. If empty, no check.
	APIVersion string
	// MaxAttempts bounds the requests for one page, or one object's
	// retrieve: a timeout, a 5xx or a 429 is retried after a backoff
	// until then. Default 5.
	MaxAttempts int
	// Backoff is the wait before retry n (1 for the first) when the API
	// asked for none. Default 1s, doubling, at most 1 minute.
	Backoff func(attempt int) time.Duration
	// MaxRetryAfter bounds the Retry-After honoured; an API asking for a
	// longer wait fails the run, saying so. Default 5 minutes.
	MaxRetryAfter time.Duration
	// Logger receives a line per retry. Default slog.Default().
	Logger *slog.Logger
	// Sleep waits d or until ctx is done. Default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRetrieves bounds the objects a run retrieves one by one (the
	// payments, then the subscriptions, payhook stored in the window that
	// the lists did not have): the rest are not retrieved, counted in
	// Report.Unchecked and logged, never reported as differences nor
	// compared (their open differences stay open, even when the refunds
	// listed of such a payment are checked for postings). Zero
	// means DefaultMaxRetrieves, a negative value none. The retrieve of a
	// listed object that checks the client's 404s (at most one per kind)
	// is not counted.
	MaxRetrieves int
}

// maxRetrieves is cfg.MaxRetrieves, the default applied.
func (cfg Config) maxRetrieves() int {
	switch {
	case cfg.MaxRetrieves == 0:
		return DefaultMaxRetrieves
	case cfg.MaxRetrieves < 0:
		return 0
	}
	return cfg.MaxRetrieves
}

// retrier returns the retries of cfg's page requests, defaults applied.
func (cfg Config) retrier() retrier {
	r := retrier{maxAttempts: cfg.MaxAttempts, backoff: cfg.Backoff, maxRetryAfter: cfg.MaxRetryAfter, sleep: cfg.Sleep, logger: cfg.Logger}
	if r.maxAttempts <= 0 {
		r.maxAttempts = 5
	}
	if r.backoff == nil {
		r.backoff = func(n int) time.Duration { return min(time.Second<<min(n-1, 10), time.Minute) }
	}
	if r.maxRetryAfter <= 0 {
		r.maxRetryAfter = 5 * time.Minute
	}
	if r.sleep == nil {
		r.sleep = sleep
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	return r
}

// listAll lists every page of the objects of kind created at or after
// from, each page retried as cfg says. A page that repeats an object
// already listed fails the listing: the provider's paging is
// inconsistent, and going on could go round for ever.
func listAll(ctx context.Context, cfg Config, lister adapter.ObjectLister, kind string, from time.Time) ([]adapter.Object, error) {
	r := cfg.retrier()
	what := "reconcile " + cfg.Source + " " + kind + "s"
	var all []adapter.Object
	seen := map[string]int{}
	q := adapter.ObjectQuery{Kind: kind, From: from}
	for n := 1; ; n++ {
		var p adapter.ObjectPage
		err := r.page(ctx, what, n, q.Cursor, func() (err error) {
			p, err = lister.ListObjects(ctx, q)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, o := range p.Objects {
			if first, dup := seen[o.Ref]; dup {
				return nil, fmt.Errorf("%s: page %d (cursor %q) lists %s %s again (first on page %d): the provider's paging is inconsistent: %w",
					what, n, q.Cursor, kind, o.Ref, first, payhook.ErrMalformed)
			}
			seen[o.Ref] = n
		}
		all = append(all, p.Objects...)
		if p.Next == "" {
			return all, nil
		}
		if p.Next == q.Cursor {
			return nil, fmt.Errorf("%s: page %d gives back its own cursor %q: %w", what, n, q.Cursor, payhook.ErrMalformed)
		}
		q.Cursor = p.Next
	}
}

// Field is one field that differs.
type Field struct {
	Name     string `json:"name"`
	Here     string `json:"here"`
	Provider string `json:"provider"`
	// HereCurrency and ProviderCurrency are the currencies of an amount
	// (amount, refunded_amount: minor units of the payment's currency
	// here and at the provider), "" for other fields.
	HereCurrency     string `json:"here_currency,omitempty"`
	ProviderCurrency string `json:"provider_currency,omitempty"`
}

// HereShown is the field's value here, an amount with its currency
// before it ("EUR 1000", as ledger balances writes amounts).
func (f Field) HereShown() string { return withCurrency(f.HereCurrency, f.Here) }

// ProviderShown is the field's value at the provider, as HereShown.
func (f Field) ProviderShown() string { return withCurrency(f.ProviderCurrency, f.Provider) }

func withCurrency(currency, v string) string {
	if currency == "" || v == "" {
		return v
	}
	return currency + " " + v
}

// Difference is one row of the report.
type Difference struct {
	// Kind is adapter.KindPayment or adapter.KindSubscription (a refund
	// or dispute is reported on its payment).
	Kind string `json:"kind"`
	Ref  string `json:"ref"`
	// What is MissingHere, MissingAtProvider or Different.
	What   string  `json:"what"`
	Fields []Field `json:"fields,omitempty"`
	// Fix says which events would correct it, through the normal path.
	Fix string `json:"fix"`
	// Alerted says that this run raised the difference's alert (false:
	// an earlier run did).
	Alerted bool `json:"alerted"`
}

// Report is what Reconcile found.
type Report struct {
	Source string    `json:"source"`
	Since  time.Time `json:"since"`
	At     time.Time `json:"at"`
	// Listed counts the provider's objects read, by kind.
	Listed map[string]int `json:"listed"`
	// Retrieved counts the objects retrieved one by one, by kind: the
	// payments and subscriptions payhook stored in the window that the
	// list did not have (created at the provider before the window),
	// when the client is an adapter.ObjectGetter.
	Retrieved map[string]int `json:"retrieved,omitempty"`
	// Unchecked counts, by kind, those the run did not retrieve, past
	// Config.MaxRetrieves: neither compared nor reported; a later run,
	// or a shorter window, checks them.
	Unchecked map[string]int `json:"unchecked,omitempty"`
	// Differences are sorted by kind and ref; empty when all agree.
	Differences []Difference `json:"differences"`
	// Run is the id of the run's record (payhook reconcile runs).
	Run int64 `json:"run"`
}

// Reconcile lists the source's objects at the provider and compares them
// with payhook's billing state: each difference is a row of the report
// and an AlertDifference (once per difference). Nothing is corrected.
// Each run is recorded (store.Run, kind reconcile: its window, the objects
// listed, the differences, its error). It returns an error wrapping
// payhook.ErrConfig when the config is incomplete or the client lists no
// objects, and the listing's or a retrieve's error (nothing raised, the
// run recorded as failed) when the provider's API fails.
func Reconcile(ctx context.Context, cfg Config) (*Report, error) {
	_, ok := cfg.Client.(adapter.ObjectLister)
	if cfg.DB == nil || cfg.Source == "" || !ok {
		return nil, fmt.Errorf("reconcile: a database, a source and a client that lists objects are required: %w", payhook.ErrConfig)
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	at := now().UTC()
	since := cfg.Since
	if since.IsZero() {
		since = at.Add(-DefaultSince)
	}
	run := &store.Run{Kind: store.RunReconcile, Source: cfg.Source, From: since, Until: at}
	if err := cfg.DB.StartRun(ctx, run, at); err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", cfg.Source, err)
	}
	rep, err := reconcile(ctx, cfg, since, at)
	if rep != nil {
		run.Differences = int64(len(rep.Differences))
		for _, n := range rep.Listed {
			run.Listed += int64(n)
		}
		for _, n := range rep.Unchecked {
			run.Unchecked += int64(n)
		}
		rep.Run = run.ID
	}
	if err != nil {
		run.Error = err.Error()
	}
	if ferr := cfg.DB.FinishRun(context.WithoutCancel(ctx), run, now().UTC()); ferr != nil && err == nil {
		err = fmt.Errorf("reconcile %s: %w", cfg.Source, ferr)
	}
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// reconcile is Reconcile's work, between the start and the end of its run.
func reconcile(ctx context.Context, cfg Config, since, at time.Time) (*Report, error) {
	lister := cfg.Client.(adapter.ObjectLister)
	rep := &Report{Source: cfg.Source, Since: since.UTC(), At: at, Listed: map[string]int{}, Retrieved: map[string]int{},
		Unchecked: map[string]int{}, Differences: []Difference{}}

	listed := map[string][]adapter.Object{}
	for _, kind := range adapter.ObjectKinds {
		objs, err := listAll(ctx, cfg, lister, kind, since.Add(-Slack))
		if err != nil {
			return nil, err
		}
		listed[kind] = objs
		rep.Listed[kind] = len(objs)
	}

	c := &comparer{ctx: ctx, db: cfg.DB, source: cfg.Source, since: since, rep: rep, compared: map[string]bool{}, retrier: cfg.retrier(),
		budget: cfg.maxRetrieves(), gone: map[string][]goneRef{}, answered: map[string]bool{}, unchecked: map[string]bool{}}
	c.getter, _ = cfg.Client.(adapter.ObjectGetter)
	if err := c.payments(listed); err != nil {
		return nil, err
	}
	if err := c.subscriptions(listed[adapter.KindSubscription]); err != nil {
		return nil, err
	}
	if len(rep.Unchecked) > 0 {
		c.retrier.logger.Warn("reconcile "+cfg.Source+": retrieves capped; the rest left unchecked (not compared, not reported)",
			"max_retrieves", cfg.maxRetrieves(), "unchecked", rep.Unchecked)
	}
	sort.Slice(rep.Differences, func(i, j int) bool {
		a, b := rep.Differences[i], rep.Differences[j]
		return a.Kind < b.Kind || (a.Kind == b.Kind && a.Ref < b.Ref)
	})
	for _, o := range c.retrieved {
		rep.Retrieved[o.Kind]++
	}
	// An object the cap left unchecked was not compared, whatever else
	// the run read of it (the refunds listed of a payment): its open
	// differences are not found fixed.
	for subject := range c.unchecked {
		delete(c.compared, subject)
	}
	if err := raise(ctx, cfg, at, rep, listed, c.retrieved, c.compared); err != nil {
		return nil, err
	}
	return rep, nil
}

// comparer compares one source's listed objects with its billing state.
type comparer struct {
	ctx    context.Context
	db     *store.DB
	source string
	since  time.Time
	rep    *Report
	// getter retrieves one object, nil when the client cannot; retrier
	// retries its requests as the listing's pages are.
	getter  adapter.ObjectGetter
	retrier retrier
	// budget is how many more objects the run may retrieve
	// (Config.MaxRetrieves).
	budget int
	// retrieved are the objects retrieved one by one (payments and
	// subscriptions payhook stored in the window that the list did not
	// have).
	retrieved []adapter.Object
	// gone are, by kind, the retrieves answered 404: missing at the
	// provider once the client's 404s of that kind are trusted (see
	// missingAtProvider). answered holds the kinds of which the client
	// answered a retrieve with the object in this run.
	gone     map[string][]goneRef
	answered map[string]bool
	// compared holds the alert subjects of the objects this run compared:
	// only their open differences can be found fixed by it.
	compared map[string]bool
	// unchecked holds the alert subjects of the objects the run did not
	// retrieve, past Config.MaxRetrieves (Report.Unchecked): never
	// compared, even when another loop (a payment's listed refunds) read
	// something of them.
	unchecked map[string]bool
}

func (c *comparer) add(d Difference) { c.rep.Differences = append(c.rep.Differences, d) }

// compare records that the run compared the object kind/ref.
func (c *comparer) compare(kind, ref string) {
	c.compared[Difference{Kind: kind, Ref: ref}.subject(c.source)] = true
}

// backfillFix is the fix of what a backfill from t brings.
func (c *comparer) backfillFix(what string, t time.Time) string {
	return fmt.Sprintf("%s: payhook backfill --source %s --since %s", what, c.source, t.UTC().Format(time.RFC3339))
}

// payments compares the listed payments, with their refunds and
// disputes, and the payments payhook stored in the window.
func (c *comparer) payments(listed map[string][]adapter.Object) error {
	refunds := map[string][]adapter.Object{}
	for _, r := range listed[adapter.KindRefund] {
		refunds[r.PaymentRef] = append(refunds[r.PaymentRef], r)
	}
	// A payment may have several disputes: each is compared on its own.
	disputes := map[string][]adapter.Object{}
	for _, d := range listed[adapter.KindDispute] {
		disputes[d.PaymentRef] = append(disputes[d.PaymentRef], d)
	}
	atProvider := map[string]bool{}
	for _, p := range listed[adapter.KindPayment] {
		atProvider[p.Ref] = true
		if err := c.payment(p, refunds[p.Ref], disputes[p.Ref]); err != nil {
			return err
		}
	}
	// The payments payhook stored in the window that the list does not
	// have: made at the provider before the window (payhook's captured_at
	// is the time of the first event it saw, a refund's, say), or
	// missing there. Each is retrieved and compared as a listed one.
	here, err := billing.ListPayments(c.ctx, c.db, billing.PaymentFilter{Source: c.source, Kind: "fiat", CreatedFrom: c.since, Limit: 1 << 30})
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", c.source, err)
	}
	for _, p := range here {
		if atProvider[p.Ref] {
			continue // compared above
		}
		if !p.CapturedAt.IsZero() && p.CapturedAt.Before(c.since) {
			// Made before the window by the provider's time, stored in
			// it (delivered late, or backfilled): not listed, not compared.
			continue
		}
		o, got, err := c.unlisted(adapter.KindPayment, p.Ref)
		switch {
		case err != nil:
			return err
		case got == retrieved:
			atProvider[p.Ref] = true // its refunds are compared with it
			if err := c.payment(o, refunds[p.Ref], disputes[p.Ref]); err != nil {
				return err
			}
		case got == cannotRetrieve:
			// The list alone says it: missing at the provider.
			c.compare(adapter.KindPayment, p.Ref)
			c.add(Difference{Kind: adapter.KindPayment, Ref: p.Ref, What: MissingAtProvider, Fix: missingPaymentFix})
		}
	}
	if err := c.missingAtProvider(adapter.KindPayment, listed[adapter.KindPayment], missingPaymentFix); err != nil {
		return err
	}
	// Refunds of payments created before the window: each one payhook
	// has no posting of is missing here, reported on its payment.
	for ref, rs := range refunds {
		if atProvider[ref] {
			continue
		}
		c.compare(adapter.KindPayment, ref)
		missing, err := c.missingRefunds(ref, rs)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			c.add(Difference{Kind: adapter.KindPayment, Ref: ref, What: Different,
				Fields: []Field{{Name: "refunds", Here: "", Provider: strings.Join(ids(missing), ",")}},
				Fix:    c.backfillFix("the payment.refunded events of refunds "+strings.Join(ids(missing), ", "), missing[0].Created)})
		}
	}
	return nil
}

// The fixes of what is missing at the provider.
const (
	missingPaymentFix      = "none from the provider: check the payment at the provider (another account or environment?) and the events that created it here (payhook events list)"
	missingSubscriptionFix = "none from the provider: check the subscription at the provider (another account or environment?) and the events that created it here (payhook events list)"
)

// payment compares one listed payment, with each of its disputes: the
// payment is charged back when any of them is open or lost, and each
// dispute's chargeback and win must be posted here as it stands at the
// provider (a dispute won that payhook never saw moves nothing either way).
func (c *comparer) payment(p adapter.Object, refunds, disputes []adapter.Object) error {
	want := p
	if want.RefundedAmount < 0 {
		want.RefundedAmount = 0
		for _, r := range refunds {
			if r.Status == "succeeded" {
				want.RefundedAmount += r.Amount
			}
		}
		want.Status = paymentStatus(want.Amount, want.RefundedAmount)
	}
	for _, d := range disputes {
		if disputeState(d.Status) == "charged_back" {
			want.Status = "charged_back"
		}
	}
	got, err := billing.GetPayment(c.ctx, c.db, c.source, p.Ref)
	if errors.Is(err, payhook.ErrNotFound) {
		// One made before the window (listed for the Slack) is not
		// compared: its open difference is not found fixed either.
		if !p.Created.Before(c.since) {
			c.compare(adapter.KindPayment, p.Ref)
			c.add(Difference{Kind: adapter.KindPayment, Ref: p.Ref, What: MissingHere,
				Fix: c.backfillFix("the payment's events (its capture, refunds, dispute)", p.Created)})
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", c.source, err)
	}
	c.compare(adapter.KindPayment, p.Ref)
	var fields []Field
	diff := func(name, here, provider string) {
		if here != provider {
			fields = append(fields, Field{Name: name, Here: here, Provider: provider})
		}
	}
	// Amounts in minor units, each with its side's currency: 1000 is
	// ten euros or a thousand yen.
	money := func(name string, here, provider int64) {
		if here != provider {
			fields = append(fields, Field{Name: name, Here: fmt.Sprint(here), Provider: fmt.Sprint(provider),
				HereCurrency: strings.ToUpper(got.Currency), ProviderCurrency: want.Currency})
		}
	}
	diff("status", got.Status, want.Status)
	money("amount", got.Amount, want.Amount)
	diff("currency", strings.ToUpper(got.Currency), want.Currency)
	money("refunded_amount", got.RefundedAmount, want.RefundedAmount)
	var posts []billing.PostingView
	if len(refunds) > 0 || len(disputes) > 0 {
		if posts, err = billing.ListPostings(c.ctx, c.db, c.source, p.Ref); err != nil {
			return fmt.Errorf("reconcile %s: %w", c.source, err)
		}
	}
	fix := ""
	for _, d := range disputes {
		here, provider := disputeHere(posts, d.Ref), disputeState(d.Status)
		if here == provider || provider == "" || (provider == "won" && here == "none") {
			continue
		}
		diff("dispute "+d.Ref, here, provider)
		if fix != "" {
			continue
		}
		switch {
		case here == "none":
			fix = c.backfillFix("the payment.charged_back event of dispute "+d.Ref, d.Created)
		case provider == "won":
			fix = c.backfillFix("the payment.chargeback_won event of dispute "+d.Ref, d.Created)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	if missing := unpostedRefunds(posts, refunds); len(missing) > 0 {
		fix = c.backfillFix("the payment.refunded events of refunds "+strings.Join(ids(missing), ", "), missing[0].Created)
	}
	if fix == "" {
		fix = c.backfillFix("the payment's events", p.Created)
	}
	c.add(Difference{Kind: adapter.KindPayment, Ref: p.Ref, What: Different, Fields: fields, Fix: fix})
	return nil
}

// disputeState is what a listed dispute does to its payment:
// "charged_back" (open or lost: its chargeback stands), "won" (its
// chargeback was given back), "" for a status that moves nothing.
func disputeState(status string) string {
	switch status {
	case "open", "lost":
		return "charged_back"
	case "won":
		return "won"
	}
	return ""
}

// disputeHere is what payhook posted of dispute ref, in disputeState's
// words: "won" (its chargeback_won posting), "charged_back" (its
// chargeback posting only) or "none".
func disputeHere(posts []billing.PostingView, ref string) string {
	has := func(key string) bool {
		return slices.ContainsFunc(posts, func(p billing.PostingView) bool { return p.FactKey == key })
	}
	switch {
	case has("chargeback_won:" + ref):
		return "won"
	case has("chargeback:" + ref):
		return "charged_back"
	}
	return "none"
}

// missingRefunds returns the succeeded refunds of payment ref that
// payhook has no posting of.
func (c *comparer) missingRefunds(ref string, refunds []adapter.Object) ([]adapter.Object, error) {
	if len(refunds) == 0 {
		return nil, nil
	}
	posts, err := billing.ListPostings(c.ctx, c.db, c.source, ref)
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", c.source, err)
	}
	return unpostedRefunds(posts, refunds), nil
}

// unpostedRefunds returns the succeeded refunds of which posts, a
// payment's postings, have none.
func unpostedRefunds(posts []billing.PostingView, refunds []adapter.Object) []adapter.Object {
	var out []adapter.Object
	for _, r := range refunds {
		if r.Status == "succeeded" && !slices.ContainsFunc(posts, func(p billing.PostingView) bool { return p.FactKey == "refund:"+r.Ref }) {
			out = append(out, r)
		}
	}
	return out
}

// paymentStatus is a fiat payment's status by what refunds took.
func paymentStatus(amount, refunded int64) string {
	switch {
	case refunded <= 0:
		return "succeeded"
	case refunded < amount:
		return "partially_refunded"
	}
	return "refunded"
}

// subscriptions compares the listed subscriptions and those payhook
// stored in the window. The provider lists by its own creation time,
// payhook's window is of when payhook first stored each one: a
// subscription created at the provider before the window and first seen
// by payhook inside it (the renewal of a subscription older than
// payhook's deployment) is not listed. Each one stored in the window and
// not listed is retrieved, when the client is an adapter.ObjectGetter,
// and compared as a listed one (status, plan), wherever its creation
// time falls; only a 404 makes it missing at the provider (see
// unlisted). Without an ObjectGetter such a one is neither compared nor
// reported: nothing says whether the provider has it.
func (c *comparer) subscriptions(listed []adapter.Object) error {
	atProvider := map[string]bool{}
	for _, s := range listed {
		atProvider[s.Ref] = true
		got, err := billing.GetSubscription(c.ctx, c.db, c.source, s.Ref)
		if errors.Is(err, payhook.ErrNotFound) {
			if !s.Created.Before(c.since) {
				c.compare(adapter.KindSubscription, s.Ref)
				c.add(Difference{Kind: adapter.KindSubscription, Ref: s.Ref, What: MissingHere,
					Fix: c.backfillFix("the subscription's events", s.Created)})
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reconcile %s: %w", c.source, err)
		}
		c.subscription(s, got)
	}
	here, err := billing.ListSubscriptions(c.ctx, c.db, billing.SubscriptionFilter{Source: c.source, CreatedFrom: c.since, Limit: 1 << 30})
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", c.source, err)
	}
	for i := range here {
		s := &here[i]
		if atProvider[s.Ref] {
			continue // compared above
		}
		o, got, err := c.unlisted(adapter.KindSubscription, s.Ref)
		if err != nil {
			return err
		}
		if got == retrieved {
			c.subscription(o, s)
		}
		// Not retrieved (cannot tell, or capped): neither compared nor
		// reported; a 404 is reported below.
	}
	return c.missingAtProvider(adapter.KindSubscription, listed, missingSubscriptionFix)
}

// What unlisted did with an object.
const (
	// retrieved: the provider answered with it.
	retrieved = iota
	// notFound: the provider answered 404; the object is reported
	// missing at the provider by missingAtProvider, once those 404s are
	// trusted.
	notFound
	// cannotRetrieve: the client retrieves no such object (no
	// ObjectGetter, or none of that kind): nothing says whether the
	// provider has it.
	cannotRetrieve
	// capped: not retrieved, past Config.MaxRetrieves; counted in
	// Report.Unchecked.
	capped
)

// goneRef is an object whose retrieve answered 404, and that answer.
type goneRef struct {
	ref string
	err error
}

// unlisted retrieves the object kind ref that payhook stored in the
// window and the provider's list did not have, through the getter and
// the retrier (a 429, a 5xx retried; any other error fails the run), as
// long as the run's budget of retrieves lasts. A 404 is recorded for
// missingAtProvider; an object retrieved is recorded in c.retrieved.
func (c *comparer) unlisted(kind, ref string) (adapter.Object, int, error) {
	if c.getter == nil {
		return adapter.Object{}, cannotRetrieve, nil
	}
	if c.budget <= 0 {
		c.rep.Unchecked[kind]++
		c.unchecked[Difference{Kind: kind, Ref: ref}.subject(c.source)] = true
		return adapter.Object{}, capped, nil
	}
	o, err := c.get(kind, ref)
	switch {
	case errors.Is(err, payhook.ErrNotFound):
		c.budget--
		c.gone[kind] = append(c.gone[kind], goneRef{ref: ref, err: err})
		return adapter.Object{}, notFound, nil
	case errors.Is(err, payhook.ErrInvalid):
		return adapter.Object{}, cannotRetrieve, nil
	case err != nil:
		return adapter.Object{}, 0, err
	}
	c.budget--
	c.retrieved = append(c.retrieved, o)
	return o, retrieved, nil
}

// get retrieves the object kind ref through the retrier; an answer with
// the object says that the client's retrieves of kind reach the
// provider (c.answered).
func (c *comparer) get(kind, ref string) (adapter.Object, error) {
	var o adapter.Object
	err := c.retrier.object(c.ctx, "reconcile "+c.source, kind, ref, func() (err error) {
		o, err = c.getter.GetObject(c.ctx, kind, ref)
		return err
	})
	if err == nil {
		c.answered[kind] = true
	}
	return o, err
}

// missingAtProvider reports each object of kind whose retrieve answered
// 404 as missing at the provider (fix its Difference's Fix), once the
// client's 404s of kind are trusted: a 404 says that the provider has no
// such object only if the same client answered a retrieve of kind with
// the object in this run. When none of its retrieves of kind did (every
// one was a 404), the first object of kind that the provider listed
// (listed) is retrieved to check; without one, or when that retrieve too
// answers 404, the run fails with an error naming the URL that answered:
// a wrong api_url, or a proxy answering 404 to everything, is not taken
// for a provider that lost every object.
func (c *comparer) missingAtProvider(kind string, listed []adapter.Object, fix string) error {
	gone := c.gone[kind]
	if len(gone) == 0 {
		return nil
	}
	if !c.answered[kind] {
		if len(listed) == 0 {
			return fmt.Errorf("reconcile %s: the retrieve of each of the %d %ss payhook stored in the window that the provider's list did not have answered 404 (%s), "+
				"and the list has no %s to check that this API answers retrieves: a 404 is taken for a missing %s only once the same API answered a retrieve of one; "+
				"check the source's api_url, and any proxy in front of it",
				c.source, len(gone), kind, answeredAt(gone[0].err), kind, kind)
		}
		probe := listed[0]
		_, err := c.get(kind, probe.Ref)
		switch {
		case errors.Is(err, payhook.ErrNotFound):
			return fmt.Errorf("reconcile %s: the API answered 404 to the retrieve of %s %s, which its own list has (%s): it does not answer retrieves, "+
				"so its 404s for the %d %ss the list did not have say nothing; check the source's api_url, and any proxy in front of it",
				c.source, kind, probe.Ref, answeredAt(err), len(gone), kind)
		case err != nil:
			return err
		}
	}
	for _, g := range gone {
		c.compare(kind, g.ref)
		c.add(Difference{Kind: kind, Ref: g.ref, What: MissingAtProvider, Fix: fix})
	}
	return nil
}

// answeredAt says where a retrieve's 404 came from: "GET <url>" when
// the client's error says its address, else the error.
func answeredAt(err error) string {
	var ae *adapter.APIError
	if errors.As(err, &ae) && ae.URL != "" {
		return ae.Method + " " + ae.URL
	}
	return err.Error()
}

// subscription compares subscription s at the provider (listed or
// retrieved) with got, payhook's.
func (c *comparer) subscription(s adapter.Object, got *billing.SubscriptionView) {
	c.compare(adapter.KindSubscription, s.Ref)
	var fields []Field
	if got.Status != s.Status {
		fields = append(fields, Field{Name: "status", Here: got.Status, Provider: s.Status})
	}
	if got.Plan != s.Plan {
		fields = append(fields, Field{Name: "plan", Here: got.Plan, Provider: s.Plan})
	}
	if len(fields) == 0 {
		return
	}
	// The event missed is later than the snapshot payhook holds: a
	// subscription created long ago (retrieved) is not backfilled from
	// its creation.
	from := s.Created
	if from.Before(c.since) && got.ProviderUpdatedAt.After(from) {
		from = got.ProviderUpdatedAt
	}
	c.add(Difference{Kind: adapter.KindSubscription, Ref: s.Ref, What: Different, Fields: fields,
		Fix: c.backfillFix("the subscription's latest event", from)})
}

func ids(objs []adapter.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Ref
	}
	return out
}

// occurrence identifies a difference: the same one found again raises
// nothing.
func (d Difference) occurrence(source string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s/%s/%s", source, d.Kind, d.Ref, d.What)
	for _, f := range d.Fields {
		fmt.Fprintf(&b, "/%s:%s→%s", f.Name, f.Here, f.Provider)
	}
	return b.String()
}

// subject is the subject of the difference's alert: source/kind/ref.
func (d Difference) subject(source string) string { return source + "/" + d.Kind + "/" + d.Ref }

// clearFixed acknowledges, inside tx, the source's open AlertDifference
// alerts whose subject this run compared and no longer reports: the
// difference was fixed. An object outside the run's window (a shorter
// --since) was not looked at, so its alert stays open. Each is
// billing.ResolveAlert (a conditional UPDATE: still open), so a concurrent
// acknowledgement or raise is not undone by this read; the difference
// found again later, even the very same, raises the alert again.
func clearFixed(ctx context.Context, tx *billing.Tx, source string, compared, reported map[string]bool) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, subject FROM payhook_alerts
		WHERE kind = $1 AND acknowledged = FALSE`, AlertDifference)
	if err != nil {
		return fmt.Errorf("reconcile %s: open differences: %w", source, err)
	}
	var fixed []int64
	for rows.Next() {
		var id int64
		var subject string
		if err := rows.Scan(&id, &subject); err != nil {
			rows.Close()
			return fmt.Errorf("reconcile %s: open differences: %w", source, err)
		}
		if compared[subject] && !reported[subject] {
			fixed = append(fixed, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reconcile %s: open differences: %w", source, err)
	}
	for _, id := range fixed {
		if _, err := billing.ResolveAlert(ctx, tx, AlertDifference, id); err != nil {
			return fmt.Errorf("reconcile %s: clear fixed difference: %w", source, err)
		}
	}
	return nil
}

// message is the alert's text.
func (d Difference) message(source string) string {
	var parts []string
	for _, f := range d.Fields {
		parts = append(parts, fmt.Sprintf("%s %q here, %q at the provider", f.Name, f.HereShown(), f.ProviderShown()))
	}
	s := fmt.Sprintf("source %s: %s %s %s", source, d.Kind, d.Ref, strings.ReplaceAll(d.What, "_", " "))
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	return s + ". Fix: " + d.Fix
}

// raise raises, in one transaction, the alert of each difference (once)
// and of each API version the listed and retrieved objects came in other
// than the pinned one (once per version), and clears the fixed
// differences of the compared objects.
func raise(ctx context.Context, cfg Config, at time.Time, rep *Report, listed map[string][]adapter.Object, retrieved []adapter.Object, compared map[string]bool) error {
	tx, err := billing.Begin(ctx, cfg.DB, at)
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", cfg.Source, err)
	}
	defer tx.Rollback()
	reported := map[string]bool{}
	for i := range rep.Differences {
		d := &rep.Differences[i]
		subject := d.subject(cfg.Source)
		reported[subject] = true
		d.Alerted, err = billing.RaiseAlertOnce(ctx, tx, AlertDifference, subject, d.occurrence(cfg.Source), d.message(cfg.Source))
		if err != nil {
			return fmt.Errorf("reconcile %s: %w", cfg.Source, err)
		}
	}
	if err := clearFixed(ctx, tx, cfg.Source, compared, reported); err != nil {
		return err
	}
	if cfg.APIVersion != "" {
		drift := func(how string, o adapter.Object) error {
			if o.APIVersion == "" || o.APIVersion == cfg.APIVersion {
				return nil
			}
			if _, err := billing.RaiseVersionDrift(ctx, tx, cfg.Source, cfg.APIVersion, o.APIVersion, how+" "+o.Kind+" "+o.Ref); err != nil {
				return fmt.Errorf("reconcile %s: %w", cfg.Source, err)
			}
			return nil
		}
		for _, kind := range adapter.ObjectKinds {
			for _, o := range listed[kind] {
				if err := drift("listed", o); err != nil {
					return err
				}
			}
		}
		for _, o := range retrieved {
			if err := drift("retrieved", o); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reconcile %s: commit alerts: %w", cfg.Source, err)
	}
	return nil
}
