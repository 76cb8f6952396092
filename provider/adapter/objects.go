package adapter

import (
	"context"
	"time"
)

// Object kinds an ObjectLister lists.
const (
	// KindPayment is a payment (Stripe: a charge; Paddle: a transaction).
	KindPayment = "payment"
	// KindRefund is a refund of a payment (Paddle: a refund adjustment).
	KindRefund = "refund"
	// KindDispute is a chargeback of a payment (Paddle: a chargeback
	// adjustment).
	KindDispute = "dispute"
	// KindSubscription is a subscription.
	KindSubscription = "subscription"
)

// ObjectKinds are the kinds an ObjectLister lists, in the order
// reconciliation asks for them.
var ObjectKinds = []string{KindPayment, KindRefund, KindDispute, KindSubscription}

// Object is one of the provider's objects as reconciliation compares it
// with payhook's billing state: provider-independent, in payhook's own
// vocabulary (the statuses billing stores, amounts in minor units,
// currencies upper case).
type Object struct {
	// Kind is one of ObjectKinds.
	Kind string `json:"kind"`
	// Ref is the provider's reference, the one billing stores (Stripe: a
	// charge's payment_intent, else its id).
	Ref string `json:"ref"`
	// PaymentRef is the payment a refund or dispute is about.
	PaymentRef string `json:"payment_ref,omitempty"`
	// Status is, for a payment, succeeded, partially_refunded, refunded
	// or charged_back; for a refund succeeded, pending or failed; for a
	// dispute open, won or lost; for a subscription active, canceled,
	// ended or a status of one not paid for (past_due, unpaid...).
	Status string `json:"status"`
	// Amount is in minor units (a payment's, refund's or dispute's).
	Amount int64 `json:"amount,omitempty"`
	// Currency is upper case, e.g. "EUR".
	Currency string `json:"currency,omitempty"`
	// RefundedAmount is what refunds took from a payment, when the
	// provider's payment says it (-1 when it does not: Paddle's
	// transactions; reconciliation then adds up the listed refunds).
	RefundedAmount int64 `json:"refunded_amount"`
	// Plan is a subscription's plan (or price).
	Plan string `json:"plan,omitempty"`
	// Created is when the provider created the object.
	Created time.Time `json:"created"`
	// APIVersion is the API version the provider rendered the object in,
	// when it says (Stripe's Stripe-Version answer header); "" if not.
	APIVersion string `json:"api_version,omitempty"`
}

// ObjectLister is a Client that also lists the provider's recent objects
// for reconciliation (Client says how callers find it).
type ObjectLister interface {
	Client
	// ListObjects returns every object of kind (one of ObjectKinds)
	// created at or after since, all pages read, oldest first. A kind the
	// provider has no list of gives nil and no error. A page the API
	// answers malformed, or that repeats an item or is empty with a next
	// cursor, is an error; nothing is returned half.
	ListObjects(ctx context.Context, kind string, since time.Time) ([]Object, error)
}
