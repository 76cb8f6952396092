package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// An application registers its own after-commit effect, a welcome email
// for each paid order, the way payhook registers its sinks: it runs once
// the transaction that wrote the fact committed, in a job of its own,
// retried on its own until it returns nil; its failure never makes the
// event be processed again. A handler of its own, run in the processing
// transaction after billing, reads the facts that transaction wrote.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "payhook-outbox")
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
	logger := slog.New(slog.DiscardHandler)

	box, err := outbox.New(outbox.Config{DB: db, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	emailed := make(chan outbox.Fact, 1)
	err = box.AddFunc("welcome-email", []string{"order.paid"}, func(ctx context.Context, f outbox.Fact) error {
		emailed <- f // send the email here; an error retries it later
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	cfg, err := process.New(process.Config{DB: db, Sources: []payhook.Source{{Name: "shop", Provider: "stripe"}},
		Outbox: box, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	// Under "*", beside billing's own: a handler registered for a type
	// would take that type from billing (a Mux gives "*" only the types
	// no handler of their own takes). Two handlers of an event run it one
	// event at a time, without billing's batches.
	cfg.Handlers.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
		facts, err := outbox.ListTx(ctx, tx, outbox.Filter{Source: "shop"})
		for _, f := range facts {
			fmt.Println("in the transaction:", f.Type, f.Subject)
		}
		return err
	})
	cfg.PollInterval = 10 * time.Millisecond
	queue, err := jobs.New(db, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := queue.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer queue.Stop(ctx)

	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	_, err = queue.Ingest(ctx, []*payhook.Event{{Source: "shop", EventID: "evt_1", Type: "checkout.session.completed",
		OccurredAt: at, ReceivedAt: at, Payload: []byte(`{"id":"evt_1","type":"checkout.session.completed",
		"created":1796115600,"livemode":false,"data":{"object":{"id":"cs_1","object":"checkout.session",
		"mode":"payment","payment_status":"paid","payment_intent":"pi_1","amount_total":2500,
		"currency":"usd","metadata":{"order_id":"ord_1"}}}}`)}})
	if err != nil {
		log.Fatal(err)
	}

	f := <-emailed
	fmt.Println("after the commit:", f.Type, f.Subject, string(f.Data))
	// Output:
	// in the transaction: payment.succeeded pi_1
	// in the transaction: order.paid ord_1
	// after the commit: order.paid ord_1 {"order_id":"ord_1","paid_by":"pi_1","kind":"fiat"}
}
