package adapter

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payhook/payhook"
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
// for reconciliation, page by page (Client says how callers find it).
type ObjectLister interface {
	Client
	// ListObjects returns one page of the objects q selects. A kind the
	// provider has no list of gives an empty last page and no error. Its
	// errors are EventLister's: an *APIError for another status than 200
	// (a 429 or a 5xx worth retrying, after its RetryAfter), one wrapping
	// payhook.ErrMalformed for a page that cannot be read (not the
	// provider's list, an item without an id or a creation time, a page
	// that says more follow but lists nothing), others (the API
	// unreachable, a timeout) worth retrying.
	ListObjects(ctx context.Context, q ObjectQuery) (ObjectPage, error)
}

// ObjectQuery selects objects to list.
type ObjectQuery struct {
	// Kind is one of ObjectKinds.
	Kind string
	// From keeps the objects created at or after it; zero: all.
	From time.Time
	// Cursor is the Next of the previous page; "" asks for the first.
	Cursor string
	// Limit is the page size; 0 means the client's default (100).
	Limit int
}

// ObjectPage is one page of a provider's object list.
type ObjectPage struct {
	// Objects are the page's objects that reconciliation compares (a
	// client leaves out those that move no money: Stripe's failed
	// charges, dispute inquiries), oldest first where the provider lists
	// so.
	Objects []Object
	// Next is the cursor of the next page; "" on the last one.
	Next string
}

// ObjectGetter is a Client that also retrieves one of the provider's
// objects by its reference, as an ObjectLister lists it (Client says how
// callers find it). Reconciliation asks it for the payments and
// subscriptions payhook stored in its window that the provider's list
// (by the provider's creation time) did not have: one created at the
// provider before the window (a renewal of an old subscription, a
// payment payhook first saw through its refund) is no missing one. Its
// stripe, paddle and billete clients are ones, for KindPayment and
// KindSubscription.
type ObjectGetter interface {
	Client
	// GetObject returns the object of kind whose reference is ref, in
	// the shape ListObjects gives it (Ref, Created, Status, Amount,
	// Currency, RefundedAmount, Plan, the API version it was rendered
	// in); a payment ListObjects would leave out (one that captured
	// nothing) comes all the same, with the provider's status of it and
	// Amount 0. Its errors are an *APIError for
	// another status than 200 (a 429 or a 5xx worth retrying, after its
	// RetryAfter), one that also wraps payhook.ErrNotFound for a 404 (the
	// provider has no such object), one wrapping payhook.ErrInvalid for
	// a kind the client cannot retrieve, one wrapping
	// payhook.ErrMalformed for an answer that cannot be read (not the
	// object asked for, no id or creation time), others (the API
	// unreachable, a timeout) worth retrying.
	GetObject(ctx context.Context, kind, ref string) (Object, error)
}

// GetObject is what the clients' ObjectGetter.GetObject share: the route
// of kind in routes ("{id}" standing for ref, path-escaped; none is
// payhook.ErrInvalid), its answer from get (body and headers), read by
// parse, and that answer checked to be the object ref (not one wraps
// payhook.ErrMalformed). A client wraps its errors with its name.
func GetObject(kind, ref string, routes map[string]string, get func(path string) ([]byte, http.Header, error),
	parse func(body []byte, h http.Header) (Object, error)) (Object, error) {
	route, ok := routes[kind]
	if !ok {
		return Object{}, fmt.Errorf("no retrieve route of %s objects: %w", kind, payhook.ErrInvalid)
	}
	body, h, err := get(strings.ReplaceAll(route, "{id}", url.PathEscape(ref)))
	if err != nil {
		return Object{}, fmt.Errorf("retrieve %s %s: %w", kind, ref, err)
	}
	o, err := parse(body, h)
	if err == nil && o.Ref != ref {
		err = fmt.Errorf("the answer is %s %q: %w", kind, o.Ref, payhook.ErrMalformed)
	}
	if err != nil {
		return Object{}, fmt.Errorf("retrieve %s %s: %w", kind, ref, err)
	}
	return o, nil
}
