package flavour

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stripeFlavour delivers Stripe event objects.
type stripeFlavour struct{}

// Stripe returns the Stripe flavour: event objects {"id","object":"event",
// "api_version","created","livemode","type","data":{"object":{...}}} with
// Stripe's type names and object shapes, the Stripe-Signature header
// (t=<unix>,v1=<hex> per secret, HMAC-SHA256 of "t.body" keyed by the
// whole "whsec_..." secret) and GET /v1/events?type=&created[gte]=
// &starting_after=&limit=.
func Stripe() Flavour { return stripeFlavour{} }

// stripeTypes maps neutral types to Stripe's (see the package doc).
var stripeTypes = typeMap{to: map[string]string{
	CheckoutCompleted:    "checkout.session.completed",
	PaymentSucceeded:     "payment_intent.succeeded",
	PaymentRefunded:      "charge.refunded",
	RefundFailed:         "charge.refund.updated",
	PaymentChargedBack:   "charge.dispute.created",
	ChargebackWon:        "charge.dispute.closed",
	SubscriptionCreated:  "customer.subscription.created",
	SubscriptionUpdated:  "customer.subscription.updated",
	SubscriptionRenewed:  "customer.subscription.updated",
	SubscriptionCanceled: "customer.subscription.updated",
	SubscriptionEnded:    "customer.subscription.deleted",
	InvoiceSettled:       "invoice.paid",
	WebhookEndpointTest:  "ping",
}}

func (stripeFlavour) Name() string     { return "stripe" }
func (stripeFlavour) Provider() string { return "stripe" }

// NewSecret returns "whsec_" + 32 random letters and digits.
func (f stripeFlavour) NewSecret() string { return f.NewSecretFrom(rand.Reader) }

// NewSecretFrom is NewSecret drawing from r.
func (stripeFlavour) NewSecretFrom(r io.Reader) string { return "whsec_" + randomString(r, 32, alnum) }

// stripeEvent is Stripe's event object.
type stripeEvent struct {
	ID              string         `json:"id"`
	Object          string         `json:"object"`
	APIVersion      string         `json:"api_version"`
	Created         int64          `json:"created"`
	Data            stripeData     `json:"data"`
	Livemode        bool           `json:"livemode"`
	PendingWebhooks int            `json:"pending_webhooks"`
	Request         map[string]any `json:"request"`
	Type            string         `json:"type"`
}

type stripeData struct {
	Object map[string]any `json:"object"`
}

func (stripeFlavour) Body(ev Event, _ string) ([]byte, error) {
	b, err := json.Marshal(stripeEvent{
		ID: ev.ID, Object: "event", APIVersion: ev.APIVersion, Created: ev.CreatedAt.Unix(),
		Data:     stripeData{Object: stripeObject(ev)},
		Livemode: ev.Environment == "live", PendingWebhooks: 1,
		Request: map[string]any{"id": nil, "idempotency_key": nil},
		Type:    stripeTypes.name(ev.Type),
	})
	if err != nil {
		return nil, fmt.Errorf("stripe: render %s: %w", ev.ID, err)
	}
	return b, nil
}

// stripeObject shapes ev.Data as the Stripe object the event is about:
// every field of Data is kept, a few are renamed to Stripe's names.
func stripeObject(ev Event) map[string]any {
	d := ev.Data
	o := clone(d)
	// A partial capture's amounts are Stripe's fields below.
	delete(o, "authorized_amount")
	delete(o, "released_amount")
	switch ev.Type {
	case CheckoutCompleted:
		o["object"] = "checkout.session"
		rename(o, "amount", "amount_total")
		rename(o, "payment_id", "payment_intent")
		o["status"] = "complete"
		o["payment_status"] = "paid"
		if str(d, "capture_method") == "manual" {
			// Authorized, captured later: not paid yet.
			o["payment_status"] = "unpaid"
		}
	case PaymentSucceeded:
		o["object"] = "payment_intent"
		o["amount_received"] = d["amount"]
		if a, ok := d["authorized_amount"]; ok {
			o["amount"], o["capture_method"] = a, "manual"
		}
		o["metadata"] = pick(d, "order_id", "checkout_id")
	case PaymentRefunded:
		o["object"] = "charge"
		o["payment_intent"] = d["id"]
		rename(o, "refunded_amount", "amount_refunded")
		o["refunded"] = true
		if _, ok := d["authorized_amount"]; ok {
			// A partial capture: authorized amount, captured
			// amount_captured, the release of the rest refunded too.
			authorized, captured, refunded := stripeChargeAmounts(d)
			o["amount"], o["amount_captured"], o["amount_refunded"] = authorized, captured, refunded
			o["captured"], o["refunded"] = true, refunded == authorized
		}
		if r := sub(d, "refund"); r != nil {
			delete(o, "refund")
			ro := clone(r)
			delete(ro, "release")
			ro["object"] = "refund"
			ro["payment_intent"] = d["id"]
			o["refunds"] = map[string]any{"object": "list", "data": []any{ro}, "has_more": false}
		}
	case RefundFailed:
		o["object"] = "refund"
		rename(o, "payment_id", "payment_intent")
		rename(o, "reason", "failure_reason")
		o["status"] = "failed"
	case PaymentChargedBack, ChargebackWon:
		o["object"] = "dispute"
		o["id"] = disputeID(d)
		delete(o, "dispute_id")
		o["payment_intent"] = d["id"]
		o["charge"] = d["id"]
		o["status"] = "needs_response"
		o["reason"] = "fraudulent"
		o["payment_status"] = d["status"]
		if ev.Type == ChargebackWon {
			// charge.dispute.closed: the merchant won, the funds are
			// reinstated.
			o["status"] = "won"
			o["is_charge_refundable"] = false
		}
	case SubscriptionCreated, SubscriptionUpdated, SubscriptionRenewed, SubscriptionCanceled, SubscriptionEnded:
		o["object"] = "subscription"
		if p, ok := d["plan"]; ok {
			o["plan"] = map[string]any{"id": p, "object": "plan"}
			o["items"] = map[string]any{"object": "list", "data": []any{
				map[string]any{"object": "subscription_item", "price": map[string]any{"id": p, "object": "price"}},
			}}
		}
		if v, ok := d["current_period_end"]; ok {
			o["current_period_end"] = unix(v)
		}
		if v, ok := d["updated_at"]; ok {
			o["updated_at"] = unix(v)
		}
		o["cancel_at_period_end"] = ev.Type == SubscriptionCanceled
		switch ev.Type {
		case SubscriptionCanceled:
			o["cancel_at"] = o["current_period_end"]
			o["canceled_at"] = ev.CreatedAt.Unix()
		case SubscriptionEnded:
			o["status"] = "canceled"
			o["ended_at"] = ev.CreatedAt.Unix()
		}
	case InvoiceSettled:
		o["object"] = "invoice"
		rename(o, "amount", "amount_paid")
		o["status"] = "paid"
		o["metadata"] = pick(d, "order_id", "chain_ref")
	case WebhookEndpointTest:
		o["object"] = "webhook_endpoint"
		if id, ok := d["endpoint_id"]; ok {
			o["id"] = id
		}
	}
	return o
}

// Sign returns Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...], one v1
// per secret, as Stripe does while a secret is rolled.
func (stripeFlavour) Sign(secrets []string, _ Event, _ string, body []byte, at time.Time) (http.Header, error) {
	if err := checkSecrets("stripe", secrets); err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	parts := []string{"t=" + ts}
	for _, s := range secrets {
		parts = append(parts, "v1="+hmacHex(s, []byte(ts), []byte("."), body))
	}
	h := baseHeader("Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	h.Set("Stripe-Signature", strings.Join(parts, ","))
	return h, nil
}

// SubscriptionPath is Stripe's retrieve-a-subscription route.
func (stripeFlavour) SubscriptionPath() string { return "/v1/subscriptions/{id}" }

// Subscription renders a subscription as GET /v1/subscriptions/{id}
// returns it: the object its events carry in data.object, with created
// (when it was created, in unix seconds, as Stripe's), plus
// updated_at_ns, when it last changed in unix nanoseconds. Stripe has no
// such field (its times are whole seconds and a subscription has no
// version); the sim adds it so that a receiver can order two states of one
// subscription that changed within the same second. Each change of a sim
// subscription moves it forward by at least a microsecond.
func (stripeFlavour) Subscription(ev Event) ([]byte, error) {
	o := stripeObject(ev)
	o["updated_at_ns"] = ev.CreatedAt.UnixNano()
	if v, ok := ev.Data["created_at"]; ok {
		o["created"] = unix(v) // Stripe's: when it was created
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("stripe: render subscription %s: %w", ev.ObjectID, err)
	}
	return b, nil
}

func (stripeFlavour) EventsPath() string { return "/v1/events" }

// stripeTypesIndex is an element of the types array in the indexed form
// of Stripe's form encoding (stripe-go sends types[0], types[1], ...).
var stripeTypesIndex = regexp.MustCompile(`^types\[\d+\]$`)

// EventsQuery reads type (a Stripe type name, or a prefix ending in "*"
// such as "customer.subscription.*") or types (up to 20 type names, as
// types[]=a&types[]=b or types[0]=a&types[1]=b; not with type),
// created[gte] or created[gt] (unix seconds), starting_after (an event
// id) and limit (1 to 100). As Stripe does, it rejects any other
// parameter (ending_before included: the sim pages forward only).
func (stripeFlavour) EventsQuery(r *http.Request) (Query, error) {
	// types is an array: its parameter comes several times, the others once.
	rest := r.URL.Query()
	var types []string
	for k, vs := range rest {
		if k == "types[]" || stripeTypesIndex.MatchString(k) {
			types = append(types, vs...)
			delete(rest, k)
		}
	}
	r = r.Clone(r.Context())
	r.URL.RawQuery = rest.Encode()
	p, err := params(r)
	if err != nil {
		return Query{}, err
	}
	var q Query
	if len(types) > 0 {
		switch _, both := p["type"]; {
		case both:
			return Query{}, fmt.Errorf("%s: you may pass either type or types, but not both: %w", errPrefixEventsQuery, ErrQuery)
		case len(types) > 20:
			return Query{}, fmt.Errorf("%s: types: at most 20 types, not %d: %w", errPrefixEventsQuery, len(types), ErrQuery)
		case slices.Contains(types, ""):
			return Query{}, fmt.Errorf("%s: types: an empty type: %w", errPrefixEventsQuery, ErrQuery)
		}
		if q.Type, err = stripeTypes.parseTypes("types", strings.Join(types, ","), false); err != nil {
			return Query{}, err
		}
	}
	for k, v := range p {
		switch k {
		case "type":
			q.Type, err = stripeTypes.parseTypes(k, v, false)
		case "created[gte]", "created[gt]":
			var n int64
			n, err = strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				err = fmt.Errorf("%s: %s must be unix seconds, not %q: %w", errPrefixEventsQuery, k, v, ErrQuery)
				break
			}
			if k == "created[gt]" {
				n++
			}
			if t := time.Unix(n, 0).UTC(); t.After(q.CreatedFrom) {
				q.CreatedFrom = t
			}
		case "starting_after":
			q.Cursor, err = parseCursor(k, v)
		case "limit":
			q.Limit, err = parseLimit(k, v, 100)
		default:
			err = fmt.Errorf("%s: received unknown parameter: %s: %w", errPrefixEventsQuery, k, ErrQuery)
		}
		if err != nil {
			return Query{}, err
		}
	}
	return q, nil
}

// stripeList is Stripe's list object.
type stripeList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
	URL     string            `json:"url"`
}

// EventsPage renders {"object":"list","data":[...],"has_more":..,
// "url":"/v1/events"}. Stripe lists carry no cursor: the next page is
// starting_after the last event's id, so next only sets has_more.
func (f stripeFlavour) EventsPage(evs []Event, next string) ([]byte, error) {
	data, err := rawList(evs, func(ev Event) ([]byte, error) { return f.Body(ev, "") })
	if err != nil {
		return nil, err
	}
	return json.Marshal(stripeList{Object: "list", Data: data, HasMore: next != "", URL: f.EventsPath()})
}

func (stripeFlavour) EventID(ev Event) string { return ev.ID }
