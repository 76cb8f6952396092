package sim

import (
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/payhook/payhook/sim/flavour"
)

// objects returns one page of env's objects of kind (flavour.ObjectPayment
// ...), oldest first (newest first when q.Descending), as flavour.Lister
// renders them, and the cursor of the next page.
func (p *Provider) objects(env, kind string, q flavour.Query) ([]flavour.Event, string, error) {
	type result struct {
		page []flavour.Event
		next string
	}
	res, err := read(p, env, func(w *world) (result, error) {
		var all []flavour.Event
		typ := kind
		obj := func(id string, at time.Time, data map[string]any) {
			all = append(all, flavour.Event{ID: id, Type: typ, CreatedAt: at, Environment: env, ObjectID: id, Data: data})
		}
		refunds := func() {
			for _, id := range w.refundOrder {
				r := w.refunds[id]
				d := r.data()
				if len(q.Expand) > 0 { // data.charge[.refunds]: its payment
					d["payment"] = paymentOf(w, r.PaymentID, slices.Contains(q.Expand, "data.charge.refunds"))
				}
				obj(id, r.CreatedAt, d)
			}
		}
		disputes := func() {
			for _, id := range w.paymentOrder {
				if pay := w.payments[id]; pay.DisputeID != "" {
					obj(pay.DisputeID, pay.ChargedBackAt, pay.data())
				}
			}
		}
		switch kind {
		case flavour.ObjectPayment:
			for _, id := range w.paymentOrder {
				pay := w.payments[id]
				obj(id, pay.CreatedAt, pay.data())
			}
		case flavour.ObjectRefund:
			refunds()
		case flavour.ObjectDispute:
			disputes()
		case flavour.ObjectAdjustment:
			typ = flavour.ObjectRefund
			refunds()
			typ = flavour.ObjectDispute
			disputes()
			// In the order they were made (disputes by payment).
			sort.SliceStable(all, func(i, j int) bool { return all[i].CreatedAt.Before(all[j].CreatedAt) })
		case flavour.ObjectSubscription:
			for _, id := range w.subOrder {
				ev := w.subs[id].event(env)
				ev.ID, ev.CreatedAt = id, w.subs[id].CreatedAt
				all = append(all, ev)
			}
		}
		if q.Descending {
			slices.Reverse(all)
		}
		page, next, err := flavour.Select(all, q)
		if err != nil {
			return result{page: []flavour.Event{}}, invalid("%v", err)
		}
		return result{page, next}, nil
	})
	return res.page, res.next, err
}

// listHandler serves one list route of a flavour.Lister.
func (p *Provider) listHandler(lf flavour.Lister, kind string) func(w http.ResponseWriter, r *http.Request, env string) error {
	return func(w http.ResponseWriter, r *http.Request, env string) error {
		q, err := lf.ListQuery(r)
		if err != nil {
			return invalid("%v", err)
		}
		page, next, err := p.objects(env, kind, q)
		if err != nil {
			return err
		}
		body, err := lf.ListPage(kind, page, next)
		if err != nil {
			return err
		}
		name, honoured := lf.VersionHeader()
		version := p.cfg.APIVersion
		if v := r.Header.Get(name); honoured && v != "" {
			version = v
		}
		w.Header().Set(name, version)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		return nil
	}
}
