package stripe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/stripe"
)

// ListEvents asks Stripe's parameters and pins the client's version.
func TestListEventsRequest(t *testing.T) {
	t.Parallel()
	var got *http.Request
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Write([]byte(`{"object":"list","data":[{"id":"evt_2"}],"has_more":true}`))
	}))
	defer api.Close()
	c := &stripe.Client{BaseURL: api.URL, Key: "sk_test_x", APIVersion: "2026-01-01"}
	page, err := c.ListEvents(context.Background(), adapter.EventQuery{
		From: time.Unix(1700000000, 0), Types: []string{"charge.refunded", "charge.dispute.created"},
		Undelivered: true, Cursor: "evt_1", Limit: 500,
	})
	if err != nil {
		t.Fatal(err)
	}
	if page.Next != "evt_2" || len(page.Events) != 1 {
		t.Fatalf("page %+v; want one event and the cursor evt_2", page)
	}
	want := "created%5Bgte%5D=1700000000&delivery_success=false&limit=100&starting_after=evt_1" +
		"&types%5B%5D=charge.refunded&types%5B%5D=charge.dispute.created"
	if got.URL.Path != "/v1/events" || got.URL.RawQuery != want {
		t.Errorf("GET %s?%s; want /v1/events?%s", got.URL.Path, got.URL.RawQuery, want)
	}
	if v := got.Header.Get(stripe.VersionHeader); v != "2026-01-01" {
		t.Errorf("%s = %q; want the pinned 2026-01-01", stripe.VersionHeader, v)
	}
	if c.EventRetention() != 30*24*time.Hour {
		t.Errorf("EventRetention = %v; want 30 days", c.EventRetention())
	}
}
