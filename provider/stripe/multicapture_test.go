package stripe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/stripe"
)

// multicaptureCharge is charge id of payment intent pi (authorized 1000)
// as Stripe's multicapture guide (docs.stripe.com/payments/multicapture)
// has it: multicapture.status available before and after the final
// capture, captured false until it ("The captured field for a charge only
// becomes true after a final capture or authorization reversal"),
// amountCaptured, and its refunds (newest first) summed in refunded.
func multicaptureCharge(id, pi string, captured bool, amountCaptured, refunded int64, refunds string) string {
	return fmt.Sprintf(`{"id":%q,"object":"charge","amount":1000,"amount_captured":%d,"amount_refunded":%d,"captured":%v,"currency":"usd","status":"succeeded","payment_intent":%q,"created":1700000000,`+
		`"payment_method_details":{"type":"card","card":{"brand":"visa","last4":"4242","multicapture":{"status":"available"}}},`+
		`"refunds":{"object":"list","data":[%s],"has_more":false}}`, id, amountCaptured, refunded, captured, pi, refunds)
}

// multicaptureRefund is refund id of charge ch (of payment intent pi),
// without a reason, listed with its charge (charge: "" the id alone).
func multicaptureRefund(id, ch, pi string, amount, created int64, charge string) string {
	if charge == "" {
		charge = fmt.Sprintf("%q", ch)
	}
	return fmt.Sprintf(`{"id":%q,"object":"refund","amount":%d,"currency":"usd","status":"succeeded","reason":null,"payment_intent":%q,"created":%d,"charge":%s}`,
		id, amount, pi, created, charge)
}

// A multicapture charge between its captures (700 of 1000 captured with
// final_capture=false, captured false) released nothing: its refund of
// 300, exactly what is left and without a reason, is listed as a refund,
// and the charge is not yet a payment (the mapping books it at the final
// capture, payment_intent.succeeded). After the final capture (900 in
// all, captured true, the last 100 released by a refund of Stripe's) the
// release is left out as any partial capture's, and the payment is 900
// with 300 refunded. A plain partial capture (700, its release of 300) is
// unchanged: 700 with nothing refunded.
func TestMulticapture(t *testing.T) {
	t.Parallel()
	midReal := multicaptureRefund("re_mid", "ch_mid", "pi_mid", 300, 1700000100, "")
	mid := multicaptureCharge("ch_mid", "pi_mid", false, 700, 300, midReal)
	finReal := multicaptureRefund("re_fin", "ch_fin", "pi_fin", 300, 1700000100, "")
	finRelease := multicaptureRefund("re_fin_release", "ch_fin", "pi_fin", 100, 1700000200, "")
	fin := multicaptureCharge("ch_fin", "pi_fin", true, 900, 400, finRelease+","+finReal)
	plainRelease := multicaptureRefund("re_plain_release", "ch_plain", "pi_plain", 300, 1700000000, "")
	plain := fmt.Sprintf(`{"id":"ch_plain","object":"charge","amount":1000,"amount_captured":700,"amount_refunded":300,"captured":true,"currency":"usd","status":"succeeded","payment_intent":"pi_plain","created":1700000000,`+
		`"refunds":{"object":"list","data":[%s],"has_more":false}}`, plainRelease)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/charges":
			w.Write([]byte(`{"object":"list","has_more":false,"data":[` + mid + `,` + fin + `,` + plain + `]}`))
		case "/v1/refunds":
			w.Write([]byte(`{"object":"list","has_more":false,"data":[` +
				multicaptureRefund("re_fin_release", "ch_fin", "pi_fin", 100, 1700000200, fin) + `,` +
				multicaptureRefund("re_mid", "ch_mid", "pi_mid", 300, 1700000100, mid) + `,` +
				multicaptureRefund("re_fin", "ch_fin", "pi_fin", 300, 1700000100, fin) + `,` +
				multicaptureRefund("re_plain_release", "ch_plain", "pi_plain", 300, 1700000000, plain) + `]}`))
		case "/v1/payment_intents/pi_mid":
			w.Write([]byte(`{"id":"pi_mid","object":"payment_intent","status":"requires_capture","amount":1000,"amount_capturable":300,"amount_received":700,"currency":"usd","created":1700000000,"latest_charge":` + mid + `}`))
		case "/v1/payment_intents/pi_fin":
			w.Write([]byte(`{"id":"pi_fin","object":"payment_intent","status":"succeeded","amount":1000,"amount_capturable":0,"amount_received":900,"currency":"usd","created":1700000000,"latest_charge":` + fin + `}`))
		default:
			http.Error(w, `{"error":{}}`, http.StatusNotFound)
		}
	}))
	defer api.Close()
	c := &stripe.Client{BaseURL: api.URL, Key: "sk_test_x"}
	ctx := context.Background()

	type payment struct {
		amount, refunded int64
		status           string
	}
	want := map[string]payment{"pi_fin": {900, 300, "partially_refunded"}, "pi_plain": {700, 0, "succeeded"}}
	page, err := c.ListObjects(ctx, adapter.ObjectQuery{Kind: adapter.KindPayment})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]payment{}
	for _, o := range page.Objects {
		got[o.Ref] = payment{o.Amount, o.RefundedAmount, o.Status}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("payments listed %v; want %v", got, want)
	}
	want["pi_mid"] = payment{0, 0, "uncaptured"}
	for _, ref := range []string{"pi_mid", "pi_fin"} {
		o, err := c.GetObject(ctx, adapter.KindPayment, ref)
		if err != nil {
			t.Fatalf("GetObject %s: %v", ref, err)
		}
		if g := (payment{o.Amount, o.RefundedAmount, o.Status}); g != want[ref] {
			t.Errorf("GetObject %s = %v; want %v", ref, g, want[ref])
		}
	}

	page, err = c.ListObjects(ctx, adapter.ObjectQuery{Kind: adapter.KindRefund})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, o := range page.Objects {
		refs = append(refs, o.Ref)
	}
	if want := []string{"re_mid", "re_fin"}; !slices.Equal(refs, want) {
		t.Errorf("refunds listed %v; want %v (the releases of the final and the plain partial capture left out)", refs, want)
	}
}
