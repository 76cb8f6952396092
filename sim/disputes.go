package sim

// A dispute is a payment's chargeback: it has no object of its own, only
// the payment's DisputeID and ChargedBackAt, and the events
// payment.charged_back and payment.chargeback_won.

// Chargeback charges a payment back (payment.charged_back), opening its
// dispute DisputeID ("dp_" + the payment id). A payment already charged
// back, fully refunded or whose dispute was won is a conflict: a payment
// is disputed at most once.
func (p *Provider) Chargeback(env, paymentID string) (Payment, error) {
	return changePayment(p, env, paymentID, func(t *tx, pay *Payment) error {
		if pay.Status == "charged_back" || pay.Status == "refunded" {
			return conflict("payment %s is %s", paymentID, pay.Status)
		}
		if pay.DisputeID != "" {
			return conflict("payment %s was already disputed (%s, won)", paymentID, pay.DisputeID)
		}
		now := p.now()
		pay.Status, pay.UpdatedAt = "charged_back", now
		pay.DisputeID, pay.ChargedBackAt = "dp_"+pay.ID, now
		t.emit("payment.charged_back", pay.ID, pay.data(), "")
		return nil
	})
}

// WinChargeback closes a charged back payment's dispute in the merchant's
// favour (payment.chargeback_won, data the payment with its dispute_id):
// the money comes back and the payment returns to the status it had
// before, succeeded or partially_refunded by its refunded amount. A
// payment that is not charged back is a conflict.
func (p *Provider) WinChargeback(env, paymentID string) (Payment, error) {
	return changePayment(p, env, paymentID, func(t *tx, pay *Payment) error {
		if pay.Status != "charged_back" {
			return conflict("payment %s is %s, not charged_back", paymentID, pay.Status)
		}
		pay.Status = "succeeded"
		if pay.RefundedAmount > 0 {
			pay.Status = "partially_refunded"
		}
		pay.UpdatedAt = p.now()
		t.emit("payment.chargeback_won", pay.ID, pay.data(), "")
		return nil
	})
}
