// Package billete verifies Billete webhook deliveries.
//
// Billete signs the Standard Webhooks way (see package standard): the
// webhook-id, webhook-timestamp and webhook-signature headers, with a
// "whsec_..." secret per endpoint. Each environment (test, live) has its
// own endpoint and secret. The body is an event:
//
//	{"id":"evt_...","type":"checkout.completed","created_at":"<RFC 3339>",
//	 "environment":"test"|"live","api_version":"...","data":{...}}
//
// The event id is the body's id, the same on every retry; a webhook-id
// header that says otherwise makes the delivery malformed, and so does a
// body without an environment of "test" or "live".
package billete
