// Package hmac verifies deliveries of providers that sign with a plain
// HMAC-SHA256 and have no adapter of their own.
//
// A Config names the signature header, its optional prefix ("sha256=")
// and encoding (hex or base64), an optional timestamp header checked
// against a tolerance, and the template of the signed string, such as
// "{timestamp}.{body}". It also says which top-level JSON fields (or which
// signed header) hold the event id, type and time.
//
// For example, GitHub-style "X-Hub-Signature-256: sha256=<hex of body>":
//
//	hmac.Config{Secrets: s, Header: "X-Hub-Signature-256", Prefix: "sha256="}
package hmac
