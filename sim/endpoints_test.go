package sim

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook/sim/deliver"
)

func TestEndpointSecretShownOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	created := h.must(t, 201, h.test, "POST", "/webhook_endpoints", map[string]any{
		"url": "https://shop.example/hook", "events": []string{"checkout.completed"}, "api_version": "2025-06-01",
	})
	id, _ := created["id"].(string)
	secret, _ := created["secret"].(string)
	if id == "" || secret == "" || created["url"] != "https://shop.example/hook" || created["api_version"] != "2025-06-01" || created["environment"] != "test" {
		t.Fatalf("created: %v", created)
	}

	got := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+id, nil)
	if _, ok := got["secret"]; ok {
		t.Errorf("GET shows the secret: %v", got)
	}
	listed := h.must(t, 200, h.test, "GET", "/webhook_endpoints", nil)["data"].([]any)
	if len(listed) != 1 {
		t.Fatalf("list: %v", listed)
	}
	if _, ok := listed[0].(map[string]any)["secret"]; ok {
		t.Errorf("list shows the secret: %v", listed)
	}
	if bytes.Contains(h.do(t, h.test, "GET", "/webhook_endpoints", nil).body, []byte(secret)) {
		t.Errorf("the secret appears in the list body")
	}

	// The secret shown is the one deliveries are signed with.
	h.must(t, 202, h.test, "POST", "/webhook_endpoints/"+id+"/test", nil)
	sent := h.sender.Sent()
	if len(sent) != 1 || !slices.Equal(sent[0].target.Secrets(), []string{secret}) {
		t.Fatalf("sent %+v", sent)
	}
	if sent[0].target.URL != "https://shop.example/hook" || sent[0].target.Flavour == nil {
		t.Errorf("target %+v", sent[0].target)
	}

	// Update, then delete.
	upd := h.must(t, 200, h.test, "POST", "/webhook_endpoints/"+id, map[string]any{"events": []string{"*"}, "api_version": "2026-01-01"})
	if upd["api_version"] != "2026-01-01" || upd["url"] != "https://shop.example/hook" || fmt.Sprint(upd["events"]) != "[*]" {
		t.Errorf("updated: %v", upd)
	}
	if _, ok := upd["secret"]; ok {
		t.Errorf("update shows the secret")
	}
	h.must(t, 200, h.test, "DELETE", "/webhook_endpoints/"+id, nil)
	if r := h.do(t, h.test, "GET", "/webhook_endpoints/"+id, nil); r.status != 404 {
		t.Errorf("GET after delete: %d", r.status)
	}
	h.payment(t, 100, "o1")
	if n := len(h.sender.Sent()); n != 1 {
		t.Errorf("a deleted endpoint still receives: %d sends", n)
	}
}

func TestRotateSecretGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Grace = time.Hour })
	created := h.must(t, 201, h.test, "POST", "/webhook_endpoints", map[string]any{"url": "http://127.0.0.1:1/", "events": []string{"*"}})
	id, old := created["id"].(string), created["secret"].(string)
	// A target handed out before the rotation follows it: Secrets is read
	// at call time.
	before, err := h.p.Target(EnvTest, id)
	if err != nil {
		t.Fatal(err)
	}

	rot := h.must(t, 200, h.test, "POST", "/webhook_endpoints/"+id+"/rotate_secret", nil)
	fresh, _ := rot["secret"].(string)
	if fresh == "" || fresh == old {
		t.Fatalf("rotate: %v", rot)
	}
	if _, ok := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+id, nil)["secret"]; ok {
		t.Errorf("GET shows the secret after rotation")
	}

	for _, step := range []struct {
		advance time.Duration
		want    []string
	}{
		{0, []string{fresh, old}},
		{59 * time.Minute, []string{fresh, old}},
		{time.Minute, []string{fresh}}, // exactly Grace later
		{24 * time.Hour, []string{fresh}},
	} {
		h.clock.Add(step.advance)
		if got := before.Secrets(); !slices.Equal(got, step.want) {
			t.Errorf("after +%v: secrets %v, want %v", step.advance, got, step.want)
		}
	}

	// A second rotation: the rotated-out secret signs beside the newest.
	newest := h.must(t, 200, h.test, "POST", "/webhook_endpoints/"+id+"/rotate_secret", nil)["secret"].(string)
	h.must(t, 202, h.test, "POST", "/webhook_endpoints/"+id+"/test", nil)
	sent := h.sender.Sent()
	if got := sent[len(sent)-1].target.Secrets(); !slices.Equal(got, []string{newest, fresh}) {
		t.Errorf("after second rotation: %v", got)
	}
	if r := h.do(t, h.live, "POST", "/webhook_endpoints/"+id+"/rotate_secret", nil); r.status != 404 {
		t.Errorf("rotating with the other env's key: %d", r.status)
	}
}

func TestTestEventReachesOnlyItsEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.endpoint(t, h.test, "*")
	b := h.endpoint(t, h.test, "*")
	c := h.endpoint(t, h.test, "webhook_endpoint.test")
	ev := h.must(t, 202, h.test, "POST", "/webhook_endpoints/"+b+"/test", nil)
	if ev["type"] != "webhook_endpoint.test" || ev["id"] == "" {
		t.Errorf("test event: %v", ev)
	}
	sent := h.sender.Sent()
	if len(sent) != 1 || sent[0].target.ID != b || sent[0].ev.Type != "webhook_endpoint.test" || sent[0].ev.Data["endpoint_id"] != b {
		t.Fatalf("sent %+v", sent)
	}
	if len(h.sender.to(a)) != 0 || len(h.sender.to(c)) != 0 {
		t.Errorf("other endpoints received the test event")
	}
	if r := h.do(t, h.live, "POST", "/webhook_endpoints/"+b+"/test", nil); r.status != 404 {
		t.Errorf("test through the live key: %d", r.status)
	}
}

func TestDeliveriesAndResend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	liveEp := h.endpoint(t, h.live, "*")
	h.sender.mu.Lock()
	h.sender.logs[ep] = []deliver.Attempt{{DeliveryID: "dlv_1", EventID: "evt_1", EventType: "checkout.completed", N: 1, Status: 500}}
	h.sender.logs[liveEp] = []deliver.Attempt{{DeliveryID: "dlv_live", N: 1, Status: 200}}
	h.sender.failing["dlv_gone"] = true
	h.sender.logs[ep] = append(h.sender.logs[ep], deliver.Attempt{DeliveryID: "dlv_gone", N: 1})
	h.sender.mu.Unlock()

	log := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+ep+"/deliveries", nil)["data"].([]any)
	if len(log) != 2 || log[0].(map[string]any)["delivery_id"] != "dlv_1" || log[0].(map[string]any)["status"] != 500.0 {
		t.Errorf("log %v", log)
	}
	other := h.endpoint(t, h.test, "*")
	if l := h.must(t, 200, h.test, "GET", "/webhook_endpoints/"+other+"/deliveries", nil)["data"].([]any); len(l) != 0 {
		t.Errorf("empty log %v", l)
	}
	if r := h.do(t, h.test, "GET", "/webhook_endpoints/"+liveEp+"/deliveries", nil); r.status != 404 {
		t.Errorf("other env's log: %d", r.status)
	}

	h.must(t, 202, h.test, "POST", "/deliveries/dlv_1/resend", nil)
	for _, tc := range []struct {
		id     string
		status int
	}{{"dlv_nope", 404}, {"dlv_live", 404}, {"dlv_gone", 409}} {
		if r := h.do(t, h.test, "POST", "/deliveries/"+tc.id+"/resend", nil); r.status != tc.status {
			t.Errorf("resend %s: %d %s, want %d", tc.id, r.status, r.body, tc.status)
		}
	}
	h.sender.mu.Lock()
	defer h.sender.mu.Unlock()
	if !slices.Equal(h.sender.resent, []string{"dlv_1"}) {
		t.Errorf("resent %v", h.sender.resent)
	}
}
