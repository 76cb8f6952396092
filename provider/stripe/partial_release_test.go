package stripe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/stripe"
)

// partialRefund is a listed refund of pi_part's charge ch_part (authorized
// 1000, captured 600), the charge expanded with refunds (newest first)
// and amount_refunded their sum; hasMore says the charge lists only
// these.
func partialRefund(id string, amount int64, reason string, created int64, refunds []string, hasMore bool) string {
	r := `null`
	if reason != "" {
		r = `"` + reason + `"`
	}
	return fmt.Sprintf(`{"id":%q,"object":"refund","amount":%d,"currency":"usd","status":"succeeded","reason":%s,"payment_intent":"pi_part","created":%d,
		"charge":{"id":"ch_part","object":"charge","amount":1000,"amount_captured":600,"amount_refunded":%d,"captured":true,"status":"succeeded","payment_intent":"pi_part","created":1700000000,
			"refunds":{"object":"list","data":[%s],"has_more":%v}}}`, id, amount, r, created, 400+100+400, strings.Join(refunds, ","), hasMore)
}

// refundOf is one refund of ch_part as its charge lists it.
func refundOf(id string, amount int64, reason string, created int64) string {
	r := `null`
	if reason != "" {
		r = `"` + reason + `"`
	}
	return fmt.Sprintf(`{"id":%q,"object":"refund","amount":%d,"currency":"usd","status":"succeeded","reason":%s,"charge":"ch_part","payment_intent":"pi_part","created":%d}`, id, amount, r, created)
}

// The refund Stripe made to release what a partial capture left is no
// refund of money payhook booked: the refund list leaves it out (as it
// leaves out a refund that released an authorization never captured,
// reason expired_uncaptured_charge), deciding by the charge (listed with
// expand[]=data.charge.refunds) as the mapping does, and keeps a later
// refund of captured money, even one of the same amount. Before, each
// release was listed, and reconciliation reported it missing here.
func TestListedRefundsLeaveOutPartialRelease(t *testing.T) {
	t.Parallel()
	release := refundOf("re_release", 400, "", 1700000100)
	same := refundOf("re_same", 400, "", 1700000200)
	older := refundOf("re_older", 100, "", 1700000150)
	var queries []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		if r.URL.Query().Get("charge") == "ch_part" {
			// The rest of the charge's refunds, after the expanded ones.
			if r.URL.Query().Get("starting_after") != "re_same" {
				t.Errorf("the charge's refunds listed after %q; want after re_same", r.URL.Query().Get("starting_after"))
			}
			w.Write([]byte(`{"object":"list","has_more":false,"data":[` + older + `,` + release + `]}`))
			return
		}
		w.Write([]byte(`{"object":"list","has_more":false,"data":[` +
			// The charge's refunds cut short: the rest are listed.
			partialRefund("re_same", 400, "", 1700000200, []string{same}, true) + `,` +
			partialRefund("re_release", 400, "", 1700000100, []string{same, older, release}, false) + `,` +
			partialRefund("re_older", 100, "", 1700000150, []string{same, older, release}, false) + `,` +
			`{"id":"re_auth","object":"refund","amount":700,"currency":"usd","status":"succeeded","reason":"expired_uncaptured_charge","payment_intent":"pi_auth","charge":"ch_auth","created":1700000000},` +
			`{"id":"re_plain","object":"refund","amount":50,"currency":"usd","status":"succeeded","reason":null,"payment_intent":"pi_x","charge":"ch_x","created":1700000000}]}`))
	}))
	defer api.Close()
	c := &stripe.Client{BaseURL: api.URL, Key: "sk_test_x"}
	page, err := c.ListObjects(context.Background(), adapter.ObjectQuery{Kind: adapter.KindRefund})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range page.Objects {
		got = append(got, o.Ref)
		if o.PaymentRef == "" {
			t.Errorf("refund %s listed without its payment", o.Ref)
		}
	}
	if want := []string{"re_same", "re_older", "re_plain"}; !slices.Equal(got, want) {
		t.Errorf("refunds listed %v; want %v (the release and the released authorization left out)", got, want)
	}
	if len(queries) != 2 || !strings.Contains(queries[0], "expand%5B%5D=data.charge.refunds") {
		t.Errorf("refunds listed with %q; want expand[]=data.charge.refunds, then the rest of ch_part's refunds once", queries)
	}
}
