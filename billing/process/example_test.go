package process_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// An application runs the processing payhook serve runs: a Stripe
// checkout.session.completed event becomes a captured payment and a paid
// order, in the transaction that marks the event processed. Here the
// event is stored and processed by hand; in a server the receiver stores
// it and the queue's workers (queue.Start) process it.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "payhook-process")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "payhook.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := jobs.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}

	// The sources are the ones the receiver verifies (Verifier omitted
	// here); a source with API credentials would also have a Fetch.
	sources := []payhook.Source{{Name: "shop", Provider: "stripe"}}
	cfg, err := process.New(process.Config{DB: db, Sources: sources, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	queue, err := jobs.New(db, cfg)
	if err != nil {
		log.Fatal(err)
	}

	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ev := &payhook.Event{Source: "shop", EventID: "evt_1", Type: "checkout.session.completed",
		OccurredAt: at, ReceivedAt: at, Payload: []byte(`{"id":"evt_1","type":"checkout.session.completed",
		"created":1796115600,"livemode":false,"data":{"object":{"id":"cs_1","object":"checkout.session",
		"mode":"payment","payment_status":"paid","payment_intent":"pi_1","amount_total":2500,
		"currency":"usd","metadata":{"order_id":"ord_1"}}}}`)}
	if _, err := queue.Ingest(ctx, []*payhook.Event{ev}); err != nil {
		log.Fatal(err)
	}
	if err := queue.Process(ctx, ev.ID); err != nil {
		log.Fatal(err)
	}

	stored, err := db.Event(ctx, ev.ID)
	if err != nil {
		log.Fatal(err)
	}
	pay, err := billing.GetPayment(ctx, db, "shop", "pi_1")
	if err != nil {
		log.Fatal(err)
	}
	order, err := billing.GetOrder(ctx, db, "shop", "ord_1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("event:", stored.Status)
	fmt.Println("payment:", pay.Ref, pay.Status, pay.Amount, pay.Currency)
	fmt.Println("order:", order.OrderID, order.Status, "by", order.PaidBy)
	// Output:
	// event: processed
	// payment: pi_1 succeeded 2500 USD
	// order: ord_1 paid by pi_1
}
