package sim

import "time"

// Refund is a refund of (part of) a payment.
type Refund struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Status    string `json:"status"` // succeeded | failed
	Reason    string `json:"reason,omitempty"`
	// Release says the provider made it at a partial capture to release
	// what was not captured (Payment.Authorized − Payment.Amount): no
	// refund of captured money, not in the payment's RefundedAmount.
	Release   bool      `json:"release,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// idemRecord is what an Idempotency-Key was first used with.
type idemRecord struct {
	paymentID string
	amount    int64
	fail      bool
	refundID  string
}

// Refund refunds amount of a payment. With an idempotencyKey, the same key
// returns the same refund and never refunds twice; the same key with other
// parameters is a conflict. Refunding more than what is left is invalid
// and changes nothing. fail makes the refund fail: status failed, a
// refund.failed event, the payment unchanged.
func (p *Provider) Refund(env, paymentID string, amount int64, idempotencyKey string, fail bool) (Refund, error) {
	r, _, err := p.refund(env, paymentID, amount, idempotencyKey, fail)
	return r, err
}

// refund is Refund that also says whether the key replayed an earlier one.
func (p *Provider) refund(env, paymentID string, amount int64, key string, fail bool) (Refund, bool, error) {
	type result struct {
		r        Refund
		replayed bool
	}
	res, err := change(p, env, func(t *tx) (result, error) {
		w := t.w
		if rec, ok := w.idem[key]; key != "" && ok {
			if rec.paymentID != paymentID || rec.amount != amount || rec.fail != fail {
				return result{}, conflict("Idempotency-Key %q was already used with other parameters", key)
			}
			return result{*w.refunds[rec.refundID], true}, nil
		}
		r, err := t.newRefund(paymentID, amount, fail)
		if err != nil {
			return result{}, err
		}
		if key != "" {
			w.idem[key] = idemRecord{paymentID: paymentID, amount: amount, fail: fail, refundID: r.ID}
		}
		return result{r: r}, nil
	})
	return res.r, res.replayed, err
}

// newRefund creates a refund.
func (t *tx) newRefund(paymentID string, amount int64, fail bool) (Refund, error) {
	p, w := t.p, t.w
	if paymentID == "" {
		return Refund{}, invalid("payment_id is required")
	}
	pay, ok := w.payments[paymentID]
	if !ok {
		return Refund{}, notFound("payment", paymentID)
	}
	if amount <= 0 {
		return Refund{}, invalid("amount must be a positive integer of minor units, got %d", amount)
	}
	if pay.Status == "charged_back" {
		return Refund{}, conflict("payment %s is charged back", paymentID)
	}
	if left := pay.Amount - pay.RefundedAmount; amount > left {
		return Refund{}, invalid("amount %d is more than the %d left to refund on payment %s", amount, left, paymentID)
	}
	now := p.now()
	r := &Refund{
		ID: p.newID("re_"), Object: "refund", PaymentID: paymentID, Amount: amount,
		Currency: pay.Currency, Status: "succeeded", CreatedAt: now,
	}
	w.refunds[r.ID] = r
	w.refundOrder = append(w.refundOrder, r.ID)
	if fail {
		r.Status, r.Reason = "failed", "simulated_failure"
		t.emit("refund.failed", r.ID, r.data(), "")
	} else {
		pay.RefundedAmount += amount
		pay.Status = "partially_refunded"
		if pay.RefundedAmount == pay.Amount {
			pay.Status = "refunded"
		}
		pay.UpdatedAt = now
		data := pay.data()
		data["refund"] = r.data()
		t.emit("payment.refunded", pay.ID, data, "")
	}
	return *r, nil
}

// GetRefund returns a refund of env.
func (p *Provider) GetRefund(env, id string) (Refund, error) {
	return lookup(p, env, "refund", id, func(w *world) map[string]*Refund { return w.refunds }, func(v *Refund) Refund { return *v })
}

func (r *Refund) data() map[string]any {
	d := map[string]any{
		"id": r.ID, "object": r.Object, "payment_id": r.PaymentID, "amount": r.Amount,
		"currency": r.Currency, "status": r.Status, "created_at": ts(r.CreatedAt),
	}
	if r.Reason != "" {
		d["reason"] = r.Reason
	}
	if r.Release {
		d["release"] = true
	}
	return d
}
