package sim

import (
	"slices"
	"testing"
	"time"
)

func TestSubscriptionLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ep := h.endpoint(t, h.test, "*")
	start := h.clock.Now()
	s := h.must(t, 201, h.test, "POST", "/subscriptions", map[string]any{"customer": "cus_1", "plan": "basic"})
	id := s["id"].(string)
	if s["status"] != "active" || s["plan"] != "basic" || s["customer"] != "cus_1" {
		t.Fatalf("created %v", s)
	}
	for _, step := range []struct {
		path   string
		body   any
		status int
		plan   string
		state  string
		period time.Duration // current_period_end - start
	}{
		{"", map[string]any{"plan": "pro"}, 200, "pro", "active", SubscriptionPeriod},
		{"/renew", nil, 200, "pro", "active", 2 * SubscriptionPeriod},
		{"/cancel", nil, 200, "pro", "canceled", 2 * SubscriptionPeriod},
		{"/renew", nil, 409, "", "", 0},
		{"", map[string]any{"plan": "basic"}, 409, "", "", 0},
		{"/cancel", nil, 409, "", "", 0},
		{"/end", nil, 200, "pro", "ended", 7 * time.Hour / 4}, // ends now, the 7th quarter hour
		{"/end", nil, 409, "", "", 0},
	} {
		h.clock.Add(time.Hour / 4)
		r := h.do(t, h.test, "POST", "/subscriptions/"+id+step.path, step.body)
		if r.status != step.status {
			t.Fatalf("POST %s: %d %s, want %d", step.path, r.status, r.body, step.status)
		}
		if step.status != 200 {
			continue
		}
		m := r.json(t)
		end, _ := time.Parse(time.RFC3339Nano, m["current_period_end"].(string))
		if m["plan"] != step.plan || m["status"] != step.state || end.Sub(start) != step.period || m["updated_at"] != h.clock.Now().Format(time.RFC3339Nano) {
			t.Errorf("POST %s: %v", step.path, m)
		}
	}
	want := []string{"subscription.created", "subscription.updated", "subscription.renewed", "subscription.canceled", "subscription.ended"}
	if got := h.sender.to(ep); !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
	if got := h.eventTypes(t, EnvTest); !slices.Equal(got, want) {
		t.Errorf("log %v, want %v", got, want)
	}
	sent := h.sender.Sent()
	if d := sent[1].ev.Data; d["plan"] != "pro" || d["status"] != "active" || d["customer"] != "cus_1" || d["id"] != id {
		t.Errorf("subscription.updated data %v", d)
	}
	if d := sent[4].ev.Data; d["status"] != "ended" {
		t.Errorf("subscription.ended data %v", d)
	}
	if g := h.must(t, 200, h.test, "GET", "/subscriptions/"+id, nil); g["status"] != "ended" {
		t.Errorf("GET %v", g)
	}
}
