package sim

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestCheckoutComplete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	c := h.must(t, 201, h.test, "POST", "/checkouts", map[string]any{"amount": 4999, "currency": "eur", "metadata": map[string]string{"order_id": "ord_42"}})
	id := c["id"].(string)
	if c["status"] != "open" || c["metadata"].(map[string]any)["order_id"] != "ord_42" || c["amount"] != 4999.0 {
		t.Fatalf("checkout %v", c)
	}
	if len(h.sender.Sent()) != 0 {
		t.Errorf("an open checkout sent an event")
	}
	pay := h.must(t, 200, h.test, "POST", "/checkouts/"+id+"/complete", nil)
	payID := pay["id"].(string)
	if pay["status"] != "succeeded" || pay["order_id"] != "ord_42" || pay["checkout_id"] != id || pay["amount"] != 4999.0 || pay["currency"] != "eur" || pay["refunded_amount"] != 0.0 {
		t.Errorf("payment %v", pay)
	}
	if r := h.do(t, h.test, "POST", "/checkouts/"+id+"/complete", nil); r.status != 409 {
		t.Errorf("second complete: %d %s", r.status, r.body)
	}
	if g := h.must(t, 200, h.test, "GET", "/checkouts/"+id, nil); g["status"] != "completed" || g["payment_id"] != payID {
		t.Errorf("GET checkout %v", g)
	}

	sent := h.sender.Sent()
	if got := h.sender.to(ep); !slices.Equal(got, []string{"checkout.completed", "payment.succeeded"}) {
		t.Fatalf("sent %v", got)
	}
	cd, pd := sent[0].ev.Data, sent[1].ev.Data
	if meta, _ := cd["metadata"].(map[string]any); meta["order_id"] != "ord_42" || cd["id"] != id || cd["payment_id"] != payID || cd["status"] != "completed" || cd["amount"] != int64(4999) {
		t.Errorf("checkout.completed data %v", cd)
	}
	if pd["order_id"] != "ord_42" || pd["id"] != payID || pd["checkout_id"] != id || pd["status"] != "succeeded" || sent[1].ev.ObjectID != payID {
		t.Errorf("payment.succeeded data %v", pd)
	}
	if sent[0].ev.Seq != 1 || sent[1].ev.Seq != 2 || sent[0].ev.Environment != "test" || sent[0].ev.ID[:4] != "evt_" {
		t.Errorf("events %+v %+v", sent[0].ev, sent[1].ev)
	}

	st, err := h.p.Snapshot(EnvTest)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Checkouts) != 1 || len(st.Payments) != 1 || st.Payments[0].OrderID != "ord_42" || len(st.Events) != 2 || len(st.Endpoints) != 1 {
		t.Errorf("snapshot %+v", st)
	}
	if _, err := json.Marshal(st); err != nil {
		t.Errorf("snapshot does not marshal: %v", err)
	}
}
