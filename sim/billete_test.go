package sim

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/sim/flavour"
)

// With the real billete flavour: what the provider sends verifies with
// payhook's billete verifier under the secret shown once (and, during a
// rotation, under either secret), and the events list pages the billete
// way.
func TestBilleteFlavour(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Flavour = flavour.Billete(); c.Now = time.Now })
	created := h.must(t, 201, h.test, "POST", "/webhook_endpoints", map[string]any{"url": "http://127.0.0.1:1/hook", "events": []string{"*"}})
	id, secret := created["id"].(string), created["secret"].(string)

	verify := func(t *testing.T, se sentEvent, secrets ...string) payhook.Envelope {
		t.Helper()
		f := se.target.Flavour
		body, err := f.Body(se.ev, "dlv_1")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		hdr, err := f.Sign(se.target.Secrets(), se.ev, "dlv_1", body, now)
		if err != nil {
			t.Fatal(err)
		}
		v, err := billete.New(billete.Config{Secrets: secrets})
		if err != nil {
			t.Fatal(err)
		}
		env, err := v.Verify(payhook.Delivery{Header: hdr, Body: body, ReceivedAt: now})
		if err != nil {
			t.Fatalf("verify with %d secret(s): %v", len(secrets), err)
		}
		return env
	}

	h.payment(t, 1200, "ord_1")
	sent := h.sender.Sent()
	if len(sent) != 2 {
		t.Fatalf("%d sends", len(sent))
	}
	env := verify(t, sent[0], secret)
	if env.EventID != sent[0].ev.ID || env.Type != "checkout.completed" || env.Environment != "test" {
		t.Errorf("envelope %+v", env)
	}

	fresh := h.must(t, 200, h.test, "POST", "/webhook_endpoints/"+id+"/rotate_secret", nil)["secret"].(string)
	h.must(t, 202, h.test, "POST", "/webhook_endpoints/"+id+"/test", nil)
	sent = h.sender.Sent()
	last := sent[len(sent)-1]
	verify(t, last, secret) // the old secret still verifies during the grace
	verify(t, last, fresh)

	// GET /events, billete-style, one event a page.
	var ids []string
	cursor := ""
	for range 10 {
		path := "/events?limit=1"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := h.do(t, h.test, "GET", path, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		var page struct {
			Data []struct {
				ID          string         `json:"id"`
				Type        string         `json:"type"`
				Environment string         `json:"environment"`
				APIVersion  string         `json:"api_version"`
				Data        map[string]any `json:"data"`
			} `json:"data"`
			HasMore    bool    `json:"has_more"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Data {
			ids = append(ids, ev.ID)
			if ev.Environment != "test" || ev.APIVersion != DefaultAPIVersion || len(ev.Data) == 0 {
				t.Errorf("listed event %+v", ev)
			}
		}
		if !page.HasMore {
			break
		}
		cursor = *page.NextCursor
	}
	st, _ := h.p.Snapshot(EnvTest)
	var want []string
	for _, ev := range st.Events {
		want = append(want, ev.ID)
	}
	if len(want) != 3 || !slices.Equal(ids, want) {
		t.Errorf("listed %v, want %v", ids, want)
	}
	if r := h.do(t, h.test, "GET", "/events?type=payment.succeeded", nil); r.status != 200 || !json.Valid(r.body) {
		t.Errorf("type filter: %d %s", r.status, r.body)
	}
}
