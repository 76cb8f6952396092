// Package stripe verifies Stripe webhook deliveries.
//
// Stripe signs each delivery with the header
//
//	Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]
//
// where each v1 is the HMAC-SHA256 of "<t>.<raw body>" keyed by the bytes
// of an endpoint secret (the whole "whsec_..." string). While a secret is
// being rolled Stripe sends one v1 per active secret; any match passes.
// Other schemes (v0, test signatures) are ignored.
//
// Client reads the current state of the object an event is about (its
// checkout session, payment intent, charge, refund, dispute or
// subscription: GET /v1/.../{id}, fetch.go) when the event is processed,
// so that payhook applies the object as it is, not as an event, maybe
// late or reordered, said it was.
package stripe
