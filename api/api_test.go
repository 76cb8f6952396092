package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/api"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

const token = "adm_test_token"

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// seed opens and migrates a database and applies a small billing story:
//
//	stripe: pay_1 captured for ord_1 (10000 USD), refunded 3000;
//	        sub_1 active; pay_dup for ord_dup and sub_dup (also in paddle)
//	paddle: pay_dup (2500 EUR) for ord_dup, sub_dup
//	crypto: inv_1 settled with chain ref tx_1 for ord_2 (50000 BTC);
//	        inv_2 settled reusing tx_1: rejected, one alert
//
// and stores one event.
func seed(t *testing.T, dbURL string) (*store.DB, int64) {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	apply := func(source string, facts ...billing.Fact) {
		t.Helper()
		tx, err := billing.Begin(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := billing.Apply(ctx, tx, source, facts); err != nil {
			t.Fatalf("apply %s %+v: %v", source, facts, errors.Join(err, tx.Rollback()))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	apply("stripe",
		billing.Captured{Payment: billing.Payment{Ref: "pay_1", OrderID: "ord_1", Amount: 10000, Currency: "USD", CapturedAt: t0.Add(-time.Hour)}},
		billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 3000, Currency: "USD", At: t0},
		billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active", CurrentPeriodEnd: t0.AddDate(0, 1, 0), UpdatedAt: t0},
		billing.Captured{Payment: billing.Payment{Ref: "pay_dup", OrderID: "ord_dup", Amount: 1000, Currency: "USD", CapturedAt: t0}},
		billing.Subscription{Ref: "sub_dup", Customer: "cus_2", Plan: "basic", Status: "active", UpdatedAt: t0},
	)
	apply("paddle",
		billing.Captured{Payment: billing.Payment{Ref: "pay_dup", OrderID: "ord_dup", Amount: 2500, Currency: "EUR", CapturedAt: t0}},
		billing.Subscription{Ref: "sub_dup", Customer: "cus_3", Plan: "basic", Status: "canceled", UpdatedAt: t0},
	)
	apply("crypto", billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_2", Amount: 50000, Currency: "BTC", ChainRef: "tx_1", At: t0})
	apply("crypto", billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_3", Amount: 50000, Currency: "BTC", ChainRef: "tx_1", At: t0})

	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := &payhook.Event{Source: "stripe", EventID: "evt_1", Type: "charge.refunded", ReceivedAt: t0,
		Payload: []byte(`{"id":"evt_1","type":"charge.refunded"}`)}
	if _, err := db.InsertEventsTx(ctx, tx, []*payhook.Event{ev}); err != nil {
		t.Fatal(errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return db, ev.ID
}

// client calls the API served on a loopback port.
type client struct {
	t   *testing.T
	url string
}

func serve(t *testing.T, db *store.DB) *client {
	t.Helper()
	h, err := api.New(api.Config{DB: db, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	// Mounted at /api/v1/ of another mux, as the server does.
	mux := http.NewServeMux()
	mux.Handle(api.Prefix, h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &client{t: t, url: srv.URL}
}

// do sends the request with the token (none if tok is empty) and returns
// the status, the headers and the body.
func (c *client) do(method, path, tok string) (int, http.Header, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		c.t.Errorf("%s %s: Content-Type %q; want application/json", method, path, ct)
	}
	return resp.StatusCode, resp.Header, body
}

// get GETs path with the token, wants 200 and decodes the body into v.
func (c *client) get(path string, v any) {
	c.t.Helper()
	c.call("GET", path, 200, v)
}

func (c *client) call(method, path string, want int, v any) {
	c.t.Helper()
	code, _, body := c.do(method, path, token)
	if code != want {
		c.t.Fatalf("%s %s = %d %s; want %d", method, path, code, body, want)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, body, err)
		}
	}
}

type errorBody struct {
	Error   string   `json:"error"`
	Sources []string `json:"sources"`
}

func TestAPI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db, evID := seed(t, dbURL)
		c := serve(t, db)

		t.Run("payment", func(t *testing.T) {
			var p billing.PaymentDetail
			c.get("/api/v1/payments/pay_1", &p)
			if p.Source != "stripe" || p.Ref != "pay_1" || p.Kind != "fiat" || p.OrderID != "ord_1" || p.Amount != 10000 ||
				p.Currency != "USD" || p.Status != "partially_refunded" || p.RefundedAmount != 3000 ||
				!p.CapturedAt.Equal(t0.Add(-time.Hour)) {
				t.Errorf("payment = %+v", p.PaymentView)
			}
			var keys []string
			for _, ps := range p.Postings {
				keys = append(keys, ps.FactKey)
				var sum int64
				for _, e := range ps.Entries {
					sum += e.Amount
				}
				if len(ps.Entries) == 0 || sum != 0 {
					t.Errorf("posting %s: entries %+v; want some, summing to 0", ps.FactKey, ps.Entries)
				}
			}
			if !slices.Equal(keys, []string{"capture:pay_1", "refund:re_1"}) {
				t.Errorf("postings = %v; want capture then refund", keys)
			}
			if p.Postings[1].ReversesID != p.Postings[0].ID {
				t.Errorf("refund reverses %d; want the capture %d", p.Postings[1].ReversesID, p.Postings[0].ID)
			}
			// ?source= picks one of an ambiguous reference.
			c.get("/api/v1/payments/pay_dup?source=paddle", &p)
			if p.Source != "paddle" || p.Amount != 2500 || p.Currency != "EUR" {
				t.Errorf("pay_dup of paddle = %+v", p.PaymentView)
			}
			c.get("/api/v1/payments/inv_2", &p)
			if p.Source != "crypto" || p.Kind != "crypto" || p.Status != "rejected" || p.ChainRef != "tx_1" || len(p.Postings) != 0 {
				t.Errorf("inv_2 = %+v, postings %v; want crypto rejected, no postings", p.PaymentView, p.Postings)
			}
		})

		t.Run("payments", func(t *testing.T) {
			var l struct{ Payments []billing.PaymentView }
			c.get("/api/v1/payments", &l)
			if len(l.Payments) != 5 {
				t.Errorf("payments = %+v; want 5", l.Payments)
			}
			c.get("/api/v1/payments?source=stripe&status=partially_refunded&order_id=ord_1&limit=10", &l)
			if len(l.Payments) != 1 || l.Payments[0].Ref != "pay_1" {
				t.Errorf("filtered payments = %+v; want pay_1", l.Payments)
			}
			c.get("/api/v1/payments?source=crypto&status=settled", &l)
			if len(l.Payments) != 1 || l.Payments[0].Ref != "inv_1" || l.Payments[0].OrderID != "ord_2" {
				t.Errorf("settled crypto payments = %+v; want inv_1", l.Payments)
			}
			c.get("/api/v1/payments?source=nobody", &l)
			if l.Payments == nil || len(l.Payments) != 0 {
				t.Errorf("payments of an unknown source = %#v; want []", l.Payments)
			}
			c.get("/api/v1/payments?limit=2", &l)
			if len(l.Payments) != 2 {
				t.Errorf("limit=2 gave %d payments", len(l.Payments))
			}
		})

		t.Run("orders", func(t *testing.T) {
			var o billing.OrderView
			c.get("/api/v1/orders/ord_1", &o)
			if o.Source != "stripe" || o.OrderID != "ord_1" || o.Status != "paid" || o.PaidBy != "pay_1" || o.PaidAt.IsZero() {
				t.Errorf("ord_1 = %+v; want stripe's, paid by pay_1", o)
			}
			// The same order id in two sources is two orders.
			for _, source := range []string{"paddle", "stripe"} {
				var o billing.OrderView
				c.get("/api/v1/orders/ord_dup?source="+source, &o)
				if o.Source != source || o.Status != "paid" || o.PaidBy != "pay_dup" {
					t.Errorf("ord_dup of %s = %+v", source, o)
				}
			}
			c.call("GET", "/api/v1/orders/ord_1?source=paddle", 404, nil)
			var l struct{ Orders []billing.OrderView }
			c.get("/api/v1/orders?status=paid", &l)
			paid := map[string]string{}
			for _, o := range l.Orders {
				paid[o.OrderID] = o.PaidBy
			}
			if paid["ord_1"] != "pay_1" || paid["ord_2"] != "inv_1" {
				t.Errorf("paid orders = %+v; want ord_1 by pay_1 and ord_2 by inv_1", l.Orders)
			}
			c.get("/api/v1/orders", &l)
			if len(l.Orders) < 2 {
				t.Errorf("orders = %+v", l.Orders)
			}
			c.get("/api/v1/orders?source=paddle", &l)
			if len(l.Orders) != 1 || l.Orders[0].OrderID != "ord_dup" || l.Orders[0].Source != "paddle" {
				t.Errorf("orders of paddle = %+v", l.Orders)
			}
		})

		t.Run("subscriptions", func(t *testing.T) {
			var s billing.SubscriptionView
			c.get("/api/v1/subscriptions/sub_1", &s)
			if s.Source != "stripe" || s.Customer != "cus_1" || s.Plan != "pro" || s.Status != "active" ||
				!s.CurrentPeriodEnd.Equal(t0.AddDate(0, 1, 0)) || !s.ProviderUpdatedAt.Equal(t0) {
				t.Errorf("sub_1 = %+v", s)
			}
			c.get("/api/v1/subscriptions/sub_dup?source=paddle", &s)
			if s.Source != "paddle" || s.Status != "canceled" || s.Customer != "cus_3" {
				t.Errorf("sub_dup of paddle = %+v", s)
			}
			var l struct{ Subscriptions []billing.SubscriptionView }
			c.get("/api/v1/subscriptions", &l)
			if len(l.Subscriptions) != 3 {
				t.Errorf("subscriptions = %+v; want 3", l.Subscriptions)
			}
			c.get("/api/v1/subscriptions?source=stripe&status=active&customer=cus_1", &l)
			if len(l.Subscriptions) != 1 || l.Subscriptions[0].Ref != "sub_1" {
				t.Errorf("filtered subscriptions = %+v; want sub_1", l.Subscriptions)
			}
		})

		t.Run("balances", func(t *testing.T) {
			var b billing.BalancesView
			c.get("/api/v1/ledger/balances", &b)
			want := map[string]map[string]int64{
				"USD": {billing.AccountReceivable: 8000, billing.AccountRevenue: -8000},
				"EUR": {billing.AccountReceivable: 2500, billing.AccountRevenue: -2500},
				"BTC": {billing.AccountCryptoWallet: 50000, billing.AccountRevenue: -50000},
			}
			if len(b.Balances) != len(want) {
				t.Errorf("balances = %+v; want %v", b.Balances, want)
			}
			for cur, accounts := range want {
				got := b.Balances[cur]
				var sum int64
				for _, v := range got.Accounts {
					sum += v
				}
				if sum != 0 || got.Sum != 0 {
					t.Errorf("%s: accounts sum to %d, sum says %d; want 0", cur, sum, got.Sum)
				}
				for acc, v := range accounts {
					if got.Accounts[acc] != v {
						t.Errorf("%s %s = %d; want %d", cur, acc, got.Accounts[acc], v)
					}
				}
			}
		})

		t.Run("alerts", func(t *testing.T) {
			var l struct{ Alerts []billing.AlertView }
			c.get("/api/v1/alerts?acknowledged=false", &l)
			if len(l.Alerts) != 1 || l.Alerts[0].Kind != billing.AlertCryptoReferenceReused || l.Alerts[0].Subject != "tx_1" ||
				l.Alerts[0].Count != 1 || l.Alerts[0].Acknowledged {
				t.Fatalf("alerts = %+v; want one crypto_reference_reused for tx_1", l.Alerts)
			}
			id := l.Alerts[0].ID
			var ack struct {
				ID           int64
				Acknowledged bool
			}
			c.call("POST", "/api/v1/alerts/"+itoa(id)+"/ack", 200, &ack)
			if ack.ID != id || !ack.Acknowledged {
				t.Errorf("ack = %+v", ack)
			}
			c.get("/api/v1/alerts?acknowledged=false", &l)
			if len(l.Alerts) != 0 {
				t.Errorf("unacknowledged alerts after ack = %+v; want none", l.Alerts)
			}
			c.get("/api/v1/alerts", &l)
			if len(l.Alerts) != 1 || !l.Alerts[0].Acknowledged {
				t.Errorf("all alerts after ack = %+v; want the one, acknowledged", l.Alerts)
			}
			var e errorBody
			c.call("POST", "/api/v1/alerts/999999/ack", 404, &e)
			c.call("POST", "/api/v1/alerts/x/ack", 400, &e)
			c.call("GET", "/api/v1/alerts?acknowledged=maybe", 400, &e)
		})

		t.Run("events", func(t *testing.T) {
			var ev struct {
				ID      int64
				Source  string
				EventID string `json:"event_id"`
				Status  string
				Payload map[string]any
			}
			c.get("/api/v1/events/"+itoa(evID), &ev)
			if ev.ID != evID || ev.Source != "stripe" || ev.EventID != "evt_1" || ev.Status != "received" ||
				ev.Payload["type"] != "charge.refunded" {
				t.Errorf("event = %+v; want evt_1 with its payload inline", ev)
			}
			var l struct {
				Events []struct {
					EventID string `json:"event_id"`
					Payload map[string]any
				}
			}
			c.get("/api/v1/events?source=stripe&status=received&limit=5", &l)
			if len(l.Events) != 1 || l.Events[0].EventID != "evt_1" || l.Events[0].Payload["id"] != "evt_1" {
				t.Errorf("events = %+v", l.Events)
			}
			c.get("/api/v1/events?source=nobody", &l)
			if l.Events == nil || len(l.Events) != 0 {
				t.Errorf("events of an unknown source = %#v; want []", l.Events)
			}
			var e errorBody
			c.call("GET", "/api/v1/events?status=weird", 400, &e)
			c.call("GET", "/api/v1/events/abc", 400, &e)
		})

		t.Run("not found", func(t *testing.T) {
			for _, path := range []string{
				"/api/v1/payments/pay_nope",
				"/api/v1/payments/pay_1?source=paddle",
				"/api/v1/orders/ord_nope",
				"/api/v1/subscriptions/sub_nope",
				"/api/v1/subscriptions/sub_1?source=crypto",
				"/api/v1/events/999999",
				"/api/v1/nothing",
			} {
				var e errorBody
				c.call("GET", path, 404, &e)
				if e.Error == "" {
					t.Errorf("GET %s: no error message", path)
				}
			}
		})

		t.Run("ambiguous", func(t *testing.T) {
			for _, path := range []string{"/api/v1/payments/pay_dup", "/api/v1/subscriptions/sub_dup", "/api/v1/orders/ord_dup"} {
				var e errorBody
				c.call("GET", path, 409, &e)
				if !slices.Equal(e.Sources, []string{"paddle", "stripe"}) || !strings.Contains(e.Error, "paddle, stripe") {
					t.Errorf("GET %s: %+v; want 409 naming paddle and stripe", path, e)
				}
			}
		})

		t.Run("bad requests", func(t *testing.T) {
			for _, path := range []string{
				"/api/v1/payments?limit=0",
				"/api/v1/payments?limit=x",
				"/api/v1/payments?limit=100000",
				"/api/v1/payments?status=lost",
				"/api/v1/orders?status=maybe",
				"/api/v1/subscriptions?status=cancelled", // canceled: a misspelling lists nothing
				"/api/v1/alerts?kind=event_faild",        // event_failed: likewise
				// Values no column can hold (not UTF-8, a NUL): refused, not
				// a failed query (a 500 on PostgreSQL).
				"/api/v1/payments?source=%ff",
				"/api/v1/payments?order_id=%00",
				"/api/v1/orders?source=%ff",
				"/api/v1/subscriptions?customer=%ff",
				"/api/v1/events?source=%ff",
				"/api/v1/events?type=%00",
				"/api/v1/alerts?kind=stock%fflow",
				"/api/v1/payments/pay%ff",
				"/api/v1/orders/ord%00",
				"/api/v1/subscriptions/sub%ff",
			} {
				var e errorBody
				c.call("GET", path, 400, &e)
				if e.Error == "" {
					t.Errorf("GET %s: no error message", path)
				}
			}
			code, h, _ := c.do("DELETE", "/api/v1/payments/pay_1", token)
			if code != 405 || h.Get("Allow") != "GET" {
				t.Errorf("DELETE a payment = %d, Allow %q; want 405, GET", code, h.Get("Allow"))
			}
			code, h, _ = c.do("GET", "/api/v1/alerts/1/ack", token)
			if code != 405 || h.Get("Allow") != "POST" {
				t.Errorf("GET an ack = %d, Allow %q; want 405, POST", code, h.Get("Allow"))
			}
		})

		t.Run("unauthorized", func(t *testing.T) {
			for _, tok := range []string{"", "wrong", token + "x", strings.ToUpper(token)} {
				for _, path := range []string{"/api/v1/payments/pay_1", "/api/v1/ledger/balances", "/api/v1/nothing"} {
					code, h, body := c.do("GET", path, tok)
					var e errorBody
					json.Unmarshal(body, &e)
					if code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") || e.Error == "" {
						t.Errorf("GET %s with token %q = %d, WWW-Authenticate %q, %s; want 401 Bearer",
							path, tok, code, h.Get("WWW-Authenticate"), body)
					}
				}
			}
			code, _, _ := c.do("POST", "/api/v1/alerts/1/ack", "wrong")
			if code != 401 {
				t.Errorf("ack with a wrong token = %d; want 401", code)
			}
			// Another scheme with the right token.
			req, err := http.NewRequest("GET", c.url+"/api/v1/ledger/balances", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Basic "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Errorf("Basic scheme = %d; want 401", resp.StatusCode)
			}
		})
	})
}

func TestNewConfig(t *testing.T) {
	if _, err := api.New(api.Config{DB: &store.DB{}}); !errors.Is(err, payhook.ErrConfig) || !strings.Contains(err.Error(), "PAYHOOK_ADMIN_TOKEN") {
		t.Errorf("New without a token: %v; want ErrConfig naming PAYHOOK_ADMIN_TOKEN", err)
	}
	if _, err := api.New(api.Config{Token: token}); !errors.Is(err, payhook.ErrConfig) {
		t.Errorf("New without a database: %v; want ErrConfig", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
