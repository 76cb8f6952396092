package sim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/payhook/payhook/sim/flavour"
)

func TestEventsPagination(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var subs []string
	for i := range 25 {
		s, err := h.p.CreateSubscription(EnvTest, fmt.Sprintf("cus_%d", i), "basic")
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s.ID)
		h.clock.Add(time.Second)
	}
	for _, id := range subs[:3] {
		if _, err := h.p.RenewSubscription(EnvTest, id); err != nil {
			t.Fatal(err)
		}
	}
	// 28 events: 25 created (at +0s..+24s), 3 renewed (at +25s).

	type page struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Seq  int64  `json:"seq"`
		} `json:"data"`
		Next string `json:"next_cursor"`
	}
	walk := func(t *testing.T, query string) (ids []string, sizes []int) {
		t.Helper()
		cursor := ""
		for range 100 {
			q := query
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			r := h.do(t, h.test, "GET", "/events?"+q, nil)
			if r.status != 200 {
				t.Fatalf("GET /events?%s: %d %s", q, r.status, r.body)
			}
			var pg page
			if err := json.Unmarshal(r.body, &pg); err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(pg.Data))
			for _, ev := range pg.Data {
				ids = append(ids, ev.ID)
			}
			if pg.Next == "" {
				return ids, sizes
			}
			if pg.Next != pg.Data[len(pg.Data)-1].ID {
				t.Fatalf("cursor %q is not the last event of the page", pg.Next)
			}
			cursor = pg.Next
		}
		t.Fatal("no last page")
		return nil, nil
	}

	st, _ := h.p.Snapshot(EnvTest)
	all := make([]string, len(st.Events))
	for i, ev := range st.Events {
		all[i] = ev.ID
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
	}
	created := all[:25]
	from := h.clock.t.Add(-10 * time.Second) // +15s: created 15..24, the 3 renewals

	for _, tc := range []struct {
		name  string
		query string
		want  []string
		sizes []int
	}{
		{"all, limit 10", "limit=10", all, []int{10, 10, 8}},
		{"all, default limit", "", all, []int{28}},
		{"type, limit 10", "limit=10&type=subscription.created", created, []int{10, 10, 5}},
		{"type renewed", "type=subscription.renewed&limit=2", all[25:], []int{2, 1}},
		{"created_from", "limit=10&created_from=" + url.QueryEscape(from.Format(time.RFC3339Nano)), all[15:], []int{10, 3}},
		{"exact fit", "limit=14", all, []int{14, 14}},
		{"nothing", "type=invoice.settled", nil, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, sizes := walk(t, tc.query)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("ids %v\nwant %v", ids, tc.want)
			}
			if !slices.Equal(sizes, tc.sizes) {
				t.Errorf("page sizes %v, want %v", sizes, tc.sizes)
			}
		})
	}

	// The Go method agrees, and events carry what the recipe says.
	evs, next := h.p.Events(EnvTest, flavour.Query{Limit: 3, Cursor: all[1]})
	if len(evs) != 3 || evs[0].ID != all[2] || next != all[4] {
		t.Errorf("Events after %s: %d events, next %q", all[1], len(evs), next)
	}
	ev := evs[0]
	if ev.Environment != "test" || ev.APIVersion != DefaultAPIVersion || ev.Type != "subscription.created" || ev.ObjectID != subs[2] || ev.Data["id"] != subs[2] {
		t.Errorf("event %+v", ev)
	}
	evs[0].Data["id"] = "mutated"
	if again, _ := h.p.Events(EnvTest, flavour.Query{Limit: 3, Cursor: all[1]}); again[0].Data["id"] != subs[2] {
		t.Errorf("a caller's change reached the log")
	}
}

func TestEventRouting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	settled := h.must(t, 201, h.test, "POST", "/webhook_endpoints", map[string]any{
		"url": "http://127.0.0.1:1/a", "events": []string{"invoice.settled"}, "api_version": "2025-01-01",
	})["id"].(string)
	all := h.endpoint(t, h.test, "*")
	two := h.endpoint(t, h.test, "checkout.completed", "subscription.renewed")
	liveAll := h.endpoint(t, h.live, "*")

	h.payment(t, 100, "o1")
	inv, _ := h.p.CreateInvoice(EnvTest, 5000, "BTC", "o2")
	if _, err := h.p.SettleInvoice(EnvTest, inv.ID, "tx1"); err != nil {
		t.Fatal(err)
	}
	s, _ := h.p.CreateSubscription(EnvTest, "cus", "basic")
	if _, err := h.p.RenewSubscription(EnvTest, s.ID); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		endpoint string
		want     []string
	}{
		{settled, []string{"invoice.settled"}},
		{all, []string{"checkout.completed", "payment.succeeded", "invoice.settled", "subscription.created", "subscription.renewed"}},
		{two, []string{"checkout.completed", "subscription.renewed"}},
		{liveAll, nil},
	} {
		if got := h.sender.to(tc.endpoint); !slices.Equal(got, tc.want) {
			t.Errorf("endpoint %s got %v, want %v", tc.endpoint, got, tc.want)
		}
	}

	// Each endpoint gets the event in its own api_version; the log keeps
	// the provider's; all copies share the event id.
	var copies []flavour.Event
	for _, se := range h.sender.Sent() {
		if se.ev.Type == "invoice.settled" {
			copies = append(copies, se.ev)
			if se.target.Flavour == nil || se.target.URL == "" {
				t.Errorf("target %+v", se.target)
			}
		}
	}
	if len(copies) != 2 || copies[0].ID != copies[1].ID || copies[0].APIVersion != "2025-01-01" || copies[1].APIVersion != DefaultAPIVersion {
		t.Errorf("invoice.settled copies %+v", copies)
	}

	// Changing an endpoint's events and version applies to what follows.
	if _, err := h.p.UpdateEndpoint(EnvTest, settled, EndpointUpdate{Events: &[]string{"subscription.canceled"}, APIVersion: ptr("2026-01-01")}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.CancelSubscription(EnvTest, s.ID); err != nil {
		t.Fatal(err)
	}
	for _, se := range h.sender.Sent() {
		if se.target.ID == settled && se.ev.Type == "subscription.canceled" && se.ev.APIVersion != "2026-01-01" {
			t.Errorf("after update: api_version %q", se.ev.APIVersion)
		}
	}
	if got := h.sender.to(settled); !slices.Equal(got, []string{"invoice.settled", "subscription.canceled"}) {
		t.Errorf("after update: %v", got)
	}
}
