package sim

import (
	"slices"
	"sync"
	"testing"
)

func TestRefundIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.endpoint(t, h.test, "*")
	pay := h.payment(t, 1000, "o1")
	refund := func(key string, amount int64) response {
		return h.do(t, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": amount}, "Idempotency-Key", key)
	}
	refunded := func() int {
		n := 0
		for _, typ := range h.eventTypes(t, EnvTest) {
			if typ == "payment.refunded" {
				n++
			}
		}
		return n
	}

	first := refund("k1", 300)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	r1 := first.json(t)
	again := refund("k1", 300)
	if again.status != 201 || again.json(t)["id"] != r1["id"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("same key: %d %s (replayed %q), want refund %v", again.status, again.body, again.header.Get("Idempotent-Replayed"), r1["id"])
	}
	if p := h.must(t, 200, h.test, "GET", "/payments/"+pay, nil); p["refunded_amount"] != 300.0 || p["status"] != "partially_refunded" {
		t.Errorf("after one refund, twice asked: %v", p)
	}
	if n := refunded(); n != 1 {
		t.Errorf("%d payment.refunded events, want 1", n)
	}

	second := refund("k2", 300)
	if second.status != 201 || second.json(t)["id"] == r1["id"] {
		t.Errorf("other key: %d %s", second.status, second.body)
	}

	over := refund("k3", 401)
	if over.status != 400 || over.errType(t) != "invalid_request" {
		t.Errorf("over-refund: %d %s", over.status, over.body)
	}
	if n := refunded(); n != 2 {
		t.Errorf("%d payment.refunded events after the over-refund, want 2", n)
	}

	if r := refund("k1", 200); r.status != 409 || r.errType(t) != "conflict" {
		t.Errorf("same key, other amount: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": 300, "simulate_failure": true}, "Idempotency-Key", "k1"); r.status != 409 {
		t.Errorf("same key, now failing: %d %s", r.status, r.body)
	}

	last := refund("k3", 400) // k3 was not taken by the rejected request
	if last.status != 201 {
		t.Fatalf("rest: %d %s", last.status, last.body)
	}
	p := h.must(t, 200, h.test, "GET", "/payments/"+pay, nil)
	if p["refunded_amount"] != 1000.0 || p["status"] != "refunded" {
		t.Errorf("fully refunded: %v", p)
	}

	// payment.refunded carries the payment after the refund and the refund.
	st, _ := h.p.Snapshot(EnvTest)
	ev := st.Events[len(st.Events)-1]
	ref, _ := ev.Data["refund"].(map[string]any)
	if ev.Type != "payment.refunded" || ev.ObjectID != pay || ev.Data["status"] != "refunded" || ev.Data["refunded_amount"] != int64(1000) ||
		ref["id"] != last.json(t)["id"] || ref["amount"] != int64(400) || ref["status"] != "succeeded" {
		t.Errorf("last event %+v", ev)
	}
	if len(st.Refunds) != 3 {
		t.Errorf("%d refunds, want 3", len(st.Refunds))
	}
	if r := h.do(t, h.test, "GET", "/refunds/"+r1["id"].(string), nil); r.status != 200 {
		t.Errorf("GET refund: %d", r.status)
	}
}

func TestRefundConcurrentSameKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pay := h.payment(t, 1000, "o1")
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Go(func() {
			r, err := h.p.Refund(EnvTest, pay, 100, "same", false)
			if err != nil {
				t.Error(err)
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	if ids[0] == "" || slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
		t.Errorf("ids %v", ids)
	}
	if p, _ := h.p.GetPayment(EnvTest, pay); p.RefundedAmount != 100 {
		t.Errorf("refunded %d, want 100", p.RefundedAmount)
	}
}

func TestRefundFailureAndChargeback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "refund.failed", "payment.charged_back")
	pay := h.payment(t, 1000, "o1")
	r := h.must(t, 201, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": 250, "simulate_failure": true})
	if r["status"] != "failed" || r["reason"] == nil || r["payment_id"] != pay {
		t.Errorf("failed refund: %v", r)
	}
	if p := h.must(t, 200, h.test, "GET", "/payments/"+pay, nil); p["status"] != "succeeded" || p["refunded_amount"] != 0.0 {
		t.Errorf("payment after a failed refund: %v", p)
	}
	cb := h.must(t, 200, h.test, "POST", "/payments/"+pay+"/chargeback", nil)
	if cb["status"] != "charged_back" {
		t.Errorf("chargeback: %v", cb)
	}
	if r := h.do(t, h.test, "POST", "/payments/"+pay+"/chargeback", nil); r.status != 409 {
		t.Errorf("second chargeback: %d", r.status)
	}
	if r := h.do(t, h.test, "POST", "/refunds", map[string]any{"payment_id": pay, "amount": 1}); r.status != 409 {
		t.Errorf("refund of a charged-back payment: %d", r.status)
	}
	if got := h.sender.to(ep); !slices.Equal(got, []string{"refund.failed", "payment.charged_back"}) {
		t.Errorf("sent %v", got)
	}
	sent := h.sender.Sent()
	if d := sent[0].ev.Data; d["id"] != r["id"] || d["status"] != "failed" || d["amount"] != int64(250) {
		t.Errorf("refund.failed data %v", d)
	}
}
