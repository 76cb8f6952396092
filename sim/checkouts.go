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
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
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
	return change(p, env, func(t *tx) (Payment, error) {
		w := t.w
		c, ok := w.checkouts[id]
		if !ok {
			return Payment{}, notFound("checkout", id)
		}
		if c.Status != "open" {
			return Payment{}, conflict("checkout %s is already %s", id, c.Status)
		}
		now := p.now()
		pay := &Payment{
			ID: p.newID("pay_"), Object: "payment", Amount: c.Amount, Currency: c.Currency,
			Status: "succeeded", OrderID: c.Metadata["order_id"], CheckoutID: c.ID,
			CreatedAt: now, UpdatedAt: now,
		}
		w.payments[pay.ID] = pay
		w.paymentOrder = append(w.paymentOrder, pay.ID)
		c.Status, c.PaymentID, c.UpdatedAt = "completed", pay.ID, now
		t.emit("checkout.completed", c.ID, c.data(), "")
		t.emit("payment.succeeded", pay.ID, pay.data(), "")
		return *pay, nil
	})
}

func (c *Checkout) data() map[string]any {
	meta := map[string]any{}
	for k, v := range c.Metadata {
		meta[k] = v
	}
	return map[string]any{
		"id": c.ID, "object": c.Object, "amount": c.Amount, "currency": c.Currency,
		"status": c.Status, "metadata": meta, "payment_id": c.PaymentID,
		"created_at": ts(c.CreatedAt), "updated_at": ts(c.UpdatedAt),
	}
}
