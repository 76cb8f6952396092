package sim

import (
	"errors"
	"slices"
	"testing"
)

func TestInvoiceSettlesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	inv := h.must(t, 201, h.test, "POST", "/invoices", map[string]any{"amount": 150000, "currency": "BTC", "order_id": "o9"})
	id := inv["id"].(string)
	if inv["status"] != "new" || inv["order_id"] != "o9" || id[:4] != "inv_" {
		t.Fatalf("invoice %v", inv)
	}
	if len(h.sender.Sent()) != 0 {
		t.Errorf("creating an invoice sent an event")
	}
	if r := h.do(t, h.test, "POST", "/invoices/"+id+"/settle", map[string]any{}); r.status != 400 {
		t.Errorf("settle without chain_ref: %d", r.status)
	}
	s := h.must(t, 200, h.test, "POST", "/invoices/"+id+"/settle", map[string]any{"chain_ref": "0xabc"})
	if s["status"] != "settled" || s["chain_ref"] != "0xabc" {
		t.Errorf("settled: %v", s)
	}
	r := h.do(t, h.test, "POST", "/invoices/"+id+"/settle", map[string]any{"chain_ref": "0xdef"})
	if r.status != 409 || r.errType(t) != "conflict" {
		t.Errorf("second settle: %d %s", r.status, r.body)
	}
	if g := h.must(t, 200, h.test, "GET", "/invoices/"+id, nil); g["chain_ref"] != "0xabc" || g["status"] != "settled" {
		t.Errorf("GET after second settle: %v", g)
	}
	if got := h.sender.to(ep); !slices.Equal(got, []string{"invoice.settled"}) {
		t.Errorf("sent %v", got)
	}
	d := h.sender.Sent()[0].ev.Data
	if d["id"] != id || d["order_id"] != "o9" || d["chain_ref"] != "0xabc" || d["status"] != "settled" || d["amount"] != int64(150000) || d["currency"] != "BTC" {
		t.Errorf("invoice.settled data %v", d)
	}
	// A chain reference may be reused on another invoice (a scenario does).
	other, _ := h.p.CreateInvoice(EnvTest, 1, "BTC", "o10")
	if _, err := h.p.SettleInvoice(EnvTest, other.ID, "0xabc"); err != nil {
		t.Errorf("reused chain_ref: %v", err)
	}
	if _, err := h.p.SettleInvoice(EnvTest, other.ID, "0xabc"); !errors.Is(err, ErrConflict) {
		t.Errorf("Go settle twice: %v", err)
	}
}
