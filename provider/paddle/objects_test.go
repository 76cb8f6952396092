package paddle_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/paddle"
)

// fixture reads a file of testdata (or, for an entity, of billing's
// Paddle event fixtures).
func fixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// entityPage puts the data of billing's Paddle event fixtures in a page
// of a Paddle list.
func entityPage(t *testing.T, hasMore bool, files ...string) []byte {
	t.Helper()
	var data []json.RawMessage
	for _, f := range files {
		var ev struct{ Data json.RawMessage }
		if err := json.Unmarshal(fixture(t, "../../billing/mapping/testdata/paddle/"+f), &ev); err != nil {
			t.Fatal(err)
		}
		data = append(data, ev.Data)
	}
	b, _ := json.Marshal(map[string]any{"data": data, "meta": map[string]any{
		"request_id": "b93d9c94-c28f-4e5d-af2e-044854d7afe8",
		"pagination": map[string]any{"per_page": len(data), "next": "https://api.paddle.com/x?after=last", "has_more": hasMore},
	}})
	return b
}

// edit changes field k of every item of a page to v.
func edit(t *testing.T, page []byte, k string, v any) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(page, &p); err != nil {
		t.Fatal(err)
	}
	for _, d := range p["data"].([]any) {
		d.(map[string]any)[k] = v
	}
	b, _ := json.Marshal(p)
	return b
}

// hasMore sets a page's meta.pagination.has_more.
func hasMore(t *testing.T, page []byte) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(page, &p); err != nil {
		t.Fatal(err)
	}
	p["meta"].(map[string]any)["pagination"].(map[string]any)["has_more"] = true
	b, _ := json.Marshal(p)
	return b
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// ListObjects reads Paddle's own list pages (the SDKs' fixtures) into
// the rows reconciliation compares, as payhook's Paddle mapping reads the
// same entities in events.
func TestListObjectsPaddleShapes(t *testing.T) {
	t.Parallel()
	pay := func(ref string, amount int64, cur, created string) adapter.Object {
		return adapter.Object{Kind: adapter.KindPayment, Ref: ref, Status: "succeeded", Amount: amount, Currency: cur, RefundedAmount: -1, Created: at(created)}
	}
	adj := func(kind, ref, payment, status string, amount int64, created string) adapter.Object {
		return adapter.Object{Kind: kind, Ref: ref, PaymentRef: payment, Status: status, Amount: amount, Currency: "USD", Created: at(created)}
	}
	sub := func(ref, status, plan, created string) adapter.Object {
		return adapter.Object{Kind: adapter.KindSubscription, Ref: ref, Status: status, Plan: plan, Created: at(created)}
	}
	const txn = "txn_01hvcc93znj3mpqt1tenkjb04y"
	for _, tc := range []struct {
		name string
		kind string
		from time.Time
		page []byte
		want []adapter.Object
		next string
	}{
		{"transactions, drafts and past due left out", adapter.KindPayment, time.Time{}, fixture(t, "testdata/transactions_pg1.json"),
			[]adapter.Object{pay("txn_01hv8wptq8987qeep44cyrewp9", 65215, "USD", "2024-04-12T10:12:33.2014Z")}, "txn_01hv8wptq8987qeep44cyrewp9"},
		{"the last page of transactions, whose next is set", adapter.KindPayment, time.Time{}, fixture(t, "testdata/transactions_pg2.json"),
			[]adapter.Object{pay("txn_01hv8wnvvtedwjrhfhpr9vkq9w", 47600, "USD", "2024-04-12T10:12:01.643104Z")}, ""},
		{"a transaction paid partly from credit: its grand_total", adapter.KindPayment, time.Time{}, entityPage(t, false, "transaction.completed.credit.json"),
			[]adapter.Object{pay("txn_01hywqfe6yxhxcsfb4ays8mqt3", 650, "GBP", "2024-05-27T09:53:02.392025Z")}, ""},
		{"adjustments: a refund pending approval, credits left out", adapter.KindRefund, time.Time{}, fixture(t, "testdata/adjustments.json"),
			[]adapter.Object{adj(adapter.KindRefund, "adj_01h8c65c2ggq5nxswnnwv78e75", "txn_01h8bxpvx398a7zbawb77y0kp5", "pending", 100, "2023-08-21T13:57:15.489634Z")}, ""},
		{"adjustments newest first: one older than From ends the list", adapter.KindRefund, at("2023-08-21T12:00:00Z"), hasMore(t, fixture(t, "testdata/adjustments.json")),
			[]adapter.Object{adj(adapter.KindRefund, "adj_01h8c65c2ggq5nxswnnwv78e75", "txn_01h8bxpvx398a7zbawb77y0kp5", "pending", 100, "2023-08-21T13:57:15.489634Z")}, ""},
		{"the same, all newer than From: the next page", adapter.KindRefund, at("2023-06-01T00:00:00Z"), hasMore(t, fixture(t, "testdata/adjustments.json")),
			[]adapter.Object{adj(adapter.KindRefund, "adj_01h8c65c2ggq5nxswnnwv78e75", "txn_01h8bxpvx398a7zbawb77y0kp5", "pending", 100, "2023-08-21T13:57:15.489634Z")}, "adj_01h468w41ttb2j2bh8av74gwt1"},
		{"no chargeback among them", adapter.KindDispute, time.Time{}, fixture(t, "testdata/adjustments.json"), nil, ""},
		{"refunds approved and rejected", adapter.KindRefund, time.Time{}, entityPage(t, false, "adjustment.updated.approved.json", "adjustment.updated.rejected.json"),
			[]adapter.Object{
				adj(adapter.KindRefund, "adj_01hvgf2s84dr6reszzg29zbvcm", txn, "succeeded", 100, "2024-04-15T08:48:20.239695Z"),
				adj(adapter.KindRefund, "adj_01hvgf2s84dr6reszzg29zbvcm", txn, "failed", 100, "2024-04-15T08:48:20.239695Z"),
			}, ""},
		{"a chargeback approved: lost; a warning left out", adapter.KindDispute, time.Time{}, entityPage(t, false, "adjustment.created.chargeback.json", "adjustment.created.chargeback_warning.json"),
			[]adapter.Object{adj(adapter.KindDispute, "adj_01hvgf2s84dr6reszzg29zbvcm", txn, "lost", 100, "2024-04-15T08:48:20.239695Z")}, ""},
		{"a chargeback reversed: won", adapter.KindDispute, time.Time{}, edit(t, entityPage(t, false, "adjustment.created.chargeback.json"), "status", "reversed"),
			[]adapter.Object{adj(adapter.KindDispute, "adj_01hvgf2s84dr6reszzg29zbvcm", txn, "won", 100, "2024-04-15T08:48:20.239695Z")}, ""},
		{"a chargeback pending approval left out", adapter.KindDispute, time.Time{}, edit(t, entityPage(t, false, "adjustment.created.chargeback.json"), "status", "pending_approval"), nil, ""},
		{"subscriptions: trialing, canceled, active, a pause scheduled", adapter.KindSubscription, time.Time{}, fixture(t, "testdata/subscriptions.json"),
			[]adapter.Object{
				sub("sub_01hp4894h0dpdrfk9dx775gny7", "active", "pri_01gsz8x8sawmvhz1pv30nge1ke", "2024-02-08T11:40:06.048Z"),
				sub("sub_01hp46z4qkjs68yfsnv0hs2sd2", "ended", "pri_01gsz8x8sawmvhz1pv30nge1ke", "2024-02-08T11:17:10.003Z"),
				sub("sub_01hp463gxfvndqjjyqn2n7tkth", "active", "pri_01gsz91wy9k1yn7kx82aafwvea", "2024-02-08T11:02:04.975Z"),
				sub("sub_01hn0epy6nc46wt9hw92pp2kmt", "active", "pri_01gsz8x8sawmvhz1pv30nge1ke", "2024-01-25T13:59:50.229Z"),
			}, ""},
		{"a cancel scheduled: canceled; canceled: ended", adapter.KindSubscription, time.Time{},
			entityPage(t, false, "subscription.updated.scheduled_cancel.json", "subscription.canceled.json", "subscription.updated.json"),
			[]adapter.Object{
				sub("sub_01hv8x29kz0t586xy6zn1a62ny", "canceled", "pri_01gsz8x8sawmvhz1pv30nge1ke", "2024-04-12T10:38:00.761Z"),
				sub("sub_01hv8x29kz0t586xy6zn1a62ny", "ended", "pri_01gsz8x8sawmvhz1pv30nge1ke", "2024-04-12T10:38:00.761Z"),
				sub("sub_01hv8x29kz0t586xy6zn1a62ny", "active", "pri_01gsz8x8sawmvhz1pv30nge1ke", "2024-04-12T10:38:00.761Z"),
			}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(tc.page) }))
			defer api.Close()
			c := &paddle.Client{BaseURL: api.URL, Key: "pdl_sdbx_apikey_x"}
			p, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: tc.kind, From: tc.from})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Objects, tc.want) || p.Next != tc.next {
				t.Fatalf("ListObjects = %+v, next %q\nwant %+v, next %q", p.Objects, p.Next, tc.want, tc.next)
			}
		})
	}
}

// ListObjects asks each list with Paddle's parameters (a time filter
// where the list has one, newest first where it has none) and pins the
// client's version, which the listed objects then carry when the answer
// says it.
func TestListObjectsRequest(t *testing.T) {
	t.Parallel()
	var got []*http.Request
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r)
		w.Header().Set(paddle.VersionHeader, "1")
		w.Write([]byte(`{"data":[],"meta":{"pagination":{"per_page":0,"next":"","has_more":false}}}`))
	}))
	defer api.Close()
	c := &paddle.Client{BaseURL: api.URL, Key: "pdl_sdbx_apikey_x", APIVersion: "1"}
	from := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	want := map[string]string{
		adapter.KindPayment:      "/transactions?after=c&created_at%5BGTE%5D=2026-11-30T12%3A00%3A00Z&per_page=30",
		adapter.KindRefund:       "/adjustments?action=refund&after=c&order_by=id%5BDESC%5D&per_page=50",
		adapter.KindDispute:      "/adjustments?action=chargeback&after=c&order_by=id%5BDESC%5D&per_page=50",
		adapter.KindSubscription: "/subscriptions?after=c&order_by=id%5BDESC%5D&per_page=200",
	}
	for _, kind := range adapter.ObjectKinds {
		got = nil
		if _, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: kind, From: from, Cursor: "c", Limit: 500}); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].URL.String() != want[kind] {
			t.Errorf("%s: asked %v; want GET %s", kind, got, want[kind])
			continue
		}
		if v, a := got[0].Header.Get(paddle.VersionHeader), got[0].Header.Get("Authorization"); v != "1" || a != "Bearer pdl_sdbx_apikey_x" {
			t.Errorf("%s: Paddle-Version %q, Authorization %q; want the pinned 1 and the bearer key", kind, v, a)
		}
	}
	if _, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: "invoice"}); err != nil || len(got) != 1 {
		t.Errorf("ListObjects(a kind Paddle has no list of) = %v after %d requests; want an empty last page, asked nothing", err, len(got)-1)
	}
	// The events list pins it too.
	got = nil
	if _, err := c.ListEvents(context.Background(), adapter.EventQuery{}); err != nil || len(got) != 1 || got[0].Header.Get(paddle.VersionHeader) != "1" {
		t.Errorf("ListEvents = %v; want one request with Paddle-Version 1 (%v)", err, got)
	}
	pg2 := fixture(t, "testdata/transactions_pg2.json")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(paddle.VersionHeader, "2")
		w.Write(pg2)
	}))
	defer other.Close()
	c.BaseURL = other.URL
	p, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: adapter.KindPayment})
	if err != nil || len(p.Objects) != 1 || p.Objects[0].APIVersion != "2" {
		t.Errorf("ListObjects = %+v, %v; want the object in the answer's version 2", p, err)
	}
}

// A page ListObjects cannot read is an error wrapping ErrMalformed that
// says what is wrong, never a page of some of its items.
func TestListObjectsMalformed(t *testing.T) {
	t.Parallel()
	page := func(items ...string) string {
		return `{"data":[` + strings.Join(items, ",") + `],"meta":{"pagination":{"per_page":1,"next":"https://api.paddle.com/x?after=z","has_more":false}}}`
	}
	txn := func(totals string) string {
		return `{"id":"txn_1","status":"completed","currency_code":"EUR","created_at":"2026-11-30T12:00:00Z","details":{"totals":` + totals + `}}`
	}
	for _, tc := range []struct {
		name, kind, body, err string
	}{
		{"not JSON", adapter.KindPayment, `<html>gateway</html>`, "not a Paddle list"},
		{"no data", adapter.KindPayment, `{"meta":{}}`, "not a Paddle list"},
		{"an item not an object", adapter.KindPayment, page(`[1]`), "not a Paddle entity"},
		{"an item without an id", adapter.KindPayment, page(`{"status":"completed","created_at":"2026-11-30T12:00:00Z"}`), "without an id or created_at"},
		{"an item without created_at", adapter.KindSubscription, page(`{"id":"sub_1","status":"active"}`), "without an id or created_at"},
		{"a transaction without totals", adapter.KindPayment, page(`{"id":"txn_1","status":"paid","created_at":"2026-11-30T12:00:00Z"}`), "no details.totals"},
		{"an amount with decimals", adapter.KindPayment, page(txn(`{"grand_total":"12.50"}`)), `"12.50", not an amount`},
		{"a negative amount", adapter.KindPayment, page(txn(`{"grand_total":"-5"}`)), `"-5", not an amount`},
		{"a signed amount", adapter.KindRefund, page(`{"id":"adj_1","action":"refund","transaction_id":"txn_1","status":"approved","totals":{"total":"+5"},"created_at":"2026-11-30T12:00:00Z"}`), `"+5", not an amount`},
		{"an amount above payhook's bound", adapter.KindPayment, page(txn(`{"grand_total":"9223372036854775807"}`)), "grand_total"},
		{"a credit above the total", adapter.KindPayment, page(txn(`{"total":"100","credit":"200"}`)), "above its total"},
		{"a refund of no transaction", adapter.KindRefund, page(`{"id":"adj_1","action":"refund","status":"approved","created_at":"2026-11-30T12:00:00Z"}`), "names no transaction_id"},
		{"a refund of an unknown status", adapter.KindRefund, page(`{"id":"adj_1","action":"refund","transaction_id":"txn_1","status":"done","created_at":"2026-11-30T12:00:00Z"}`), `status "done"`},
		{"an empty page that says more follow", adapter.KindRefund, `{"data":[],"meta":{"pagination":{"next":"https://api.paddle.com/adjustments?after=adj_9","has_more":true}}}`, "lists nothing"},
		{"more follow, no after", adapter.KindSubscription, `{"data":[{"id":"sub_1","status":"active","created_at":"2026-11-30T12:00:00Z"}],"meta":{"pagination":{"next":"https://api.paddle.com/subscriptions","has_more":true}}}`, "gives no after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tc.body)) }))
			defer api.Close()
			c := &paddle.Client{BaseURL: api.URL, Key: "pdl_sdbx_apikey_x"}
			p, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: tc.kind})
			if !errors.Is(err, payhook.ErrMalformed) || !strings.Contains(err.Error(), tc.err) || p.Objects != nil {
				t.Fatalf("ListObjects = %+v, %v; want ErrMalformed saying %q", p, err, tc.err)
			}
			if !strings.Contains(err.Error(), "paddle: list") {
				t.Errorf("error %q; want it to name the list", err)
			}
		})
	}
}

// A newest-first list stops at the first item older than the window,
// reading it no further than its id and created_at: malformed items
// beyond the window fail nothing, and that page is the last.
func TestListObjectsStopsBeforeOldMalformed(t *testing.T) {
	t.Parallel()
	page := func(items ...string) string {
		return `{"data":[` + strings.Join(items, ",") + `],"meta":{"pagination":{"per_page":3,"next":"https://api.paddle.com/x?after=z","has_more":true}}}`
	}
	for _, tc := range []struct {
		name, kind, body string
	}{
		{"refunds", adapter.KindRefund, page(
			`{"id":"adj_2","action":"refund","transaction_id":"txn_1","status":"approved","totals":{"total":"5"},"created_at":"2026-11-30T12:00:00Z"}`,
			`{"id":"adj_1","action":"refund","transaction_id":"txn_1","status":"done","totals":{"total":"+5"},"created_at":"2026-11-29T12:00:00Z"}`,
			`{"id":"adj_0","action":"refund","totals":"x","created_at":"2026-11-28T12:00:00Z"}`)},
		{"chargebacks", adapter.KindDispute, page(
			`{"id":"adj_2","action":"chargeback","transaction_id":"txn_1","status":"approved","totals":{"total":"5"},"created_at":"2026-11-30T12:00:00Z"}`,
			`{"id":"adj_1","action":"chargeback","status":"gone","created_at":"2026-11-29T12:00:00Z"}`)},
		{"subscriptions", adapter.KindSubscription, page(
			`{"id":"sub_2","status":"active","items":[{"price":{"id":"pri_1"}}],"created_at":"2026-11-30T12:00:00Z"}`,
			`{"id":"sub_1","status":"active","items":"none","created_at":"2026-11-29T12:00:00Z"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tc.body)) }))
			defer api.Close()
			c := &paddle.Client{BaseURL: api.URL, Key: "pdl_sdbx_apikey_x"}
			p, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: tc.kind, From: at("2026-11-30T00:00:00Z")})
			if err != nil || len(p.Objects) != 1 || !strings.HasSuffix(p.Objects[0].Ref, "_2") || p.Next != "" {
				t.Fatalf("ListObjects = %+v, %v; want the one item in the window, and no next page", p, err)
			}
		})
	}
}
