package process_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// BenchmarkProcessBilling measures processing as payhook serve runs it:
// b.N stored Stripe checkout.session.completed events, each its own
// payment and order, processed by a started queue with the billing
// handlers (payment, capture posting and its entries, the order paid) and
// an outbox, until no event is left waiting and no fact untold or
// undelivered. Two facts per event go to one sink: log, serve's default
// (discarded here: each fact written with an untold row deleted once
// told), or hook, a recorded sink (an application's function: each fact
// written with a delivery row, sent by the batch and marked delivered).
// events/s counts the events; drained/s the same until the facts are
// told too. Run it against a durable cluster to count the flush:
//
//	PAYHOOK_TEST_POSTGRES=postgres://...durable... go test -run '^$' \
//	    -bench ProcessBilling -benchtime 5000x ./billing/process/
func BenchmarkProcessBilling(b *testing.B) {
	for _, engine := range dbtest.Engines {
		for _, sink := range []string{"log", "hook"} {
			b.Run(engine+"/"+sink, func(b *testing.B) { benchProcessBilling(b, engine, sink, checkout, nil) })
		}
	}
}

// BenchmarkProcessToldTwice is BenchmarkProcessBilling (log sink) for a
// sale whose every payment Stripe tells twice: b.N events, a completed
// checkout then the payment_intent.succeeded of its payment, whose
// capture changes nothing.
func BenchmarkProcessToldTwice(b *testing.B) {
	for _, engine := range dbtest.Engines {
		b.Run(engine, func(b *testing.B) {
			var db *store.DB
			benchProcessBilling(b, engine, "log", func(n int, at time.Time) *payhook.Event {
				if n%2 == 0 {
					return checkout(n/2, at)
				}
				return paymentIntent(n/2, at)
			}, func(_ context.Context, d *store.DB, _ time.Time) error { db = d; return nil })
			var payments, paid, alerts int
			if err := db.SQL.QueryRow(`SELECT (SELECT COUNT(*) FROM payhook_payments), (SELECT COUNT(*) FROM payhook_orders WHERE status = 'paid'),
				(SELECT COUNT(*) FROM payhook_alerts)`).Scan(&payments, &paid, &alerts); err != nil {
				b.Fatal(err)
			}
			if want := (b.N + 1) / 2; payments != want || paid != want || alerts != 0 {
				b.Fatalf("%d payments, %d orders paid, %d alerts: want %d, %d, 0", payments, paid, alerts, want, want)
			}
		})
	}
}

// BenchmarkProcessRenewals is BenchmarkProcessBilling (log sink) for a
// renewal wave: b.N Stripe customer.subscription.updated events, each a
// newer snapshot of a subscription stored before.
func BenchmarkProcessRenewals(b *testing.B) {
	for _, engine := range dbtest.Engines {
		b.Run(engine, func(b *testing.B) {
			var db *store.DB
			var now time.Time
			benchProcessBilling(b, engine, "log", renewal, func(ctx context.Context, d *store.DB, at time.Time) error {
				db, now = d, at
				for i := 0; i < b.N; i += 1000 {
					var events []billing.Facts
					for n := i; n < min(i+1000, b.N); n++ {
						events = append(events, billing.Facts{Source: "shop", Facts: []billing.Fact{billing.Subscription{
							Ref: fmt.Sprint("sub_", n), Customer: fmt.Sprint("cus_", n), Plan: "price_pro", Status: "active",
							UpdatedAt: now.Add(-time.Hour), CurrentPeriodEnd: now}}})
					}
					tx, err := billing.Begin(ctx, db, now)
					if err != nil {
						return err
					}
					if _, _, err := billing.ApplyMany(ctx, tx, events); err != nil {
						return errors.Join(err, tx.Rollback())
					}
					if err := tx.Commit(); err != nil {
						return err
					}
				}
				return nil
			})
			var renewed int
			if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_subscriptions WHERE current_period_end > $1`,
				db.TimeValue(now)).Scan(&renewed); err != nil {
				b.Fatal(err)
			}
			if renewed != b.N {
				b.Fatalf("%d of %d subscriptions renewed", renewed, b.N)
			}
		})
	}
}

// benchProcessBilling stores b.N events made by event (after before, if
// not nil), then processes them.
func benchProcessBilling(b *testing.B, engine, sink string, event func(int, time.Time) *payhook.Event,
	before func(context.Context, *store.DB, time.Time) error) {
	ctx := context.Background()
	db := open(b, dbtest.URL(b, engine))
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	box, err := outbox.New(outbox.Config{DB: db, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	if sink == "log" {
		err = box.Add("log", nil, outbox.Log{Logger: slog.New(slog.DiscardHandler)})
	} else {
		err = box.AddFunc("hook", nil, func(context.Context, outbox.Fact) error { return nil })
	}
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := process.New(process.Config{DB: db, Sources: []payhook.Source{{Name: "shop", Provider: "stripe"}},
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler), Outbox: box})
	if err != nil {
		b.Fatal(err)
	}
	q, err := jobs.New(db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if before != nil {
		if err := before(ctx, db, now); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i += 100 {
		var batch []*payhook.Event
		for j := i; j < min(i+100, b.N); j++ {
			batch = append(batch, event(j, now))
		}
		if _, err := q.Ingest(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if err := q.Start(ctx); err != nil {
		b.Fatal(err)
	}
	wait := func(query string) {
		for {
			var waiting bool
			if err := db.SQL.QueryRow(query).Scan(&waiting); err != nil {
				b.Fatal(err)
			}
			if !waiting {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait(`SELECT EXISTS (SELECT 1 FROM payhook_events WHERE status = 'received')`)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	wait(`SELECT EXISTS (SELECT 1 FROM payhook_untold) OR EXISTS (SELECT 1 FROM payhook_untold_batches) OR EXISTS (SELECT 1 FROM payhook_deliveries WHERE status = 'pending')`)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "drained/s")
	// The log sink's facts get no delivery row; the hook's are delivered.
	var processed, left int
	if err := db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE status = 'processed'`).Scan(&processed); err != nil {
		b.Fatal(err)
	}
	if err := db.SQL.QueryRow(`SELECT (SELECT COUNT(*) FROM payhook_deliveries WHERE status = 'pending') + (SELECT COUNT(*) FROM payhook_untold_facts)`).Scan(&left); err != nil {
		b.Fatal(err)
	}
	if processed != b.N || left != 0 {
		b.Fatalf("%d of %d events processed, %d deliveries pending or untold facts left", processed, b.N, left)
	}
	q.Stop(ctx)
}

// checkout returns event n: a completed Stripe checkout paying its own
// order with its own payment.
func checkout(n int, at time.Time) *payhook.Event {
	id := fmt.Sprintf("evt_b%d", n)
	return &payhook.Event{Source: "shop", EventID: id, Type: "checkout.session.completed",
		OccurredAt: at, ReceivedAt: at, Payload: fmt.Appendf(nil, `{"id":%q,"type":"checkout.session.completed",
		"created":1796115600,"livemode":false,"data":{"object":{"id":"cs_%d","object":"checkout.session",
		"mode":"payment","payment_status":"paid","payment_intent":"pi_%d","amount_total":2500,
		"currency":"usd","metadata":{"order_id":"ord_%d"}}}}`, id, n, n, n)}
}

// paymentIntent returns the payment_intent.succeeded of checkout n's
// payment.
func paymentIntent(n int, at time.Time) *payhook.Event {
	id := fmt.Sprintf("evt_p%d", n)
	return &payhook.Event{Source: "shop", EventID: id, Type: "payment_intent.succeeded",
		OccurredAt: at, ReceivedAt: at, Payload: fmt.Appendf(nil, `{"id":%q,"type":"payment_intent.succeeded",
		"created":1796115600,"livemode":false,"data":{"object":{"id":"pi_%d","object":"payment_intent",
		"status":"succeeded","amount":2500,"amount_received":2500,"currency":"usd","metadata":{"order_id":"ord_%d"}}}}`, id, n, n)}
}

// renewal returns event n: a Stripe customer.subscription.updated of
// subscription n, active for one more month.
func renewal(n int, at time.Time) *payhook.Event {
	id := fmt.Sprintf("evt_r%d", n)
	return &payhook.Event{Source: "shop", EventID: id, Type: "customer.subscription.updated",
		OccurredAt: at, ReceivedAt: at, Payload: fmt.Appendf(nil, `{"id":%q,"type":"customer.subscription.updated",
		"created":%d,"livemode":false,"data":{"object":{"id":"sub_%d","object":"subscription",
		"customer":"cus_%d","status":"active","current_period_end":%d,
		"items":{"object":"list","data":[{"id":"si_%d","price":{"id":"price_pro"}}]}}}}`,
			id, at.Unix(), n, n, at.AddDate(0, 1, 0).Unix(), n)}
}
