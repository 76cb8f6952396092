// Package signing holds the pieces every payhook verifier shares: the set
// of configured secrets with their fingerprints, HMAC-SHA256, constant-time
// comparison of decoded signatures, the timestamp tolerance check, and
// Object, payhook's one strict JSON reader: providers read envelopes with
// it, the billing mappings whole payloads.
//
// Every error it returns wraps one of payhook's sentinel errors:
// ErrConfig for a secret or setting that must stop a source from starting,
// ErrSignature for a header or signature that does not authenticate the
// delivery, and ErrMalformed for a signed body payhook cannot read.
package signing
