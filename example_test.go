package payhook_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/receiver"
	"github.com/payhook/payhook/store"
)

// An application mounts payhook's receiver in its own HTTP server and runs
// its worker on its own database. The handler marks an order paid inside
// the transaction that marks the event processed, and only if it was
// pending, so however often the event arrives the order is paid once.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "payhook-example")
	defer os.RemoveAll(dir)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("example secret"))

	// The application's database, with payhook's tables beside its own.
	db, _ := store.Open(ctx, "sqlite://"+filepath.Join(dir, "app.db"))
	defer db.Close()
	db.Migrate(ctx)
	jobs.Migrate(ctx, db)
	db.SQL.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`)
	db.SQL.Exec(`INSERT INTO orders VALUES ('ord_1', 'pending')`)

	// The dozen lines: handlers, worker, receiver, route.
	handlers := &payhook.Mux{}
	handlers.HandleFunc("checkout.completed", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
		_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'paid' WHERE id = 'ord_1' AND status = 'pending'`)
		return err
	})
	queue, _ := jobs.New(db, jobs.Config{Handlers: handlers, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	queue.Start(ctx)
	defer queue.Stop(ctx)
	verifier, _ := billete.New(billete.Config{Secrets: []string{secret}})
	recv, _ := receiver.New(receiver.Config{Inbox: queue, Logger: slog.New(slog.DiscardHandler),
		Sources: []payhook.Source{{Name: "billete", Provider: "billete", Environment: "test", Verifier: verifier}}})
	mux := http.NewServeMux()
	mux.Handle("/webhooks/{source}", recv)

	// The provider delivers the same event twice.
	srv := httptest.NewServer(mux)
	defer srv.Close()
	body := []byte(`{"id":"evt_1","type":"checkout.completed","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`)
	for range 2 {
		h, _ := standard.Sign(secret, "evt_1", time.Now(), body)
		req, _ := http.NewRequest("POST", srv.URL+"/webhooks/billete", bytes.NewReader(body))
		req.Header = h
		resp, _ := http.DefaultClient.Do(req)
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(answer))
	}

	for {
		evs, _ := db.ListEvents(ctx, store.Filter{EventID: "evt_1"})
		if evs[0].Status == payhook.StatusProcessed {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var status string
	db.SQL.QueryRow(`SELECT status FROM orders WHERE id = 'ord_1'`).Scan(&status)
	fmt.Println("order ord_1:", status)
	// Output:
	// 200 {"status":"stored","id":1,"event_id":"evt_1"}
	// 200 {"status":"duplicate","event_id":"evt_1"}
	// order ord_1: paid
}

// A Mux routes events by type; "*" takes the types without a handler of
// their own.
func ExampleMux() {
	var mux payhook.Mux
	mux.HandleFunc("payment.succeeded", func(context.Context, *sql.Tx, *payhook.Event) error { return nil })
	fmt.Println(mux.Handles("payment.succeeded"), mux.Handles("payment.refunded"))
	mux.HandleFunc("*", func(context.Context, *sql.Tx, *payhook.Event) error { return nil })
	fmt.Println(mux.Handles("payment.refunded"))
	// Output:
	// true false
	// true
}
