// Package stripecapture is the rule by which payhook tells, of a Stripe
// charge captured in part, the refund Stripe made at the capture to
// release what was not captured. The Stripe mapping (billing/mapping)
// leaves that refund out of what it books, and the Stripe client's
// object lists (provider/stripe) leave it out of what reconciliation
// compares: both decide here, so that they cannot disagree.
//
// Stripe refunds the part of an authorization not captured by a refund of
// its own, made at the capture (Charges API capture amount, PaymentIntents
// amount_to_capture: "any additional amount will be automatically
// refunded"): the charge then says amount A (authorized), amount_captured
// X < A, and its amount_refunded counts that release of A−X. It moves no
// money payhook booked: the payment is captured at X.
//
// A multicapture charge (payment_method_options.card.request_multicapture)
// captured with final_capture=false has released nothing, and says so by
// captured false: Stripe sets captured only at the final capture, or at
// the end of the authorization window, which releases the rest
// (docs.stripe.com/payments/multicapture, "Charge captured events").
// Until then Remainder is 0, and a refund of exactly A−X is one of
// captured money. Its payment_method_details.card.multicapture.status
// says only whether the charge may be captured more than once, and stays
// available after the final capture: it tells nothing of a release.
//
// Known limit: from API version 2025-03-31.basil on, Stripe makes no such
// refund (changelog "Partially capturing or canceling payments no longer
// creates a Refund": none in the charge's refunds, amount_refunded not
// counting the release, no charge.refunded). The rule does not read the
// version an object is rendered in, so on such a charge a refund of
// captured money of exactly A−X without a reason is taken for the release
// and left out, by the mapping and the object lists alike; and
// amount_refunded, less a release that was never made, reads low. Telling
// the two apart needs the version each object was rendered in (the event's
// api_version, a response's Stripe-Version; unknown for a fetch in the
// account's default version) and a trace from a real account.
package stripecapture

// ReasonReleased is the refund reason Stripe gives a refund it made
// itself to release an authorization (expired_uncaptured_charge).
const ReasonReleased = "expired_uncaptured_charge"

// Remainder is what a partial capture left uncaptured: amount −
// amountCaptured when the charge was captured (captured) with 0 <
// amountCaptured < amount; else 0 (captured in full, or never).
func Remainder(amount, amountCaptured int64, captured bool) int64 {
	if !captured || amountCaptured <= 0 || amountCaptured >= amount {
		return 0
	}
	return amount - amountCaptured
}

// Refunded is what refunds took of the captured money of a charge whose
// amount_refunded is amountRefunded: amountRefunded less what its partial
// capture released (Remainder), not below 0.
func Refunded(amount, amountCaptured, amountRefunded int64, captured bool) int64 {
	return max(0, amountRefunded-Remainder(amount, amountCaptured, captured))
}

// Refund is what the rule reads of one of a charge's refunds.
type Refund struct {
	Amount  int64
	Reason  string // "" when null
	Status  string
	Created int64 // unix seconds
}

// Release returns the index in refunds (all the refunds of a charge whose
// partial capture left remainder, see Remainder) of the refund that
// released remainder, -1 when there is none to leave out.
//
// A charge captured in part has exactly one release. A refund with reason
// ReasonReleased is that release when there is one: -1, as every refund of
// that reason is left out by its reason already. Else it is the refund,
// not failed or canceled, without a reason (a reason is either one a user
// gave or ReasonReleased), of exactly remainder, and the oldest of them:
// the release is made at the capture, before any refund of captured
// money. Of several equally old, the last listed (Stripe lists the newest
// first); they move the same amount either way. None such (the list is
// cut short): -1, and billing bounds what is refunded by the amount
// captured.
func Release(remainder int64, refunds []Refund) int {
	if remainder <= 0 {
		return -1
	}
	release, oldest := -1, int64(0)
	for i, r := range refunds {
		if r.Reason == ReasonReleased {
			return -1
		}
		if r.Reason != "" || r.Amount != remainder || r.Status == "failed" || r.Status == "canceled" {
			continue
		}
		if release < 0 || r.Created <= oldest {
			release, oldest = i, r.Created
		}
	}
	return release
}
