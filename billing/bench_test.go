package billing_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

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
			n := 0
			for _, way := range []string{"one by one", "together"} {
				b.Run(way, func(b *testing.B) {
					for done := 0; done < b.N; done += batch {
						events := make([]billing.Facts, min(batch, b.N-done))
						for i := range events {
							n++
							p := pay(fmt.Sprint("pay_", n), fmt.Sprint("ord_", n), 2500, "USD")
							events[i] = billing.Facts{Source: src, Facts: []billing.Fact{billing.Captured{Payment: p},
								billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.Ref, At: t0}}}
						}
						tx, err := billing.Begin(ctx, db, t0)
						if err != nil {
							b.Fatal(err)
						}
						tx.WithOutbox(box)
						if way == "together" {
							_, _, err = billing.ApplyMany(ctx, tx, events)
						} else {
							for _, ev := range events {
								if _, err = billing.ApplyOutcome(ctx, tx, ev.Source, ev.Facts); err != nil {
									break
								}
							}
						}
						if err != nil {
							b.Fatal(err)
						}
						if err := tx.Commit(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
