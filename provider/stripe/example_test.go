package stripe_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/stripe"
)

func ExampleVerifier_Verify() {
	v, err := stripe.New(stripe.Config{
		// The current secret and the one being rolled out.
		Secrets: []string{"whsec_payhookStripeOldSecret", "whsec_payhookStripeTestSecret"},
	})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("Stripe-Signature", "t=1700000000,v1=54f25850bfde9c2b02345d7d82c19aade6c3d895fb7a1d1484196918ef2df496")
	body := []byte(`{"id":"evt_1PayHook","object":"event","type":"invoice.paid","created":1699999990,"livemode":true,"data":{"object":{"id":"in_1"}}}`)
	env, err := v.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: time.Unix(1700000030, 0)})
	if err != nil {
		fmt.Println("rejected:", err)
		return
	}
	fmt.Println(env.EventID, env.Type, env.Environment, env.OccurredAt.Format(time.RFC3339), env.SecretID)

	// The same delivery an hour later is a replay.
	_, err = v.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: time.Unix(1700003600, 0)})
	fmt.Println(err)
	// Output:
	// evt_1PayHook invoice.paid live 2023-11-14T22:13:10Z sha256:3c1678b01965
	// stripe: timestamp 1700000000 is 1h0m0s old, beyond the 5m0s tolerance: invalid signature
}

// A test of an application sends itself a Stripe delivery signed as
// Stripe signs it.
func ExampleSign() {
	secret := "whsec_payhookStripeTestSecret"
	at := time.Unix(1700000000, 0)
	body := []byte(`{"id":"evt_1PayHook","object":"event","type":"invoice.paid","created":1699999990,"livemode":true,"data":{"object":{"id":"in_1"}}}`)
	h, err := stripe.Sign(secret, at, body)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Get(stripe.Header))

	v, err := stripe.New(stripe.Config{Secrets: []string{secret}})
	if err != nil {
		panic(err)
	}
	env, err := v.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: at})
	fmt.Println(env.EventID, err)
	// Output:
	// t=1700000000,v1=54f25850bfde9c2b02345d7d82c19aade6c3d895fb7a1d1484196918ef2df496
	// evt_1PayHook <nil>
}
