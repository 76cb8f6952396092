package refunds_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/refunds"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/internal/stripemock"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/stripe"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// nowhere is a Sender that delivers nothing: only the API is under test.
type nowhere struct{}

func (nowhere) Send(deliver.Target, flavour.Event)  {}
func (nowhere) Log(string) []deliver.Attempt        { return nil }
func (nowhere) Resend(string, deliver.Target) error { return nil }

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func openDB(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// capture stores a captured payment in billing, as its webhook would.
func capture(t *testing.T, db *store.DB, source, ref string, amount int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, db, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := billing.ApplyOutcome(ctx, tx, source, []billing.Fact{billing.Captured{Payment: billing.Payment{
		Ref: ref, Amount: amount, Currency: "EUR", CapturedAt: t0}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// countingRefunder counts the calls that reach the provider.
type countingRefunder struct {
	adapter.Refunder
	calls int
}

func (c *countingRefunder) Refund(ctx context.Context, r adapter.RefundRequest) (adapter.RefundResult, error) {
	c.calls++
	return c.Refunder.Refund(ctx, r)
}

// billeteWorld is the simulator with one payment of 1000, known to billing.
func billeteWorld(t *testing.T, db *store.DB) (*sim.Provider, string, *countingRefunder) {
	return simWorld(t, db, flavour.Billete())
}

// simWorld is the simulator of flavour f (billete or stripe) with one
// payment of 1000, known to billing, and its provider's Refunder.
func simWorld(t *testing.T, db *store.DB, f flavour.Flavour) (*sim.Provider, string, *countingRefunder) {
	t.Helper()
	p, err := sim.New(sim.Config{Flavour: f, Sender: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(p.Handler())
	t.Cleanup(api.Close)
	co, err := p.CreateCheckout(sim.EnvTest, 1000, "eur", "ord_1")
	if err != nil {
		t.Fatal(err)
	}
	pay, err := p.CompleteCheckout(sim.EnvTest, co.ID)
	if err != nil {
		t.Fatal(err)
	}
	capture(t, db, "shop", pay.ID, 1000)
	key, _ := p.Keys()
	if f.Provider() == "stripe" {
		return p, pay.ID, &countingRefunder{Refunder: &stripe.Client{BaseURL: api.URL, Key: key}}
	}
	return p, pay.ID, &countingRefunder{Refunder: &billete.Client{BaseURL: api.URL, Key: key}}
}

func refunded(t *testing.T, p *sim.Provider, id string) int64 {
	t.Helper()
	pay, err := p.GetPayment(sim.EnvTest, id)
	if err != nil {
		t.Fatal(err)
	}
	return pay.RefundedAmount
}

// providers are the simulator's flavours whose API refunds.
var providers = []func() flavour.Flavour{flavour.Billete, flavour.Stripe}

func TestRefundTwiceRefundsOnce(t *testing.T) {
	for _, f := range providers {
		t.Run(f().Provider(), func(t *testing.T) { testRefundTwice(t, f()) })
	}
}

func testRefundTwice(t *testing.T, f flavour.Flavour) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		p, id, c := simWorld(t, db, f)
		cfg := refunds.Config{DB: db, Refunder: c, Now: func() time.Time { return t0 }}
		ask := refunds.Ask{Payment: id, Amount: 300}
		r, err := refunds.Refund(ctx, cfg, ask)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != refunds.StatusCompleted || r.Seq != 1 || r.Key != "refund-shop-"+id+"-1" || r.ProviderRef == "" {
			t.Fatalf("first run: %+v", r)
		}
		if _, err := refunds.Refund(ctx, cfg, ask); !errors.Is(err, payhook.ErrInvalid) {
			t.Fatalf("second run with the same arguments: %v, want a refusal", err)
		}
		if got := refunded(t, p, id); got != 300 || c.calls != 1 {
			t.Fatalf("provider refunded %d in %d calls, want 300 in 1", got, c.calls)
		}
		// --again refunds again, with the next seq's key.
		ask.Again = true
		r2, err := refunds.Refund(ctx, cfg, ask)
		if err != nil || r2.Seq != 2 || r2.ProviderRef == r.ProviderRef {
			t.Fatalf("--again: %+v, %v", r2, err)
		}
		if got := refunded(t, p, id); got != 600 {
			t.Fatalf("provider refunded %d, want 600", got)
		}
		// Billing has not seen the webhooks (none is delivered here): the
		// completed requests' 600 count all the same.
		calls := c.calls
		if _, err := refunds.Refund(ctx, cfg, refunds.Ask{Payment: id, Amount: 500, Again: true}); !errors.Is(err, payhook.ErrInvalid) || c.calls != calls {
			t.Fatalf("500 of the 400 left: %v after %d calls, want a refusal before any call", err, c.calls-calls)
		}
	})
}

func TestRefundCrashBeforeRecord(t *testing.T) {
	for _, f := range providers {
		t.Run(f().Provider(), func(t *testing.T) { testRefundCrash(t, f()) })
	}
}

func testRefundCrash(t *testing.T, f flavour.Flavour) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		p, id, c := simWorld(t, db, f)
		failed := false
		cfg := refunds.Config{DB: db, Refunder: c, Now: func() time.Time { return t0 },
			Record: func(ctx context.Context, db *store.DB, r *refunds.Request, res adapter.RefundResult, at time.Time) error {
				if !failed {
					failed = true
					return errors.New("killed before recording")
				}
				return refunds.Complete(ctx, db, r, res, at)
			}}
		ask := refunds.Ask{Payment: id} // all that is left
		if _, err := refunds.Refund(ctx, cfg, ask); err == nil {
			t.Fatal("the record step failed but Refund did not say so")
		}
		rs, err := refunds.List(ctx, db, "shop", id)
		if err != nil || len(rs) != 1 || rs[0].Status != refunds.StatusPending {
			t.Fatalf("after the crash: %+v, %v", rs, err)
		}
		r, err := refunds.Refund(ctx, cfg, ask)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Reused || !r.Replayed || r.Seq != 1 || r.Status != refunds.StatusCompleted || r.Attempts != 2 {
			t.Fatalf("retry: %+v", r)
		}
		if got := refunded(t, p, id); got != 1000 || c.calls != 2 {
			t.Fatalf("provider refunded %d in %d calls, want 1000 once (2 calls, one key)", got, c.calls)
		}
	})
}

func TestRefundRefusedBeforeAnyCall(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		p, id, c := billeteWorld(t, db)
		cfg := refunds.Config{DB: db, Refunder: c, Now: func() time.Time { return t0 }}
		for _, tc := range []struct {
			name string
			ask  refunds.Ask
			want error
		}{
			{"more than the payment keeps", refunds.Ask{Payment: id, Amount: 1001}, payhook.ErrInvalid},
			{"negative amount", refunds.Ask{Payment: id, Amount: -1}, payhook.ErrInvalid},
			{"beyond MaxAmount", refunds.Ask{Payment: id, Amount: payhook.MaxAmount + 1}, payhook.ErrMalformed},
			{"unknown payment", refunds.Ask{Payment: "pay_nope", Amount: 1}, payhook.ErrNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := refunds.Refund(ctx, cfg, tc.ask); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				rs, _ := refunds.List(ctx, db, "shop", id)
				if c.calls != 0 || len(rs) != 0 || refunded(t, p, id) != 0 {
					t.Fatalf("refused, yet %d calls and %d requests", c.calls, len(rs))
				}
			})
		}
	})
}

func TestRefundPendingOtherAmountRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		_, id, _ := billeteWorld(t, db)
		if _, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 200}, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 300}, t0); !errors.Is(err, payhook.ErrInvalid) {
			t.Fatalf("another amount while one is pending: %v", err)
		}
		r, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 200}, t0)
		if err != nil || !r.Reused || r.Seq != 1 {
			t.Fatalf("same amount: %+v, %v", r, err)
		}
	})
}

func TestStripeMockAcceptsRefund(t *testing.T) {
	base := stripemock.Start(t)
	for _, ref := range []string{"pi_123", "ch_123"} {
		c := &stripe.Client{BaseURL: base, Key: "sk_test_123"}
		res, err := c.Refund(context.Background(), adapter.RefundRequest{Payment: ref, Amount: 100, Reason: "requested_by_customer", Key: "refund-stripe-" + ref + "-1"})
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if res.Ref == "" {
			t.Fatalf("%s: no refund id in %+v", ref, res)
		}
	}
}

// TestRefundProviderRefuses: a refund the provider refuses (here: billing
// does not know yet of a refund made elsewhere, the provider does) is
// failed, not pending, and the next run makes a new request.
func TestRefundProviderRefuses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		p, id, c := billeteWorld(t, db)
		if _, err := p.Refund(sim.EnvTest, id, 900, "", false); err != nil {
			t.Fatal(err)
		}
		cfg := refunds.Config{DB: db, Refunder: c, Now: func() time.Time { return t0 }}
		for seq := 1; seq <= 2; seq++ {
			r, err := refunds.Refund(ctx, cfg, refunds.Ask{Payment: id, Amount: 500})
			if !errors.Is(err, payhook.ErrInvalid) || r == nil || r.Status != refunds.StatusFailed || r.Seq != seq || r.Error == "" {
				t.Fatalf("run %d: %+v, %v; want request %d failed", seq, r, err, seq)
			}
		}
		if got := refunded(t, p, id); got != 900 {
			t.Fatalf("provider refunded %d, want the 900 made elsewhere", got)
		}
	})
}

// TestPrepareConcurrent: runs preparing the same refund at once store one
// request; each of them gets it, or is told another run stored it.
func TestPrepareConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		_, id, _ := billeteWorld(t, db)
		const n = 8
		errs := make(chan error, n)
		for range n {
			go func() {
				r, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 100}, t0)
				if err == nil && r.Seq != 1 {
					err = fmt.Errorf("prepared request %d, want 1", r.Seq)
				}
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil && !errors.Is(err, payhook.ErrLocked) && !store.IsLockTimeout(err) && !strings.Contains(err.Error(), "locked") {
				t.Error(err)
			}
		}
		rs, err := refunds.List(ctx, db, "shop", id)
		if err != nil || len(rs) != 1 {
			t.Fatalf("%d requests stored (%v), want 1", len(rs), err)
		}
	})
}

// TestRequestKeys: no two payments share an idempotency key, however
// their names read with dashes (payment b-c of source a, payment c of
// source a-b), and a key fits the 255 characters Stripe takes; names
// without a dash keep the readable refund-<source>-<payment>-<seq>.
func TestRequestKeys(t *testing.T) {
	long := strings.Repeat("p", 255)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		keys := map[string]string{}
		for _, c := range []struct{ source, payment, want string }{
			{"a", "b-c", ""},
			{"a-b", "c", ""},
			{"a", "b_c", "refund-a-b_c-1"},
			{"shop", long, ""},
		} {
			capture(t, db, c.source, c.payment, 1000)
			r, err := refunds.Prepare(ctx, db, refunds.Ask{Source: c.source, Payment: c.payment, Amount: 100}, t0)
			if err != nil {
				t.Fatalf("refund of %s in %s: %v", c.payment, c.source, err)
			}
			if other, ok := keys[r.Key]; ok {
				t.Errorf("%s/%s has the key %s of %s", c.source, c.payment, r.Key, other)
			}
			keys[r.Key] = c.source + "/" + c.payment
			if c.want != "" && r.Key != c.want || len(r.Key) > 255 || !strings.HasPrefix(r.Key, "refund-") || !strings.HasSuffix(r.Key, "-1") {
				t.Errorf("%s/%s: key %q; want %q, at most 255 bytes", c.source, c.payment, r.Key, c.want)
			}
		}
	})
}

// TestRefundPendingPastKeyLifetime: a request pending past KeyLifetime is
// not sent again (its key may be forgotten at the provider: a new refund)
// but refused before any call; Abandon gives it up and refunds with a new
// request and key; Abandon with nothing pending is refused.
func TestRefundPendingPastKeyLifetime(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		p, id, c := billeteWorld(t, db)
		if _, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 200}, t0); err != nil {
			t.Fatal(err) // stored, then the run died before its call
		}
		at := func(d time.Duration) refunds.Config {
			return refunds.Config{DB: db, Refunder: c, Now: func() time.Time { return t0.Add(d) }}
		}
		r, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id}, t0.Add(refunds.KeyLifetime-time.Minute))
		if err != nil || !r.Reused || r.Seq != 1 {
			t.Fatalf("within the key's lifetime: %+v, %v; want request 1 reused", r, err)
		}
		if _, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Abandon: true}, t0.Add(refunds.KeyLifetime-time.Minute)); !errors.Is(err, payhook.ErrInvalid) {
			t.Fatalf("--abandon within the key's lifetime: %v; want a refusal (its key still refunds once)", err)
		}
		if _, err := refunds.Refund(ctx, at(refunds.KeyLifetime), refunds.Ask{Payment: id}); !errors.Is(err, payhook.ErrInvalid) ||
			!strings.Contains(err.Error(), "--abandon") {
			t.Fatalf("past the key's lifetime: %v; want a refusal naming --abandon", err)
		}
		if c.calls != 0 || refunded(t, p, id) != 0 {
			t.Fatalf("refused, yet %d calls", c.calls)
		}
		r, err = refunds.Refund(ctx, at(refunds.KeyLifetime), refunds.Ask{Payment: id, Amount: 200, Abandon: true})
		if err != nil || r.Seq != 2 || r.Status != refunds.StatusCompleted {
			t.Fatalf("abandoned and asked again: %+v, %v; want request 2 completed", r, err)
		}
		rs, err := refunds.List(ctx, db, "shop", id)
		if err != nil || len(rs) != 2 || rs[0].Status != refunds.StatusFailed || !strings.Contains(rs[0].Error, "abandoned") {
			t.Fatalf("requests: %+v, %v; want request 1 failed, abandoned", rs, err)
		}
		if got := refunded(t, p, id); got != 200 || c.calls != 1 {
			t.Fatalf("provider refunded %d in %d calls, want 200 in one", got, c.calls)
		}
		if _, err := refunds.Refund(ctx, at(refunds.KeyLifetime), refunds.Ask{Payment: id, Amount: 100, Abandon: true}); !errors.Is(err, payhook.ErrInvalid) {
			t.Fatalf("--abandon with nothing pending: %v; want ErrInvalid", err)
		}
	})
}

// TestRefundPendingPastKeyLifetimeOtherAmount: asked for another amount
// while a request pending past KeyLifetime waits, the refusal names
// --abandon; before, it said to finish that request first with its
// amount, which past the key's lifetime is refused in turn (and is what
// could refund twice).
func TestRefundPendingPastKeyLifetimeOtherAmount(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		_, id, _ := billeteWorld(t, db)
		if _, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 200}, t0); err != nil {
			t.Fatal(err)
		}
		_, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 300}, t0.Add(refunds.KeyLifetime))
		if !errors.Is(err, payhook.ErrInvalid) || !strings.Contains(err.Error(), "--abandon") || strings.Contains(err.Error(), "to finish it first") {
			t.Fatalf("another amount past the pending key's lifetime: %v; want a refusal naming --abandon", err)
		}
	})
}

// downRefunder fails every call as an unreachable provider does.
type downRefunder struct{}

func (downRefunder) Refund(context.Context, adapter.RefundRequest) (adapter.RefundResult, error) {
	return adapter.RefundResult{}, errors.New("connection refused")
}

// TestRefundAbandonWaitsForASend: a request sent (its attempt counted)
// less than the send window ago may still be under way at the provider:
// --abandon is refused until the window has passed, then gives it up.
func TestRefundAbandonWaitsForASend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		_, id, c := billeteWorld(t, db)
		sent := t0.Add(refunds.KeyLifetime - 5*time.Minute)
		if _, err := refunds.Prepare(ctx, db, refunds.Ask{Payment: id, Amount: 200}, t0); err != nil {
			t.Fatal(err)
		}
		down := refunds.Config{DB: db, Refunder: downRefunder{}, Now: func() time.Time { return sent }}
		if _, err := refunds.Refund(ctx, down, refunds.Ask{Payment: id}); err == nil {
			t.Fatal("a send to a provider down succeeded")
		}
		at := func(d time.Duration) refunds.Config {
			return refunds.Config{DB: db, Refunder: c, Now: func() time.Time { return sent.Add(d) }}
		}
		if _, err := refunds.Refund(ctx, at(5*time.Minute), refunds.Ask{Payment: id, Abandon: true}); !errors.Is(err, payhook.ErrLocked) {
			t.Fatalf("--abandon 5 minutes after a send: %v; want ErrLocked", err)
		}
		if c.calls != 0 {
			t.Fatalf("%d calls; want none", c.calls)
		}
		r, err := refunds.Refund(ctx, at(11*time.Minute), refunds.Ask{Payment: id, Abandon: true})
		if err != nil || r.Seq != 2 || r.Status != refunds.StatusCompleted {
			t.Fatalf("--abandon 11 minutes after the send: %+v, %v; want request 2 completed", r, err)
		}
	})
}

// hookRefunder sends through Refunder, then runs after before it answers:
// another run meanwhile.
type hookRefunder struct {
	adapter.Refunder
	after func()
}

func (h hookRefunder) Refund(ctx context.Context, r adapter.RefundRequest) (adapter.RefundResult, error) {
	res, err := h.Refunder.Refund(ctx, r)
	h.after()
	return res, err
}

// TestRefundAnsweredAfterAbandon: a send whose answer arrives after
// another run gave its request up (a process paused mid-call, a clock
// behind) refunded all the same: its success is not dropped by a
// Complete that finds the request no longer pending and says nothing;
// the request is recorded completed, which the provider says it is, and
// the run fails naming the refund made twice.
func TestRefundAnsweredAfterAbandon(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		p, id, c := billeteWorld(t, db)
		late := refunds.Config{DB: db, Refunder: c, Now: func() time.Time { return t0.Add(refunds.KeyLifetime + time.Hour) }}
		var abandoned *refunds.Request
		slow := refunds.Config{DB: db, Now: func() time.Time { return t0 }, Refunder: hookRefunder{Refunder: c, after: func() {
			var err error
			if abandoned, err = refunds.Refund(ctx, late, refunds.Ask{Payment: id, Amount: 200, Abandon: true}); err != nil {
				t.Errorf("--abandon while the first send was under way: %v", err)
			}
		}}}
		r, err := refunds.Refund(ctx, slow, refunds.Ask{Payment: id, Amount: 200})
		if abandoned == nil || abandoned.Seq != 2 {
			t.Fatalf("the abandoning run made %+v; want request 2", abandoned)
		}
		if got := refunded(t, p, id); got != 400 {
			t.Fatalf("the provider refunded %d; want 400 (both keys)", got)
		}
		if err == nil {
			t.Errorf("the run whose request was abandoned while its refund went through succeeded quietly: %+v", r)
		}
		reqs, err := refunds.List(ctx, db, "shop", id)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range reqs {
			if q.Status != refunds.StatusCompleted {
				t.Errorf("request %d is %s (%s); the provider refunded it: want completed", q.Seq, q.Status, q.Error)
			}
		}
		// What both requests took is counted: 700 more is refused before
		// any call.
		calls := c.calls
		if _, err := refunds.Refund(ctx, late, refunds.Ask{Payment: id, Amount: 700}); !errors.Is(err, payhook.ErrInvalid) || c.calls != calls {
			t.Errorf("a refund of 700 after 400 went out of 1000: %v, %d calls; want ErrInvalid before any call", err, c.calls-calls)
		}
	})
}
