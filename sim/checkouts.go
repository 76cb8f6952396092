package sim

import (
	"maps"
	"time"
)

// Checkout is a checkout session: open until completed, which creates
// its payment.
type Checkout struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	Amount    int64             `json:"amount"`
	Currency  string            `json:"currency"`
	Status    string            `json:"status"` // open | completed
	Metadata  map[string]string `json:"metadata"`
	PaymentID string            `json:"payment_id,omitempty"`
	// CaptureMethod is "manual" when the completion captured less than
	// was authorized (CompleteCheckoutCapture), else "".
	CaptureMethod string    `json:"capture_method,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func checkMoney(amount int64, currency string) error {
	if amount <= 0 {
		return invalid("amount must be a positive integer of minor units, got %d", amount)
	}
	if currency == "" {
		return invalid("currency is required")
	}
	return nil
}

// CreateCheckout opens a checkout for an order.
func (p *Provider) CreateCheckout(env string, amount int64, currency, orderID string) (Checkout, error) {
	if err := checkMoney(amount, currency); err != nil {
		return Checkout{}, err
	}
	return read(p, env, func(w *world) (Checkout, error) {
		now := p.now()
		c := &Checkout{
			ID: p.newID("chk_"), Object: "checkout", Amount: amount, Currency: currency,
			Status: "open", Metadata: map[string]string{"order_id": orderID},
			CreatedAt: now, UpdatedAt: now,
		}
		w.checkouts[c.ID] = c
		w.checkoutOrder = append(w.checkoutOrder, c.ID)
		return c.clone(), nil
	})
}

func (c *Checkout) clone() Checkout {
	out := *c
	out.Metadata = maps.Clone(c.Metadata)
	return out
}

// GetCheckout returns a checkout of env.
func (p *Provider) GetCheckout(env, id string) (Checkout, error) {
	return lookup(p, env, "checkout", id, func(w *world) map[string]*Checkout { return w.checkouts }, (*Checkout).clone)
}

// CompleteCheckout completes an open checkout: it creates the payment and
// emits checkout.completed, then payment.succeeded.
func (p *Provider) CompleteCheckout(env, id string) (Payment, error) {
	return p.CompleteCheckoutCapture(env, id, 0)
}

// CompleteCheckoutCapture completes an open checkout as CompleteCheckout,
// capturing capture of its amount: 0 (or the amount) captures it all.
// Less is a partial capture, as Stripe makes one (PaymentIntents
// amount_to_capture, the Charges API's capture amount), modelled with the
// stripe flavour only: the checkout's amount is authorized (its
// CaptureMethod "manual": checkout.completed is not paid), the payment
// is of capture (Authorized the checkout's amount), and the rest is
// released by a refund the provider makes at once (Refund.Release,
// succeeded, no reason), which payment.refunded tells: Stripe's
// charge.refunded, whose charge counts it in amount_refunded. The release
// is not refunded money: RefundedAmount stays 0, and what is left to
// refund is capture.
func (p *Provider) CompleteCheckoutCapture(env, id string, capture int64) (Payment, error) {
	return change(p, env, func(t *tx) (Payment, error) {
		w := t.w
		c, ok := w.checkouts[id]
		if !ok {
			return Payment{}, notFound("checkout", id)
		}
		if c.Status != "open" {
			return Payment{}, conflict("checkout %s is already %s", id, c.Status)
		}
		partial := capture != 0 && capture != c.Amount
		switch {
		case capture < 0 || capture > c.Amount:
			return Payment{}, invalid("amount_to_capture must be from 1 to the checkout's %d, got %d", c.Amount, capture)
		case partial && p.cfg.Flavour.Provider() != "stripe":
			return Payment{}, invalid("a partial capture is modelled with the stripe flavour only, not %s", p.cfg.Flavour.Name())
		}
		now := p.now()
		pay := &Payment{
			ID: p.newID("pay_"), Object: "payment", Amount: c.Amount, Currency: c.Currency,
			Status: "succeeded", OrderID: c.Metadata["order_id"], CheckoutID: c.ID,
			CreatedAt: now, UpdatedAt: now,
		}
		if partial {
			pay.Amount, pay.Authorized, c.CaptureMethod = capture, c.Amount, "manual"
		}
		w.payments[pay.ID] = pay
		w.paymentOrder = append(w.paymentOrder, pay.ID)
		c.Status, c.PaymentID, c.UpdatedAt = "completed", pay.ID, now
		t.emit("checkout.completed", c.ID, c.data(), "")
		t.emit("payment.succeeded", pay.ID, pay.data(), "")
		if partial {
			r := &Refund{
				ID: p.newID("re_"), Object: "refund", PaymentID: pay.ID, Amount: pay.Authorized - pay.Amount,
				Currency: pay.Currency, Status: "succeeded", Release: true, CreatedAt: now,
			}
			w.refunds[r.ID] = r
			w.refundOrder = append(w.refundOrder, r.ID)
			data := pay.data()
			data["refund"] = r.data()
			t.emit("payment.refunded", pay.ID, data, "")
		}
		return *pay, nil
	})
}

func (c *Checkout) data() map[string]any {
	meta := map[string]any{}
	for k, v := range c.Metadata {
		meta[k] = v
	}
	d := map[string]any{
		"id": c.ID, "object": c.Object, "amount": c.Amount, "currency": c.Currency,
		"status": c.Status, "metadata": meta, "payment_id": c.PaymentID,
		"created_at": ts(c.CreatedAt), "updated_at": ts(c.UpdatedAt),
	}
	if c.CaptureMethod != "" {
		d["capture_method"] = c.CaptureMethod
	}
	return d
}
