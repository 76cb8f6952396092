package billing

import (
	"errors"
	"time"
)

// Every fact is checked before it is applied (see Check): references are
// storable identifiers (payhook.CheckRef), times lie within payhook's
// bounds (payhook.CheckTime) and amounts within ±payhook.MaxAmount; a fact
// that breaks one of these wraps payhook.ErrMalformed, so the event fails
// at once instead of being retried.

// Fact is one thing an event says happened, in payhook's own terms.
type Fact interface{ isFact() }

// Payment is what payhook knows of a fiat payment when it is captured.
type Payment struct {
	// Ref is the provider's id of the payment (unique per source).
	Ref string
	// OrderID is the application's order the payment pays, if known.
	OrderID string
	// Amount in minor units of Currency (upper-case ISO 4217 or a crypto
	// ticker such as BTC), 0 to payhook.MaxAmount. Zero is a capture of
	// nothing (a 100% discount): it pays its order and posts nothing.
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
// the capture for Amount once per RefundRef, but never takes more than the
// payment still holds: refunds beyond its amount raise
// AlertRefundExceedsPayment. A refund in another currency than its payment
// is malformed.
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
// taken back. It takes back Amount (the disputed amount; 0 means the whole
// payment) from what the payment still holds, once per DisputeRef. A
// refund reported after it (made before the dispute) is recorded and moves
// only what the dispute left, so the result does not depend on the
// delivery order (see ApplyOutcome).
type ChargedBack struct {
	Payment    *Payment
	PaymentRef string
	DisputeRef string
	// Amount is the disputed amount in the payment's minor units; 0 (or
	// more than the payment) means the whole payment.
	Amount int64
	At     time.Time
}

// ChargebackWon: a dispute was won; the chargeback's reversal is itself
// reversed, once.
//
// A provider that names the won dispute sets DisputeRef. One that reports
// the win as a new record of its own (Paddle's chargeback_reverse
// adjustment) sets ReversalRef and PaymentRef instead: the reversal wins
// the payment's oldest open chargeback, once per ReversalRef (an unknown
// payment, or one without a chargeback to win, is ErrNotSeenYet). A
// reversal binds to a chargeback not yet bound to a reversal: first one
// of its amount, then one already won by its own record (the same win
// reported both ways), and only then the oldest open one.
//
// Amount, when above zero, is what the reversal gives back: a win never
// gives back more than it (nor more than the chargeback took). Zero gives
// back what the chargeback took.
type ChargebackWon struct {
	PaymentRef  string
	DisputeRef  string
	ReversalRef string
	Amount      int64
	At          time.Time
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
// credited once, unless ChainRef is already bound to another invoice (or
// the invoice settled before with another ChainRef): then it raises an
// alert and credits nothing. A settlement for an order already paid by
// another payment is credited all the same (the coins are in the wallet,
// as a fiat capture of a paid order is) and raises AlertOrderPaidTwice.
type Settled struct {
	InvoiceRef string
	OrderID    string
	Amount     int64
	Currency   string
	// ChainRef is the on-chain reference (transaction id) of the payment.
	ChainRef string
	At       time.Time
}

// Subscription is the state of a subscription at UpdatedAt. It replaces
// the stored state only if it ranks higher (see ApplyOutcome: ended is
// final, then the newer UpdatedAt, then a fixed order for ties), so the
// final state never depends on the delivery order. The first time the
// stored status becomes "ended", the end is claimed once (ended_at goes
// from NULL to EndedAt).
type Subscription struct {
	Ref      string
	Customer string
	Plan     string
	// Status is active | canceled | ended, or one of the statuses of a
	// subscription not paid for, which grant no access: incomplete,
	// past_due, unpaid, paused (provider words mapped to these).
	Status           string
	CurrentPeriodEnd time.Time
	UpdatedAt        time.Time
	// EndedAt is when the provider says the subscription ended (for status
	// ended); zero means UpdatedAt.
	EndedAt time.Time
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
