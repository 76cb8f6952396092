package process_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
	"github.com/payhook/payhook/store"
)

// nowhere is a Sender that delivers nothing: the events are read from the
// simulator's events list, as a backfill reads them.
type nowhere struct{}

func (nowhere) Send(deliver.Target, flavour.Event)  {}
func (nowhere) Log(string) []deliver.Attempt        { return nil }
func (nowhere) Resend(string, deliver.Target) error { return nil }

// faulty is the simulator's API that answers with fault while it is set:
// a status (503, 429 with Retry-After, 404) or 0 to hang until the
// request is canceled.
type faulty struct {
	api   http.Handler
	fault atomic.Int32 // -1: none
}

func (f *faulty) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch fault := f.fault.Load(); {
	case fault < 0 || strings.Contains(r.URL.Path, "events"):
		f.api.ServeHTTP(w, r)
	case fault == 0:
		<-r.Context().Done()
	default:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(int(fault))
	}
}

// world is one simulated provider whose checkout was paid, refunded in
// part (300 of 1000), charged back, then the dispute won, and the events
// of it that payhook gets: the payment's and the chargeback's; the
// refund's and the win's were dropped.
type world struct {
	api     *faulty
	client  adapter.Client
	payment string
	events  []*payhook.Event // payment succeeded, then charged back
	// want is the payment as applied from the objects' current state.
	want billing.PaymentView
}

func newWorld(t *testing.T, fl flavour.Flavour) *world {
	t.Helper()
	p, err := sim.New(sim.Config{Flavour: fl, Sender: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{api: &faulty{api: p.Handler()}}
	w.api.fault.Store(-1)
	srv := httptest.NewServer(w.api)
	t.Cleanup(srv.Close)
	key, _ := p.Keys()
	chk, _ := p.CreateCheckout(sim.EnvTest, 1000, "usd", "ord_1")
	pay, err := p.CompleteCheckout(sim.EnvTest, chk.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.payment = pay.ID
	if _, err := p.Refund(sim.EnvTest, pay.ID, 300, "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Chargeback(sim.EnvTest, pay.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WinChargeback(sim.EnvTest, pay.ID); err != nil {
		t.Fatal(err)
	}
	w.client, err = provider.NewClient(fl.Provider(), adapter.ClientConfig{BaseURL: srv.URL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	page, err := w.client.(adapter.EventLister).ListEvents(context.Background(), adapter.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	// The payment's event, then the chargeback's (for Paddle, whose
	// refund and win are an adjustment.created too, the adjustment of
	// action chargeback).
	a, _ := provider.Lookup(fl.Provider())
	wanted := map[string]bool{"payment.succeeded": true, "payment_intent.succeeded": true, "transaction.paid": true,
		"payment.charged_back": true, "charge.dispute.created": true, "adjustment.created": true}
	for _, body := range page.Events {
		env, err := a.Envelope(body)
		if err != nil {
			t.Fatal(err)
		}
		if wanted[env.Type] && (env.Type != "adjustment.created" || bytes.Contains(body, []byte(`"action":"chargeback"`))) {
			wanted[env.Type] = false
			w.events = append(w.events, &payhook.Event{EventID: env.EventID, Type: env.Type,
				OccurredAt: env.OccurredAt, Payload: body})
		}
	}
	if len(w.events) != 2 {
		t.Fatalf("the simulator listed %d payment and chargeback events; want 2", len(w.events))
	}
	return w
}

// fetch is the client's Fetch, whose request times out at once while the
// API hangs (as the job's timeout would end it).
func (w *world) fetch(ctx context.Context, ev *payhook.Event) ([]byte, error) {
	if w.api.fault.Load() == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
	}
	return w.client.Fetch(ctx, ev)
}

// ingest stores copies of w's events for source.
func (w *world) ingest(t *testing.T, q *jobs.Queue, source string, now time.Time) []*payhook.Event {
	t.Helper()
	var evs []*payhook.Event
	for _, e := range w.events {
		cp := *e
		cp.Source, cp.ReceivedAt = source, now
		evs = append(evs, &cp)
	}
	if _, err := q.Ingest(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// status returns the payment's status in source's billing state.
func status(t *testing.T, db *store.DB, source, ref string) string {
	t.Helper()
	p, err := billing.GetPayment(context.Background(), db, source, ref)
	if err != nil {
		t.Fatal(err)
	}
	return p.Status
}

// TestTheResourceDecides: events delivered after their object changed
// are applied from its current state, fetched from the simulator's API
// in each flavour's shape. The chargeback event, the dispute won since,
// applies the win too: the payment holds its money. The payment event,
// refunded since, applies the refund too where the provider's payment
// says its refunds (Stripe's payment intent with its latest charge's
// refunds, Paddle's transaction with its adjustments; billete's payment
// does not list them). A source without credentials applies the
// payloads: charged back. A fetch
// that fails (timeout, 503, 404) fails the attempt with nothing applied,
// and one refused for the rate limit (429) puts the event off for the
// Retry-After and pauses the source's reads as long, counted as no
// attempt; the next attempt applies the current state. The stored
// payloads stay byte-exact. (That a failed attempt's job is retried with
// backoff is the queue's contract for every error, tested in jobs.)
func TestTheResourceDecides(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		worlds := map[string]*world{}
		for _, fl := range []flavour.Flavour{flavour.Billete(), flavour.Stripe(), flavour.Paddle()} {
			worlds[fl.Name()] = newWorld(t, fl)
			worlds[fl.Name()].want = billing.PaymentView{Status: "partially_refunded", Amount: 1000, RefundedAmount: 300}
		}
		worlds["billete"].want = billing.PaymentView{Status: "succeeded", Amount: 1000}
		db := open(t, dbURL)
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		var sources []payhook.Source
		for name, w := range worlds {
			sources = append(sources,
				payhook.Source{Name: name + "-api", Provider: name, Fetch: w.fetch},
				payhook.Source{Name: name + "-payload", Provider: name})
		}
		q, err := jobs.New(db, config(t, db, sources, now))
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range worlds {
			plain := w.ingest(t, q, name+"-payload", now)
			for _, ev := range plain {
				if err := q.Process(ctx, ev.ID); err != nil {
					t.Fatalf("%s-payload: process %s: %v", name, ev.Type, err)
				}
			}
			if got := status(t, db, name+"-payload", w.payment); got != "charged_back" {
				t.Errorf("%s without credentials: payment %s; want charged_back, as the payload says", name, got)
			}

			evs := w.ingest(t, q, name+"-api", now)
			if err := q.Process(ctx, evs[0].ID); err != nil {
				t.Fatalf("%s-api: process %s: %v", name, evs[0].Type, err)
			}
			before := status(t, db, name+"-api", w.payment)
			chargeback := evs[1]
			// Every fault fails the attempt the same way, whatever the
			// provider: all of them once, on one provider.
			faults := []int32{503}
			if name == "stripe" {
				faults = []int32{0, 503, 404, 429}
			}
			attempts := 0
			for _, fault := range faults {
				w.api.fault.Store(fault)
				err := q.Process(ctx, chargeback.ID)
				w.api.fault.Store(-1)
				got, gerr := db.Event(ctx, chargeback.ID)
				if gerr != nil {
					t.Fatal(gerr)
				}
				if fault != 429 { // a 429 puts the event off: no attempt
					attempts++
				}
				if err == nil || got.Status != payhook.StatusReceived || got.Attempts != attempts {
					t.Fatalf("%s, fault %d: %v, event %s after %d attempts; want an error, the event received after %d",
						name, fault, err, got.Status, got.Attempts, attempts)
				}
				if put := strings.HasPrefix(err.Error(), "tried again in ") && strings.Contains(err.Error(), ": the provider refused the read for its rate limit: "); put != (fault == 429) {
					t.Fatalf("%s, fault %d: %v; want the event put off only for a 429", name, fault, err)
				}
				if s := status(t, db, name+"-api", w.payment); s != before {
					t.Fatalf("%s, fault %d: payment %s after a failed fetch; want it untouched (%s)", name, fault, s, before)
				}
			}
			// After the 429, the source's reads pause for its Retry-After
			// (1 s): the event is put off until then.
			for {
				err := q.Process(ctx, chargeback.ID)
				if err == nil {
					break
				}
				if !strings.HasPrefix(err.Error(), "tried again in ") {
					t.Fatalf("%s-api: process the chargeback: %v", name, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			got, err := db.Event(ctx, chargeback.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != payhook.StatusProcessed || string(got.Payload) != string(chargeback.Payload) {
				t.Errorf("%s-api: chargeback %s, payload changed %v; want processed, the payload as received",
					name, got.Status, string(got.Payload) != string(chargeback.Payload))
			}
			p, err := billing.GetPayment(ctx, db, name+"-api", w.payment)
			if err != nil {
				t.Fatal(err)
			}
			if want := w.want; p.Status != want.Status || p.Amount != want.Amount || p.RefundedAmount != want.RefundedAmount {
				t.Errorf("%s with credentials: payment %s of %d, %d refunded; want %s of %d, %d refunded",
					name, p.Status, p.Amount, p.RefundedAmount, want.Status, want.Amount, want.RefundedAmount)
			}
		}
	})
}
