package sim

import (
	"slices"
	"testing"
)

// A chargeback the merchant wins: the payment returns to its status before
// the dispute, and payment.chargeback_won carries the chargeback's dispute
// id. Only a charged back payment can win, and a payment is disputed once.
func TestWinChargeback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "payment.charged_back", "payment.chargeback_won")
	full := h.payment(t, 1000, "o1")
	part := h.payment(t, 2000, "o2")
	if r := h.do(t, h.test, "POST", "/payments/"+full+"/chargeback/win", nil); r.status != 409 {
		t.Errorf("win of a payment not charged back: %d", r.status)
	}
	if r := h.do(t, h.test, "POST", "/payments/pay_nope/chargeback/win", nil); r.status != 404 {
		t.Errorf("win of an unknown payment: %d", r.status)
	}
	h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": part, "amount": 500})

	for _, c := range []struct{ pay, status string }{{full, "succeeded"}, {part, "partially_refunded"}} {
		cb := h.must(t, 200, h.test, "POST", "/payments/"+c.pay+"/chargeback", nil)
		if cb["status"] != "charged_back" || cb["dispute_id"] != "dp_"+c.pay || cb["charged_back_at"] == nil {
			t.Errorf("chargeback: %v", cb)
		}
		won := h.must(t, 200, h.test, "POST", "/payments/"+c.pay+"/chargeback/win", nil)
		if won["status"] != c.status || won["dispute_id"] != "dp_"+c.pay || won["charged_back_at"] != cb["charged_back_at"] {
			t.Errorf("won: %v, want status %s", won, c.status)
		}
		if p := h.must(t, 200, h.test, "GET", "/payments/"+c.pay, nil); p["status"] != c.status {
			t.Errorf("payment after the win: %v", p)
		}
		if r := h.do(t, h.test, "POST", "/payments/"+c.pay+"/chargeback/win", nil); r.status != 409 {
			t.Errorf("second win: %d", r.status)
		}
		if r := h.do(t, h.test, "POST", "/payments/"+c.pay+"/chargeback", nil); r.status != 409 {
			t.Errorf("second chargeback after a win: %d", r.status)
		}
	}
	// Refunds go on after a won dispute.
	h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": part, "amount": 1500})
	if p := h.must(t, 200, h.test, "GET", "/payments/"+part, nil); p["status"] != "refunded" || p["refunded_amount"] != 2000.0 {
		t.Errorf("refund after the win: %v", p)
	}

	want := []string{"payment.charged_back", "payment.chargeback_won", "payment.charged_back", "payment.chargeback_won"}
	if got := h.sender.to(ep); !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	var disputes []any
	for _, s := range h.sender.Sent() {
		if s.target.ID == ep && s.ev.Type == "payment.chargeback_won" {
			disputes = append(disputes, s.ev.Data["dispute_id"], s.ev.Data["status"], s.ev.ObjectID)
		}
	}
	if w := []any{"dp_" + full, "succeeded", full, "dp_" + part, "partially_refunded", part}; !slices.Equal(disputes, w) {
		t.Errorf("won events %v, want %v", disputes, w)
	}
}
