package adapter

import "context"

// Refunder is a Client that asks the provider to refund (part of) a
// payment: what payhook payments refund calls. Its billete and stripe
// clients are ones.
type Refunder interface {
	// Refund asks the provider to refund r.Amount of payment r.Payment,
	// sending r.Key as the Idempotency-Key: the same key sent again
	// returns the first refund and refunds nothing more. Its errors are
	// an *APIError when the API answered another status than 200 or 201
	// (a 429 or a 5xx is worth sending again with the same key; a 4xx is
	// the provider refusing), others (the API unreachable, a timeout)
	// worth sending again with the same key.
	Refund(ctx context.Context, r RefundRequest) (RefundResult, error)
}

// RefundRequest is one refund to ask for.
type RefundRequest struct {
	// Payment is the payment's ref as payhook keeps it (billete: the
	// payment id; Stripe: the payment intent pi_… or the charge ch_…).
	Payment string
	// Amount is in minor units, positive.
	Amount int64
	// Reason, if set, is the provider's refund reason (Stripe:
	// duplicate, fraudulent or requested_by_customer).
	Reason string
	// Key is the idempotency key, stable across retries.
	Key string
}

// RefundResult is the provider's answer to a refund.
type RefundResult struct {
	// Ref is the provider's id of the refund, e.g. "re_…".
	Ref string
	// Status is the refund's status as the provider says it (succeeded,
	// pending, failed, ...).
	Status string
	// Replayed says that the provider answered an earlier request with
	// the same key, when it says so (the Idempotent-Replayed header).
	Replayed bool
}
