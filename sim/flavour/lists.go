package flavour

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Kinds of objects a Lister lists.
const (
	ObjectPayment      = "payment"
	ObjectRefund       = "refund"
	ObjectDispute      = "dispute"
	ObjectSubscription = "subscription"
	// ObjectAdjustment lists refunds and disputes together, in the order
	// they were made, each as an Event of Type ObjectRefund or
	// ObjectDispute (Paddle's adjustments); filter them with Query.Type.
	ObjectAdjustment = "adjustment"
)

// Lister is implemented by flavours whose API lists recent objects
// (payments, refunds, disputes, subscriptions) in their provider's shape,
// as a reconciliation reads them. The sim's API adds these routes when
// its flavour has them.
//
// The objects to render come as Events: ID the object's id (a dispute's
// is its DisputeID), CreatedAt when it was created, Data its neutral data
// (a dispute's is its payment's), and, for a subscription, Type the
// neutral type of its last change (as Retriever's).
type Lister interface {
	// ListPaths maps each list route, e.g. "/v1/charges", to the kind of
	// object it lists (ObjectPayment...).
	ListPaths() map[string]string
	// ListQuery reads a list's query: the created-since bound, the cursor
	// (the last object id of the previous page) and the page size.
	ListQuery(r *http.Request) (Query, error)
	// ListPage renders one page of objects of kind and the cursor of the
	// next page ("" on the last).
	ListPage(kind string, objs []Event, next string) ([]byte, error)
	// VersionHeader names the header in which the API says the version it
	// rendered a page in; the version asked for in the same request
	// header is honoured when honoured is true.
	VersionHeader() (name string, honoured bool)
}

// ListPaths: billete lists at GET /payments, /refunds and /subscriptions
// (a dispute is its payment's status there).
func (billete) ListPaths() map[string]string {
	return map[string]string{"/payments": ObjectPayment, "/refunds": ObjectRefund, "/subscriptions": ObjectSubscription}
}

// ListQuery reads created_from (RFC 3339), cursor and limit (1 to 1000).
func (billete) ListQuery(r *http.Request) (Query, error) {
	q, err := listQuery(r, neutralTypes, false)
	q.Type = ""
	return q, err
}

// ListPage renders {"object":"list","data":[the neutral objects],
// "has_more","next_cursor"}.
func (billete) ListPage(_ string, objs []Event, next string) ([]byte, error) {
	return renderList(objs, next, func(ev Event) ([]byte, error) { return json.Marshal(ev.Data) })
}

// VersionHeader: billete renders every page in the account's version,
// said in Billete-Version, whatever the request asks.
func (billete) VersionHeader() (string, bool) { return "Billete-Version", false }

// ListPaths: Stripe's charges, refunds, disputes and subscriptions lists.
func (stripeFlavour) ListPaths() map[string]string {
	return map[string]string{
		"/v1/charges": ObjectPayment, "/v1/refunds": ObjectRefund,
		"/v1/disputes": ObjectDispute, "/v1/subscriptions": ObjectSubscription,
	}
}

// ListQuery reads created[gte]|created[gt] (unix seconds), starting_after,
// limit (1 to 100), charge (refunds of that charge only), status ("all"
// only: the sim lists canceled subscriptions too, as Stripe does with
// status=all) and expand[] (data.charge or data.charge.refunds: a
// refund's charge, and its refunds); any other parameter is an error, as
// Stripe's.
func (f stripeFlavour) ListQuery(r *http.Request) (Query, error) {
	p, err := params(r)
	if err != nil {
		return Query{}, err
	}
	if v, ok := p["status"]; ok && v != "all" {
		return Query{}, fmt.Errorf("list query: status %q: the sim lists status=all only: %w", v, ErrQuery)
	}
	charge, hasCharge := p["charge"]
	if hasCharge && charge == "" {
		return Query{}, fmt.Errorf("list query: charge is empty: %w", ErrQuery)
	}
	expand := r.URL.Query()["expand[]"]
	for _, e := range expand {
		if e != "data.charge" && e != "data.charge.refunds" {
			return Query{}, fmt.Errorf("list query: expand[] %q: the sim expands data.charge and data.charge.refunds only: %w", e, ErrQuery)
		}
	}
	if _, ok := p["status"]; ok || hasCharge || len(expand) > 0 {
		q := r.URL.Query()
		q.Del("status")
		q.Del("charge")
		q.Del("expand[]")
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
	}
	q, err := f.EventsQuery(r)
	if err == nil && q.Type != "" {
		err = fmt.Errorf("list query: received unknown parameter: type: %w", ErrQuery)
	}
	q.Charge, q.Expand = charge, expand
	return q, err
}

// ListPage renders Stripe's list object of charges, refunds, disputes or
// subscriptions.
func (f stripeFlavour) ListPage(kind string, objs []Event, next string) ([]byte, error) {
	path := ""
	for p, k := range f.ListPaths() {
		if k == kind {
			path = p
		}
	}
	data, err := rawList(objs, func(ev Event) ([]byte, error) { return json.Marshal(stripeListed(kind, ev)) })
	if err != nil {
		return nil, fmt.Errorf("stripe: render %s list: %w", kind, err)
	}
	return json.Marshal(stripeList{Object: "list", Data: data, HasMore: next != "", URL: path})
}

// stripeListed shapes one listed object as Stripe's.
func stripeListed(kind string, ev Event) map[string]any {
	d := ev.Data
	created := ev.CreatedAt.Unix()
	switch kind {
	case ObjectPayment:
		authorized, captured, refunded := stripeChargeAmounts(d)
		return map[string]any{
			"id": d["id"], "object": "charge", "amount": authorized, "amount_captured": captured,
			"amount_refunded": refunded, "currency": d["currency"], "status": "succeeded",
			"captured": true, "paid": true, "refunded": authorized > 0 && refunded == authorized,
			"disputed": str(d, "dispute_id") != "", "payment_intent": d["id"], "created": created,
			"livemode": ev.Environment == "live", "metadata": pick(d, "order_id", "checkout_id"),
		}
	case ObjectRefund:
		o := map[string]any{
			"id": d["id"], "object": "refund", "amount": d["amount"], "currency": d["currency"],
			"status": d["status"], "payment_intent": d["payment_id"], "charge": d["payment_id"], "created": created,
		}
		if r, ok := d["reason"]; ok {
			o["failure_reason"] = r
		}
		// Its charge, when the refund list or retrieve expands it
		// (expand[]=data.charge / charge; with .refunds, the charge's
		// refunds too): the payment's data, with "refunds" when asked.
		if pay, ok := d["payment"].(map[string]any); ok && pay != nil {
			at, _ := time.Parse(time.RFC3339Nano, str(pay, "created_at"))
			_, refunds := pay["refunds"]
			o["charge"] = stripeCharge(Event{CreatedAt: at, Data: pay}, refunds)
		}
		return o
	case ObjectDispute:
		status := "won"
		if str(d, "status") == "charged_back" {
			status = "needs_response"
		}
		return map[string]any{
			"id": disputeID(d), "object": "dispute", "amount": d["amount"], "currency": d["currency"],
			"charge": d["id"], "payment_intent": d["id"], "status": status, "reason": "fraudulent", "created": created,
		}
	}
	o := stripeObject(ev)
	o["created"] = created
	return o
}

// stripeChargeAmounts are a payment's charge's amount (what was
// authorized), amount_captured and amount_refunded: a partial capture
// (the sim's authorized_amount) is authorized for more than it captured,
// and its amount_refunded counts the release of the rest
// (released_amount), as Stripe's does.
func stripeChargeAmounts(d map[string]any) (authorized, captured, refunded int64) {
	captured, _ = d["amount"].(int64)
	refunded, _ = d["refunded_amount"].(int64)
	authorized = captured
	if a, ok := d["authorized_amount"].(int64); ok && a > captured {
		released, _ := d["released_amount"].(int64)
		authorized, refunded = a, refunded+released
	}
	return authorized, captured, refunded
}

// VersionHeader: Stripe answers in the version the request's
// Stripe-Version asks, else the account's.
func (stripeFlavour) VersionHeader() (string, bool) { return "Stripe-Version", true }
