package sim

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/paddle"
	"github.com/payhook/payhook/sim/flavour"
)

// With the paddle flavour, GET /transactions, /adjustments and
// /subscriptions list the payments, their refunds and chargebacks, and
// the subscriptions in Paddle's shapes, paged by after, newest first on
// order_by=id[DESC], and payhook's Paddle client reads them.
func TestPaddleLists(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Flavour = flavour.Paddle() })
	var pays, subs []string
	for i := range 3 {
		h.clock.Add(time.Minute)
		pays = append(pays, h.payment(t, 1000+int64(i), "ord_"+string(rune('a'+i))))
		h.clock.Add(time.Minute)
		subs = append(subs, h.must(t, 201, h.test, "POST", "/subscriptions", map[string]any{"customer": "cus_1", "plan": "basic"})["id"].(string))
	}
	h.clock.Add(time.Minute)
	refund := h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": pays[0], "amount": 400})["id"].(string)
	h.clock.Add(time.Minute)
	failed := h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": pays[1], "amount": 100, "simulate_failure": true})["id"].(string)
	h.clock.Add(time.Minute)
	h.must(t, 200, h.test, "POST", "/payments/"+pays[2]+"/chargeback", nil)
	h.must(t, 200, h.test, "POST", "/subscriptions/"+subs[1]+"/cancel", nil)
	h.must(t, 200, h.test, "POST", "/subscriptions/"+subs[2]+"/end", nil)

	// Pages of two transactions: next on every page, has_more until the last.
	list := func(path string) (ids []string, items []map[string]any) {
		t.Helper()
		for {
			r := h.do(t, h.test, "GET", path, nil, "Paddle-Version", "1")
			if r.status != 200 || r.header.Get("Paddle-Version") != "1" {
				t.Fatalf("GET %s = %d %s (Paddle-Version %q)", path, r.status, r.body, r.header.Get("Paddle-Version"))
			}
			page := r.json(t)
			for _, d := range page["data"].([]any) {
				items = append(items, d.(map[string]any))
				ids = append(ids, d.(map[string]any)["id"].(string))
			}
			p := page["meta"].(map[string]any)["pagination"].(map[string]any)
			next, _ := url.Parse(p["next"].(string))
			if p["has_more"] != true {
				return ids, items
			}
			q, _ := url.ParseQuery(path[len(next.Path)+1:])
			q.Set("after", next.Query().Get("after"))
			path = next.Path + "?" + q.Encode()
		}
	}
	if ids, txns := list("/transactions?per_page=2"); !slices.Equal(ids, pays) {
		t.Errorf("transactions %v; want the payments %v", ids, pays)
	} else if tt := txns[0]["details"].(map[string]any)["totals"].(map[string]any); txns[0]["status"] != "completed" || tt["grand_total"] != "1000" || txns[0]["currency_code"] != "eur" {
		t.Errorf("transaction %v; want completed, grand_total \"1000\" in eur", txns[0])
	}
	if ids, _ := list("/transactions?created_at%5BGTE%5D=" + url.QueryEscape(h.clock.Now().Add(-5*time.Minute).Format(time.RFC3339))); !slices.Equal(ids, pays[2:]) {
		t.Errorf("transactions created since 5 minutes ago %v; want %v", ids, pays[2:])
	}
	ids, adjs := list("/adjustments?per_page=1")
	if !slices.Equal(ids, []string{"adj_" + refund, "adj_" + failed, "adj_cb_" + pays[2]}) {
		t.Errorf("adjustments %v; want the two refunds and the chargeback, in order", ids)
	} else if adjs[0]["status"] != "approved" || adjs[1]["status"] != "rejected" || adjs[2]["status"] != "approved" || adjs[2]["action"] != "chargeback" ||
		adjs[0]["totals"].(map[string]any)["total"] != "400" || adjs[0]["transaction_id"] != pays[0] {
		t.Errorf("adjustments %v", adjs)
	}
	if ids, _ := list("/adjustments?action=chargeback"); !slices.Equal(ids, []string{"adj_cb_" + pays[2]}) {
		t.Errorf("chargebacks %v", ids)
	}
	if ids, _ := list("/adjustments?action=credit"); len(ids) != 0 {
		t.Errorf("credits %v; want none", ids)
	}
	newest := slices.Clone(subs)
	slices.Reverse(newest)
	if ids, _ := list("/subscriptions?order_by=id%5BDESC%5D&per_page=1"); !slices.Equal(ids, newest) {
		t.Errorf("subscriptions newest first %v; want %v", ids, newest)
	}

	// payhook's Paddle client reads them into what reconcile compares.
	c := &paddle.Client{BaseURL: h.srv.URL, Key: h.test}
	read := func(kind string) []adapter.Object {
		var out []adapter.Object
		q := adapter.ObjectQuery{Kind: kind, Limit: 1}
		for {
			p, err := c.ListObjects(context.Background(), q)
			if err != nil {
				t.Fatalf("ListObjects(%s) = %v", kind, err)
			}
			out = append(out, p.Objects...)
			if p.Next == "" {
				return out
			}
			q.Cursor = p.Next
		}
	}
	got := map[string][]string{}
	for _, kind := range adapter.ObjectKinds {
		for _, o := range read(kind) {
			got[kind] = append(got[kind], o.Ref+" "+o.PaymentRef+" "+o.Status+" "+o.Plan)
		}
	}
	want := map[string][]string{
		adapter.KindPayment: {pays[0] + "  succeeded ", pays[1] + "  succeeded ", pays[2] + "  succeeded "},
		adapter.KindRefund:  {failed + " " + pays[1] + " failed ", refund + " " + pays[0] + " succeeded "},
		adapter.KindDispute: {"adj_cb_" + pays[2] + " " + pays[2] + " lost "},
		adapter.KindSubscription: {
			subs[2] + "  ended basic", subs[1] + "  canceled basic", subs[0] + "  active basic",
		},
	}
	for _, kind := range adapter.ObjectKinds {
		if !slices.Equal(got[kind], want[kind]) {
			t.Errorf("%s: read %q; want %q", kind, got[kind], want[kind])
		}
	}
	h.must(t, 200, h.test, "POST", "/payments/"+pays[2]+"/chargeback/win", nil)
	if ds := read(adapter.KindDispute); len(ds) != 1 || ds[0].Status != "won" {
		t.Errorf("disputes after the win %+v; want the chargeback won", ds)
	}

	for _, path := range []string{
		"/transactions?per_page=0", "/transactions?per_page=x", "/transactions?order_by=amount%5BASC%5D",
		"/transactions?created_at%5BGTE%5D=yesterday", "/transactions?status=completed",
		"/adjustments?created_at%5BGTE%5D=2026-01-01T00:00:00Z", "/adjustments?action=gift", "/adjustments?order_by=created_at%5BASC%5D",
		"/subscriptions?action=refund", "/subscriptions?after=sub_nope", "/subscriptions?after=a&after=b",
	} {
		if r := h.do(t, h.test, "GET", path, nil); r.status != 400 || r.errType(t) != "invalid_request" {
			t.Errorf("GET %s = %d %s; want 400 invalid_request", path, r.status, r.body)
		}
	}
	if r := h.do(t, h.test, "GET", "/transactions?per_page=500", nil); r.status != 200 {
		t.Errorf("GET /transactions?per_page=500 = %d %s; want 200 (Paddle's most, 30)", r.status, r.body)
	}
}
