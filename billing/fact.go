// Package billing turns provider events into billing state an application
// can trust: payments (one row per provider reference), a double-entry
// ledger whose movements are posted once and reversed by entries that
// point at what they reverse, subscriptions guarded against older events,
// orders marked paid only if pending, and alerts.
//
// Events are first mapped to facts (package billing/mapping); Apply then
// writes facts inside the transaction that marks the event processed. Each
// fact is idempotent and commutative: a unique key or a conditional UPDATE
// decides, so duplicates, replays and any delivery order reach the same
// state.
package billing

import (
	"errors"
	"time"
)

// Fact is one thing an event says happened, in payhook's own terms.
type Fact interface{ isFact() }

// Payment is what payhook knows of a fiat payment when it is captured.
type Payment struct {
	// Ref is the provider's id of the payment (unique per source).
	Ref string
	// OrderID is the application's order the payment pays, if known.
	OrderID string
	// Amount in minor units of Currency (upper-case ISO 4217 or a crypto
	// ticker such as BTC).
	Amount   int64
	Currency string
	// CapturedAt is when the provider captured it.
	CapturedAt time.Time
}

// Captured: a fiat payment succeeded. It posts the capture once. The first
// capture of a ref (or the first snapshot that placed it) decides its
// amount and currency: a later one that disagrees is a success that
// changes nothing and raises AlertPaymentMismatch once. OrderID fills in a
// payment stored without an order, and the call that does pays the order.
// A ref stored as a crypto payment is left alone (AlertPaymentKindMismatch).
type Captured struct {
	Payment Payment
}

// Refunded: (part of) a fiat payment was refunded. It posts a reversal of
// the capture for Amount once per RefundRef.
type Refunded struct {
	// Payment places the payment if it was not seen yet; nil if the
	// payload does not say enough. Once the payment is stored, the stored
	// row is used, as for Captured.
	Payment    *Payment
	PaymentRef string
	RefundRef  string
	Amount     int64
	Currency   string
	At         time.Time
}

// RefundFailed: a refund did not happen. Nothing moves; a refund posted
// under the same RefundRef (a provider that reported success first) is
// reversed. A failure applied before its refund takes the refund's key
// with a zero amount, so the success reported later moves nothing.
type RefundFailed struct {
	PaymentRef string
	RefundRef  string
	At         time.Time
}

// ChargedBack: the payment's card holder disputed it and the money was
// taken back. It reverses what is left of the capture once per DisputeRef:
// amount minus net refunds when applied. A refund reported after it (made
// before the dispute) is recorded but moves nothing, so a charged back
// payment keeps zero whatever the delivery order (see ApplyOutcome).
type ChargedBack struct {
	Payment    *Payment
	PaymentRef string
	DisputeRef string
	At         time.Time
}

// ChargebackWon: a dispute was won; the chargeback's reversal is itself
// reversed, once.
type ChargebackWon struct {
	PaymentRef string
	DisputeRef string
	At         time.Time
}

// OrderPaid: a checkout for OrderID completed, paid by PaymentRef. The
// order (of the event's source: orders are per source) goes from pending
// to paid once. The first time another payment tries to pay it, it raises
// AlertOrderPaidTwice; a duplicate or replay raises nothing.
type OrderPaid struct {
	OrderID    string
	PaymentRef string
	At         time.Time
}

// Settled: a crypto invoice settled on chain. Settlement is final. It is
// credited once, unless ChainRef is already bound to another invoice or
// the order is already paid by another payment: then it raises an alert
// and credits nothing.
type Settled struct {
	InvoiceRef string
	OrderID    string
	Amount     int64
	Currency   string
	// ChainRef is the on-chain reference (transaction id) of the payment.
	ChainRef string
	At       time.Time
}

// Subscription is the state of a subscription at UpdatedAt. It applies only
// if UpdatedAt is newer than what is stored; the first time Status is
// "ended", the end is claimed once (ended_at goes from NULL to a time).
type Subscription struct {
	Ref              string
	Customer         string
	Plan             string
	Status           string // active | canceled | ended (provider words mapped to these)
	CurrentPeriodEnd time.Time
	UpdatedAt        time.Time
}

func (Captured) isFact()      {}
func (Refunded) isFact()      {}
func (RefundFailed) isFact()  {}
func (ChargedBack) isFact()   {}
func (ChargebackWon) isFact() {}
func (OrderPaid) isFact()     {}
func (Settled) isFact()       {}
func (Subscription) isFact()  {}

// ErrNotSeenYet: a fact is about something payhook cannot place yet (a
// refund of a payment it has not seen, with no payment in the payload and
// no API to ask). The event is retried later; after its last attempt it
// fails and an alert is raised.
var ErrNotSeenYet = errors.New("not seen yet")
