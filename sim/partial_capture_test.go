package sim

import (
	"encoding/json"
	"testing"

	"github.com/payhook/payhook/sim/flavour"
)

// A partial capture, as Stripe makes one: the checkout's 1000 authorized,
// 600 captured, the other 400 released at once by a refund Stripe makes
// itself (no reason), which its charge counts in amount_refunded and
// charge.refunded tells. The payment is of 600 with nothing refunded, and
// 600 is what is left to refund. The refund list and the refund's
// retrieve serve the charge expanded with its refunds
// (expand[]=data.charge.refunds, expand[]=charge.refunds), as payhook asks
// them. Other flavours have no partial capture.
func TestStripePartialCapture(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Flavour = flavour.Stripe() })
	h.endpoint(t, h.test, "*")
	c := h.must(t, 201, h.test, "POST", "/checkouts", map[string]any{"amount": 1000, "currency": "eur", "metadata": map[string]string{"order_id": "ord_1"}})
	for _, bad := range []int64{-1, 1001} {
		if r := h.do(t, h.test, "POST", "/checkouts/"+c["id"].(string)+"/complete", map[string]any{"amount_to_capture": bad}); r.status != 400 {
			t.Errorf("amount_to_capture %d: %d %s; want 400", bad, r.status, r.body)
		}
	}
	pay := h.must(t, 200, h.test, "POST", "/checkouts/"+c["id"].(string)+"/complete", map[string]any{"amount_to_capture": 600})
	id := pay["id"].(string)
	if pay["amount"] != 600.0 || pay["authorized"] != 1000.0 || pay["refunded_amount"] != 0.0 || pay["status"] != "succeeded" {
		t.Fatalf("payment %v; want 600 captured of 1000 authorized, nothing refunded", pay)
	}

	// Its events as Stripe delivers them.
	objects := map[string]map[string]any{}
	for _, s := range h.sender.Sent() {
		b, err := flavour.Stripe().Body(s.ev, "")
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Type string
			Data struct{ Object map[string]any }
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		objects[ev.Type] = ev.Data.Object
	}
	if o := objects["checkout.session.completed"]; o["payment_status"] != "unpaid" || o["amount_total"] != 1000.0 {
		t.Errorf("checkout.session.completed %v; want 1000 authorized, unpaid", o)
	}
	if o := objects["payment_intent.succeeded"]; o["amount"] != 1000.0 || o["amount_received"] != 600.0 {
		t.Errorf("payment_intent.succeeded %v; want amount 1000, amount_received 600", o)
	}
	o := objects["charge.refunded"]
	if o["amount"] != 1000.0 || o["amount_captured"] != 600.0 || o["amount_refunded"] != 400.0 || o["refunded"] != false {
		t.Errorf("charge.refunded %v; want the charge of 1000 captured 600, the release of 400 refunded", o)
	}
	rs, _ := o["refunds"].(map[string]any)["data"].([]any)
	if len(rs) != 1 || rs[0].(map[string]any)["amount"] != 400.0 || rs[0].(map[string]any)["release"] != nil {
		t.Fatalf("charge.refunded's refunds %v; want the release of 400, Stripe's shape", rs)
	}
	release := rs[0].(map[string]any)["id"].(string)

	// Only what was captured is left to refund.
	if r := h.do(t, h.test, "POST", "/refunds", map[string]any{"payment_id": id, "amount": 601}); r.status != 400 {
		t.Errorf("refund of 601 of 600 captured: %d %s; want 400", r.status, r.body)
	}
	real := h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": id, "amount": 100})
	if p := h.must(t, 200, h.test, "GET", "/payments/"+id, nil); p["refunded_amount"] != 100.0 || p["status"] != "partially_refunded" {
		t.Errorf("payment after a refund of 100: %v; want 100 refunded", p)
	}

	ch := h.must(t, 200, h.test, "GET", "/v1/charges/"+id+"?expand[]=refunds", nil)
	if ch["amount"] != 1000.0 || ch["amount_captured"] != 600.0 || ch["amount_refunded"] != 500.0 {
		t.Errorf("charge %v; want 1000, captured 600, 500 refunded (the release and 100)", ch)
	}
	listed := h.must(t, 200, h.test, "GET", "/v1/refunds?expand[]=data.charge.refunds", nil)["data"].([]any)
	if len(listed) != 2 {
		t.Fatalf("refunds listed %v; want the release and the refund", listed)
	}
	for _, l := range listed {
		charge, _ := l.(map[string]any)["charge"].(map[string]any)
		refunds, _ := charge["refunds"].(map[string]any)
		if charge["amount_captured"] != 600.0 || refunds == nil || len(refunds["data"].([]any)) != 2 {
			t.Errorf("listed refund %v; want its charge expanded with its two refunds", l)
		}
	}
	for expand, want := range map[string]string{"": "string", "?expand[]=charge": "charge", "?expand[]=charge.refunds": "charge and refunds"} {
		got := h.must(t, 200, h.test, "GET", "/v1/refunds/"+release+expand, nil)
		what := "string"
		if charge, ok := got["charge"].(map[string]any); ok {
			what = "charge"
			if _, ok := charge["refunds"]; ok {
				what = "charge and refunds"
			}
		}
		if what != want {
			t.Errorf("GET /v1/refunds/%s%s: the charge %v; want %s", release, expand, got["charge"], want)
		}
	}
	if real["id"] == release {
		t.Fatal("the refund is the release")
	}

	b := newHarness(t, func(c *Config) { c.Flavour = flavour.Billete() })
	bc := b.must(t, 201, b.test, "POST", "/checkouts", map[string]any{"amount": 1000, "currency": "eur"})
	if r := b.do(t, b.test, "POST", "/checkouts/"+bc["id"].(string)+"/complete", map[string]any{"amount_to_capture": 600}); r.status != 400 {
		t.Errorf("billete: a partial capture: %d %s; want 400", r.status, r.body)
	}
}
