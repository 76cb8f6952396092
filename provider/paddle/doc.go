// Package paddle verifies Paddle Billing webhook deliveries.
//
// Paddle signs each delivery with the header
//
//	Paddle-Signature: ts=<unix seconds>;h1=<hex>[;h1=<hex>...]
//
// where each h1 is the HMAC-SHA256 of "<ts>:<raw body>" keyed by the bytes
// of the notification destination's secret key. Any matching h1 passes.
//
// Its Client reads Paddle Billing's API with a source's API key: the
// events list for backfill, and transactions, adjustments and
// subscriptions for reconciliation (ListObjects), and the entity a
// notification is about when it is processed (Fetch, fetch.go).
package paddle
