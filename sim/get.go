package sim

import (
	"net/http"
	"strings"

	"github.com/payhook/payhook/sim/flavour"
)

// object returns env's object of kind with id as a flavour.Getter renders
// it, or an error matching ErrNotFound.
func (p *Provider) object(env, kind, id string) (flavour.Event, error) {
	return read(p, env, func(w *world) (flavour.Event, error) {
		ev := flavour.Event{ID: id, Type: kind, Environment: env, ObjectID: id}
		switch kind {
		case flavour.ObjectPayment, flavour.ObjectCharge:
			if pay, ok := w.payments[id]; ok {
				ev.CreatedAt, ev.Data = pay.CreatedAt, pay.data()
				ev.Data["refunds"] = refundsOf(w, id)
				return ev, nil
			}
		case flavour.ObjectTransaction:
			if pay, ok := w.payments[id]; ok {
				ev.Type, ev.CreatedAt, ev.Data = flavour.ObjectPayment, pay.CreatedAt, pay.data()
				ev.Data["refunds"] = refundsOf(w, id)
				return ev, nil
			}
			if c, ok := w.checkouts[id]; ok {
				ev.Type, ev.CreatedAt, ev.Data = flavour.ObjectCheckout, c.CreatedAt, c.data()
				return ev, nil
			}
			if inv, ok := w.invoices[id]; ok {
				ev.Type, ev.CreatedAt, ev.Data = flavour.ObjectInvoice, inv.CreatedAt, inv.data()
				return ev, nil
			}
		case flavour.ObjectRefund:
			if r, ok := w.refunds[id]; ok {
				ev.CreatedAt, ev.Data = r.CreatedAt, r.data()
				// Its payment, with its refunds: Stripe's expand[]=charge
				// (.refunds) renders them.
				ev.Data["payment"] = paymentOf(w, r.PaymentID, true)
				return ev, nil
			}
		case flavour.ObjectDispute:
			for _, pid := range w.paymentOrder {
				if pay := w.payments[pid]; pay.DisputeID == id {
					ev.CreatedAt, ev.Data = pay.ChargedBackAt, pay.data()
					return ev, nil
				}
			}
		case flavour.ObjectCheckout:
			if c, ok := w.checkouts[id]; ok {
				ev.CreatedAt, ev.Data = c.CreatedAt, c.data()
				return ev, nil
			}
		case flavour.ObjectSubscription:
			if s, ok := w.subs[id]; ok {
				ev = s.event(env)
				ev.ID, ev.CreatedAt = id, s.CreatedAt
				return ev, nil
			}
		}
		return flavour.Event{}, notFound(kind, id)
	})
}

// getHandler serves one retrieve route of a flavour.Getter.
func (p *Provider) getHandler(gf flavour.Getter, kind string) func(w http.ResponseWriter, r *http.Request, env string) error {
	return func(w http.ResponseWriter, r *http.Request, env string) error {
		obj, err := p.object(env, kind, r.PathValue("id"))
		if err != nil {
			return err
		}
		q := r.URL.Query()
		expand := q["expand[]"]
		for _, v := range q["include"] { // Paddle's: comma-separated
			expand = append(expand, strings.Split(v, ",")...)
		}
		body, err := gf.GetObject(kind, obj, expand)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		return nil
	}
}

// paymentOf returns the data of payment id, with its refunds' when
// refunds is true.
func paymentOf(w *world, id string, refunds bool) map[string]any {
	pay, ok := w.payments[id]
	if !ok {
		return nil
	}
	d := pay.data()
	if refunds {
		d["refunds"] = refundsOf(w, id)
	}
	return d
}

// refundsOf returns the data of payment id's refunds, oldest first.
func refundsOf(w *world, id string) []map[string]any {
	var refunds []map[string]any
	for _, rid := range w.refundOrder {
		if r := w.refunds[rid]; r.PaymentID == id {
			refunds = append(refunds, r.data())
		}
	}
	return refunds
}
