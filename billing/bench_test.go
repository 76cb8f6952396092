package billing_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// BenchmarkApplyMany applies batches of 128 checkouts of new payments (a
// Captured and its OrderPaid each, facts for a log sink) in one
// transaction each, one by one with ApplyOutcome and together with
// ApplyMany, side by side on each engine: ns/op is per checkout.
func BenchmarkApplyMany(b *testing.B) {
	n := 0
	benchApplyMany(b, nil, func() billing.Facts {
		n++
		p := pay(fmt.Sprint("pay_", n), fmt.Sprint("ord_", n), 2500, "USD")
		return billing.Facts{Source: src, Facts: []billing.Fact{billing.Captured{Payment: p},
			billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.Ref, At: t0}}}
	})
}

// BenchmarkApplyManyRenewals is BenchmarkApplyMany for a renewal wave:
// each event a newer snapshot of a stored subscription (active, its
// period a month further), as customer.subscription.updated maps to.
func BenchmarkApplyManyRenewals(b *testing.B) {
	const subscriptions = 10_000
	// snapshot is the renewals-th snapshot of subscription i.
	snapshot := func(i, renewals int) billing.Facts {
		return billing.Facts{Source: src, Facts: []billing.Fact{billing.Subscription{
			Ref: fmt.Sprint("sub_", i), Customer: fmt.Sprint("cus_", i), Plan: "pro", Status: "active",
			UpdatedAt:        t0.Add(time.Duration(renewals) * time.Hour),
			CurrentPeriodEnd: t0.AddDate(0, renewals+1, 0)}}}
	}
	created := func(ctx context.Context, db *store.DB, box *outbox.Outbox) error {
		events := make([]billing.Facts, subscriptions)
		for i := range events {
			events[i] = snapshot(i, 0)
		}
		return applyBatch(ctx, db, box, events, true)
	}
	n := 0
	benchApplyMany(b, created, func() billing.Facts {
		n++
		return snapshot(n%subscriptions, 1+n/subscriptions)
	})
}

// BenchmarkApplyManyRecaptures is BenchmarkApplyMany for the second
// event of each checkout a provider tells twice (Stripe's
// checkout.session.completed, then payment_intent.succeeded): a capture
// of a stored payment paying its order again, which changes nothing.
func BenchmarkApplyManyRecaptures(b *testing.B) {
	const payments = 10_000
	checkout := func(n int) billing.Facts {
		p := pay(fmt.Sprint("pay_", n%payments), fmt.Sprint("ord_", n%payments), 2500, "USD")
		return billing.Facts{Source: src, Facts: []billing.Fact{billing.Captured{Payment: p},
			billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.Ref, At: t0}}}
	}
	stored := func(ctx context.Context, db *store.DB, box *outbox.Outbox) error {
		for i := 0; i < payments; i += 1000 {
			events := make([]billing.Facts, 1000)
			for k := range events {
				events[k] = checkout(i + k)
			}
			if err := applyBatch(ctx, db, box, events, true); err != nil {
				return err
			}
		}
		return nil
	}
	n := 0
	benchApplyMany(b, stored, func() billing.Facts {
		n++
		return checkout(n)
	})
}

// benchApplyMany runs BenchmarkApplyMany's batches of the events next
// makes, on each engine, after before (if not nil) on a database of its
// own.
func benchApplyMany(b *testing.B, before func(context.Context, *store.DB, *outbox.Outbox) error, next func() billing.Facts) {
	const batch = 128
	for _, engine := range dbtest.Engines {
		b.Run(engine, func(b *testing.B) {
			ctx := context.Background()
			db, err := store.Open(ctx, dbtest.URL(b, engine))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			if _, err := db.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			box, err := outbox.New(outbox.Config{DB: db, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			if err := box.Add("log", nil, outbox.Log{Logger: slog.New(slog.DiscardHandler)}); err != nil {
				b.Fatal(err)
			}
			if before != nil {
				if err := before(ctx, db, box); err != nil {
					b.Fatal(err)
				}
			}
			for _, way := range []string{"one by one", "together"} {
				b.Run(way, func(b *testing.B) {
					for done := 0; done < b.N; done += batch {
						events := make([]billing.Facts, min(batch, b.N-done))
						for i := range events {
							events[i] = next()
						}
						if err := applyBatch(ctx, db, box, events, way == "together"); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// applyBatch applies events in one transaction, together with ApplyMany
// or one by one with ApplyOutcome, and commits it.
func applyBatch(ctx context.Context, db *store.DB, box *outbox.Outbox, events []billing.Facts, together bool) error {
	tx, err := billing.Begin(ctx, db, t0)
	if err != nil {
		return err
	}
	tx.WithOutbox(box)
	if together {
		_, _, err = billing.ApplyMany(ctx, tx, events)
	} else {
		for _, ev := range events {
			if _, err = billing.ApplyOutcome(ctx, tx, ev.Source, ev.Facts); err != nil {
				break
			}
		}
	}
	if err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
