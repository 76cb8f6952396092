package payhook_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
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
// (The README's library section is this file's imports and this
// function, checked by TestREADMELibraryIsExample.)
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "payhook-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The application's database, with payhook's tables beside its own.
	db, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "app.db")) // or postgres://user:pass@host/db
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
	db.SQL.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`)
	db.SQL.Exec(`INSERT INTO orders VALUES ('ord_1', 'pending')`)

	// A handler per event type; it runs inside the transaction that marks
	// the event processed.
	handlers := &payhook.Mux{}
	handlers.HandleFunc("checkout.completed", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
		var body struct {
			Data struct {
				Metadata struct {
					OrderID string `json:"order_id"`
				} `json:"metadata"`
			} `json:"data"`
		}
		if err := json.Unmarshal(ev.Payload, &body); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'`,
			body.Data.Metadata.OrderID)
		return err
	})

	// The worker, and the receiver that stores each event once and answers
	// 200 only after the commit.
	queue, err := jobs.New(db, jobs.Config{Handlers: handlers, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	if err := queue.Start(ctx); err != nil {
		log.Fatal(err)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("example secret")) // os.Getenv("BILLETE_WEBHOOK_SECRET")
	verifier, err := billete.New(billete.Config{Secrets: []string{secret}})
	if err != nil {
		log.Fatal(err)
	}
	recv, err := receiver.New(receiver.Config{Inbox: queue, Logger: slog.New(slog.DiscardHandler),
		Sources: []payhook.Source{{Name: "billete", Provider: "billete", Environment: "test", Verifier: verifier}}})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/webhooks/{source}", recv)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // your server's address
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)

	// The provider delivers the same event twice.
	body := []byte(`{"id":"evt_1","type":"checkout.completed","created_at":"2026-11-30T12:00:00Z",` +
		`"environment":"test","data":{"metadata":{"order_id":"ord_1"}}}`)
	for range 2 {
		h, _ := standard.Sign(secret, "evt_1", time.Now(), body)
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/webhooks/billete", bytes.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(answer))
	}
	for { // until the worker has processed it
		evs, err := db.ListEvents(ctx, store.Filter{EventID: "evt_1"})
		if err != nil {
			log.Fatal(err)
		}
		if evs[0].Status == payhook.StatusProcessed {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var status string
	db.SQL.QueryRow(`SELECT status FROM orders WHERE id = 'ord_1'`).Scan(&status)
	fmt.Println("order ord_1:", status)

	// Shutdown: stop accepting and let in-flight deliveries commit and
	// answer, then let running jobs finish.
	if err := srv.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	if err := queue.Stop(ctx); err != nil {
		log.Fatal(err)
	}
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

// SameBody tells a provider's redelivery of an event, numbered anew in
// its body, from an event whose body changed.
func ExampleSameBody() {
	first := []byte(`{"event_id":"evt_1","notification_id":"ntf_1","data":{"total":"100"}}`)
	replay := []byte(`{"event_id":"evt_1","notification_id":"ntf_2","data":{"total":"100"}}`)
	changed := []byte(`{"event_id":"evt_1","notification_id":"ntf_3","data":{"total":"999"}}`)
	paddle := []string{"notification_id"} // paddle.Verifier's DeliveryFields
	fmt.Println(payhook.SameBody(first, replay, paddle))
	fmt.Println(payhook.SameBody(first, changed, paddle))
	fmt.Println(payhook.SameBody(first, replay, nil))
	// Output:
	// true
	// false
	// false
}
