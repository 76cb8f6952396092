// Package payhook holds the domain of a payment-webhook inbox: the events a
// provider delivers, the sources they arrive through, their processing
// status, the verifier and handler contracts and the errors shared by every
// part of payhook.
//
// The path of one event: a receiver verifies the signature over the raw
// body, reads the envelope, stores the event once under the unique
// (source, event id) key and enqueues its job in the same transaction, and
// answers 2xx only after the commit. A worker then runs the handlers for the
// event inside the transaction that marks it processed, so an effect and its
// "processed" mark commit together or not at all.
//
// This package imports nothing but the standard library; storage, the job
// queue, providers and the HTTP receiver live in subpackages.
package payhook

import (
	"errors"
	"time"
)

// Status is where an event stands in processing.
type Status string

// The statuses of an event.
const (
	// StatusReceived: stored, waiting for (or being retried by) its job.
	StatusReceived Status = "received"
	// StatusProcessed: its handlers ran and committed with the mark.
	StatusProcessed Status = "processed"
	// StatusIgnored: stored on purpose without processing (another
	// environment, or no handler wants its type).
	StatusIgnored Status = "ignored"
	// StatusFailed: every attempt failed; LastError says why.
	StatusFailed Status = "failed"
)

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusReceived, StatusProcessed, StatusIgnored, StatusFailed:
		return true
	}
	return false
}

// Event is one provider event as payhook stored it.
type Event struct {
	// ID is payhook's own row id, assigned when the event is stored.
	ID int64 `json:"id"`
	// Source is the configured source the event arrived through.
	Source string `json:"source"`
	// EventID is the provider's id of the event; (Source, EventID) is unique.
	EventID string `json:"event_id"`
	// Type is the provider's event type, such as "checkout.completed".
	Type string `json:"type"`
	// Environment is "test" or "live" when the provider says which, else "".
	Environment string `json:"environment,omitempty"`
	// OccurredAt is when the provider says the event happened (zero if unknown).
	OccurredAt time.Time `json:"occurred_at"`
	// ReceivedAt is when payhook received the first delivery of the event.
	ReceivedAt time.Time `json:"received_at"`
	// Payload is the body exactly as received; its signature was verified.
	Payload []byte `json:"payload"`
	// SecretID identifies the secret whose signature matched (a short
	// fingerprint, never the secret), so operators know when an old secret
	// is no longer used.
	SecretID string `json:"secret_id,omitempty"`
	// Status is the processing status.
	Status Status `json:"status"`
	// Attempts counts processing attempts, successful or not.
	Attempts int `json:"attempts"`
	// LastError is the error of the last failed attempt.
	LastError string `json:"last_error,omitempty"`
	// ProcessedAt is when the event was marked processed (zero until then).
	ProcessedAt time.Time `json:"processed_at,omitzero"`
	// ReceivedVia says how the event came: ViaWebhook (a signed delivery;
	// the default when empty) or ViaBackfill (listed by the provider's
	// API, trusted through the API key, unsigned).
	ReceivedVia Via `json:"received_via"`
	// DeliveryFields names the members of Payload that tell the delivery,
	// not the event (DeliveryNamer; NewEvent sets them): a redelivery may
	// differ there and still be the same body (SameBody). Not stored.
	DeliveryFields []string `json:"-"`
	// Resource is the current state of the resource the event is about,
	// fetched from the provider's API just before processing (outside any
	// transaction) when the source can ask it; nil otherwise. Not stored:
	// the event tells, the resource decides.
	Resource []byte `json:"-"`
}

// Via is how an event came to payhook.
type Via string

// The ways an event comes.
const (
	// ViaWebhook: a delivery to the receiver, its signature verified.
	ViaWebhook Via = "webhook"
	// ViaBackfill: listed by the provider's events API and stored by a
	// backfill; it carries no signature.
	ViaBackfill Via = "backfill"
)

// Errors shared across payhook. Packages wrap them with context; test them
// with errors.Is.
var (
	// ErrNotFound: the event, source or resource does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSignature: the signature is missing, malformed, wrong or expired.
	ErrSignature = errors.New("invalid signature")
	// ErrMalformed: the signed body is not an event payhook can read.
	ErrMalformed = errors.New("malformed event")
	// ErrTooLarge: the body exceeds the configured limit.
	ErrTooLarge = errors.New("body too large")
	// ErrUnavailable: the database could not store or commit; retry later.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrConfig: a source or component is configured wrongly.
	ErrConfig = errors.New("invalid configuration")
	// ErrInvalid: a caller's input (a query parameter, a flag, an id) is
	// not one payhook accepts; nothing was done. The API answers 400.
	ErrInvalid = errors.New("invalid input")
	// ErrConflict: the request cannot be answered as asked, such as a
	// reference that exists in several sources when none was named; the
	// API answers 409.
	ErrConflict = errors.New("conflict")
	// ErrIgnored: returned (wrapped, with the reason) by a handler that
	// takes no action on an event on purpose; the event is marked ignored
	// with the reason instead of processed, and not retried.
	ErrIgnored = errors.New("ignored")
)

// HTTPStatus maps an error of payhook to the HTTP status that answers it:
// the one table shared by the receiver and the API. Anything it does not
// know is 500.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return 200
	case errors.Is(err, ErrNotFound):
		return 404
	case errors.Is(err, ErrSignature), errors.Is(err, ErrMalformed), errors.Is(err, ErrInvalid):
		return 400
	case errors.Is(err, ErrConflict):
		return 409
	case errors.Is(err, ErrTooLarge):
		return 413
	case errors.Is(err, ErrUnavailable):
		return 503
	}
	return 500
}
