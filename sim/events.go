package sim

import "github.com/payhook/payhook/sim/flavour"

// EventTypes are the neutral event types an endpoint can subscribe to
// (besides "*", every type).
var EventTypes = []string{
	"checkout.completed",
	"payment.succeeded",
	"payment.refunded",
	"payment.charged_back",
	"payment.chargeback_won",
	"refund.failed",
	"subscription.created",
	"subscription.updated",
	"subscription.renewed",
	"subscription.canceled",
	"subscription.ended",
	"invoice.settled",
	"webhook_endpoint.test",
}

// Events returns one page of env's events, oldest first, and the cursor
// of the next page ("" on the last page). An unknown environment or
// cursor gives an empty page.
func (p *Provider) Events(env string, q flavour.Query) (page []flavour.Event, next string) {
	page, next, _ = p.events(env, q)
	return page, next
}

func (p *Provider) events(env string, q flavour.Query) ([]flavour.Event, string, error) {
	type result struct {
		page []flavour.Event
		next string
	}
	res, err := read(p, env, func(w *world) (result, error) {
		page, next, err := flavour.Select(w.events, q)
		if err != nil {
			return result{page: []flavour.Event{}}, invalid("%v", err)
		}
		for i := range page {
			page[i] = copyEvent(page[i])
		}
		return result{page, next}, nil
	})
	return res.page, res.next, err
}

// Snapshot returns all of env's resources and events, each list in
// creation order, for computing what a receiver should end with.
// Deleted endpoints are left out.
func (p *Provider) Snapshot(env string) (State, error) {
	return read(p, env, func(w *world) (State, error) {
		st := State{
			Environment: env, Endpoints: []Endpoint{}, Checkouts: []Checkout{}, Payments: []Payment{},
			Refunds: []Refund{}, Subscriptions: []Subscription{}, Invoices: []Invoice{}, Events: []flavour.Event{},
		}
		for _, id := range w.endpointOrder {
			if e := w.endpoints[id]; !e.deleted {
				st.Endpoints = append(st.Endpoints, e.public())
			}
		}
		for _, id := range w.checkoutOrder {
			st.Checkouts = append(st.Checkouts, w.checkouts[id].clone())
		}
		for _, id := range w.paymentOrder {
			st.Payments = append(st.Payments, *w.payments[id])
		}
		for _, id := range w.refundOrder {
			st.Refunds = append(st.Refunds, *w.refunds[id])
		}
		for _, id := range w.subOrder {
			st.Subscriptions = append(st.Subscriptions, *w.subs[id])
		}
		for _, id := range w.invoiceOrder {
			st.Invoices = append(st.Invoices, *w.invoices[id])
		}
		for _, ev := range w.events {
			st.Events = append(st.Events, copyEvent(ev))
		}
		return st, nil
	})
}

// copyEvent returns ev with a deep copy of its Data, so that no two
// holders share a map.
func copyEvent(ev flavour.Event) flavour.Event {
	ev.Data, _ = deepCopy(ev.Data).(map[string]any)
	return ev
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}
