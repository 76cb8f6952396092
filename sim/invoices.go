package sim

import "time"

// Invoice is a crypto invoice; settling it is final.
type Invoice struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"` // new | settled
	OrderID   string    `json:"order_id"`
	ChainRef  string    `json:"chain_ref,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CreateInvoice creates a crypto invoice for an order, waiting for
// payment (status new; no event).
func (p *Provider) CreateInvoice(env string, amount int64, currency, orderID string) (Invoice, error) {
	if err := checkMoney(amount, currency); err != nil {
		return Invoice{}, err
	}
	return read(p, env, func(w *world) (Invoice, error) {
		now := p.now()
		inv := &Invoice{
			ID: p.newID("inv_"), Object: "invoice", Amount: amount, Currency: currency,
			Status: "new", OrderID: orderID, CreatedAt: now, UpdatedAt: now,
		}
		w.invoices[inv.ID] = inv
		w.invoiceOrder = append(w.invoiceOrder, inv.ID)
		return *inv, nil
	})
}

// GetInvoice returns an invoice of env.
func (p *Provider) GetInvoice(env, id string) (Invoice, error) {
	return lookup(p, env, "invoice", id, func(w *world) map[string]*Invoice { return w.invoices }, func(v *Invoice) Invoice { return *v })
}

// SettleInvoice settles an invoice with the on-chain reference of its
// payment (invoice.settled). Settling is final: settling again is a
// conflict. The chain reference is not checked against other invoices, so
// a scenario can reuse one on purpose.
func (p *Provider) SettleInvoice(env, id, chainRef string) (Invoice, error) {
	if chainRef == "" {
		return Invoice{}, invalid("chain_ref is required")
	}
	return change(p, env, func(t *tx) (Invoice, error) {
		inv, ok := t.w.invoices[id]
		if !ok {
			return Invoice{}, notFound("invoice", id)
		}
		if inv.Status != "new" {
			return Invoice{}, conflict("invoice %s is already %s", id, inv.Status)
		}
		inv.Status, inv.ChainRef, inv.UpdatedAt = "settled", chainRef, p.now()
		t.emit("invoice.settled", inv.ID, inv.data(), "")
		return *inv, nil
	})
}

func (inv *Invoice) data() map[string]any {
	return map[string]any{
		"id": inv.ID, "object": inv.Object, "amount": inv.Amount, "currency": inv.Currency,
		"status": inv.Status, "order_id": inv.OrderID, "chain_ref": inv.ChainRef,
		"created_at": ts(inv.CreatedAt), "updated_at": ts(inv.UpdatedAt),
	}
}
