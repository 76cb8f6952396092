package sim

import "time"

// Payment is the money a completed checkout collected.
type Payment struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"` // succeeded | partially_refunded | refunded | charged_back
	RefundedAmount int64  `json:"refunded_amount"`
	// Authorized is what was authorized when the capture took less (a
	// partial capture, CompleteCheckoutCapture: Amount is what was
	// captured); 0 when all of it was captured. Its rest was released by
	// a refund of its own (Refund.Release), not counted in RefundedAmount.
	Authorized int64  `json:"authorized,omitempty"`
	OrderID    string `json:"order_id"`
	CheckoutID string `json:"checkout_id"`
	// DisputeID is the id of the payment's chargeback ("dp_" + the
	// payment id), set when it is charged back; the event of a won
	// dispute carries the same id. A payment is disputed at most once.
	DisputeID string `json:"dispute_id,omitempty"`
	// ChargedBackAt is when it was charged back.
	ChargedBackAt time.Time `json:"charged_back_at,omitzero"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// GetPayment returns a payment of env.
func (p *Provider) GetPayment(env, id string) (Payment, error) {
	return lookup(p, env, "payment", id, func(w *world) map[string]*Payment { return w.payments }, func(v *Payment) Payment { return *v })
}

// changePayment runs f on env's payment id, inside change.
func changePayment(p *Provider, env, id string, f func(t *tx, pay *Payment) error) (Payment, error) {
	return change(p, env, func(t *tx) (Payment, error) {
		pay, ok := t.w.payments[id]
		if !ok {
			return Payment{}, notFound("payment", id)
		}
		if err := f(t, pay); err != nil {
			return Payment{}, err
		}
		return *pay, nil
	})
}

func (pay *Payment) data() map[string]any {
	d := map[string]any{
		"id": pay.ID, "object": pay.Object, "amount": pay.Amount, "currency": pay.Currency,
		"status": pay.Status, "refunded_amount": pay.RefundedAmount, "order_id": pay.OrderID,
		"checkout_id": pay.CheckoutID, "created_at": ts(pay.CreatedAt), "updated_at": ts(pay.UpdatedAt),
	}
	if pay.Authorized > pay.Amount {
		d["authorized_amount"], d["released_amount"] = pay.Authorized, pay.Authorized-pay.Amount
	}
	if pay.DisputeID != "" {
		d["dispute_id"] = pay.DisputeID
	}
	if !pay.ChargedBackAt.IsZero() {
		d["charged_back_at"] = ts(pay.ChargedBackAt)
	}
	return d
}
