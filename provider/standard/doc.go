// Package standard verifies deliveries signed the Standard Webhooks way
// (https://www.standardwebhooks.com), used by many providers.
//
// A delivery carries three headers:
//
//	webhook-id: msg_...
//	webhook-timestamp: <unix seconds>
//	webhook-signature: v1,<base64> [v1a,<base64> ...]
//
// Every signature is over "<webhook-id>.<webhook-timestamp>.<raw body>". A
// v1 entry is its HMAC-SHA256 keyed by the base64-decoded part of a
// "whsec_" secret; a v1a entry is its ed25519 signature, checked with a
// "whpk_" public key. Entries of other versions are ignored; any matching
// entry passes.
//
// The event id is the webhook-id header, which stays the same across
// retries. The body is a JSON object with "type", "timestamp" (RFC 3339)
// and "data".
package standard
