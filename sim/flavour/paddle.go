package flavour

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// paddleFlavour delivers Paddle Billing notifications.
type paddleFlavour struct{}

// Paddle returns the Paddle Billing flavour: notifications {"event_id",
// "event_type","occurred_at","notification_id","data"} with Paddle's type
// names and entities, the Paddle-Signature header (ts=<unix>;h1=<hex> per
// secret, HMAC-SHA256 of "ts:body") and GET /events?event_type=&after=
// &per_page= (plus occurred_at[gte] or created_from, which Paddle lacks).
func Paddle() Flavour { return paddleFlavour{} }

// paddleTypes maps neutral types to Paddle's (see the package doc).
var paddleTypes = typeMap{to: map[string]string{
	CheckoutCompleted:    "transaction.completed",
	PaymentSucceeded:     "transaction.paid",
	PaymentRefunded:      "adjustment.created",
	RefundFailed:         "adjustment.updated",
	PaymentChargedBack:   "adjustment.created",
	ChargebackWon:        "adjustment.created",
	SubscriptionCreated:  "subscription.created",
	SubscriptionUpdated:  "subscription.updated",
	SubscriptionRenewed:  "subscription.updated",
	SubscriptionCanceled: "subscription.updated",
	SubscriptionEnded:    "subscription.canceled",
	InvoiceSettled:       "transaction.completed",
	WebhookEndpointTest:  "notification.test",
}}

func (paddleFlavour) Name() string     { return "paddle" }
func (paddleFlavour) Provider() string { return "paddle" }

// NewSecret returns "pdl_ntfset_" + 26 random lower-case letters and
// digits + "_" + 32 random letters and digits, shaped like Paddle's
// notification-setting secret keys.
func (f paddleFlavour) NewSecret() string { return f.NewSecretFrom(rand.Reader) }

// NewSecretFrom is NewSecret drawing from r.
func (paddleFlavour) NewSecretFrom(r io.Reader) string {
	return "pdl_ntfset_" + randomString(r, 26, lowerAlnum) + "_" + randomString(r, 32, alnum)
}

// paddleEvent is Paddle's notification payload.
type paddleEvent struct {
	EventID        string         `json:"event_id"`
	EventType      string         `json:"event_type"`
	OccurredAt     string         `json:"occurred_at"`
	NotificationID string         `json:"notification_id,omitempty"`
	Data           map[string]any `json:"data"`
}

// Body renders the notification; notification_id is "ntf_" + deliveryID
// (absent in the events list, where deliveryID is "").
func (paddleFlavour) Body(ev Event, deliveryID string) ([]byte, error) {
	e := paddleEvent{
		EventID: ev.ID, EventType: paddleTypes.name(ev.Type),
		OccurredAt: ev.CreatedAt.UTC().Format(time.RFC3339Nano),
		Data:       paddleEntity(ev),
	}
	if deliveryID != "" {
		e.NotificationID = "ntf_" + deliveryID
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("paddle: render %s: %w", ev.ID, err)
	}
	return b, nil
}

// paddleEntity shapes ev.Data as the Paddle entity the event is about.
// Amounts become strings of minor units, as Paddle writes them; metadata
// becomes custom_data.
func paddleEntity(ev Event) map[string]any {
	d := ev.Data
	o := clone(d)
	rename(o, "currency", "currency_code")
	rename(o, "metadata", "custom_data")
	if _, ok := o["custom_data"]; !ok {
		if id, ok := d["order_id"]; ok {
			o["custom_data"] = map[string]any{"order_id": id}
		}
	}
	totals := func(amount any) map[string]any {
		return map[string]any{"totals": map[string]any{"total": amountString(amount), "currency_code": d["currency"]}}
	}
	switch ev.Type {
	case CheckoutCompleted, PaymentSucceeded, InvoiceSettled:
		o["status"] = "completed"
		if ev.Type == PaymentSucceeded {
			o["status"] = "paid"
		}
		o["origin"] = "web"
		o["details"] = totals(d["amount"])
		delete(o, "amount")
	case PaymentRefunded, PaymentChargedBack, ChargebackWon:
		// An adjustment of the payment's transaction.
		o = map[string]any{
			"custom_data":    o["custom_data"],
			"transaction_id": d["id"],
			"currency_code":  d["currency"],
			"status":         "approved",
			"payment_status": d["status"],
			"created_at":     ev.CreatedAt.UTC().Format(time.RFC3339Nano),
		}
		if ev.Type == PaymentRefunded {
			r := sub(d, "refund")
			o["action"] = "refund"
			o["id"] = "adj_" + str(r, "id")
			o["refund_id"] = r["id"]
			o["totals"] = map[string]any{"total": amountString(r["amount"]), "currency_code": d["currency"]}
			o["refunded_amount"] = amountString(d["refunded_amount"])
			if s := str(r, "status"); s == "failed" {
				o["status"] = "rejected"
			}
		} else if ev.Type == PaymentChargedBack {
			// One chargeback per payment.
			o["action"] = "chargeback"
			o["id"] = "adj_cb_" + str(d, "id")
			o["totals"] = map[string]any{"total": amountString(d["amount"]), "currency_code": d["currency"]}
		} else {
			// A won dispute, as Paddle reports it: an adjustment of its own
			// (action chargeback_reverse) that gives the money back. It does
			// not name the chargeback's adjustment (Paddle marks that one
			// reversed with an adjustment.updated the sim does not send).
			o["action"] = "chargeback_reverse"
			o["id"] = "adj_cbr_" + str(d, "id")
			o["totals"] = map[string]any{"total": amountString(d["amount"]), "currency_code": d["currency"]}
		}
	case RefundFailed:
		o = map[string]any{
			"id":             "adj_" + str(d, "id"),
			"action":         "refund",
			"transaction_id": d["payment_id"],
			"refund_id":      d["id"],
			"status":         "rejected",
			"reason":         d["reason"],
			"totals":         map[string]any{"total": amountString(d["amount"]), "currency_code": d["currency"]},
			"updated_at":     ev.CreatedAt.UTC().Format(time.RFC3339Nano),
			"custom_data":    o["custom_data"],
		}
	case SubscriptionCreated, SubscriptionUpdated, SubscriptionRenewed, SubscriptionCanceled, SubscriptionEnded:
		rename(o, "customer", "customer_id")
		if p, ok := d["plan"]; ok {
			o["items"] = []any{map[string]any{"status": "active", "quantity": 1, "price": map[string]any{"id": p}}}
		}
		if v, ok := d["current_period_end"]; ok {
			delete(o, "current_period_end")
			o["current_billing_period"] = map[string]any{"ends_at": rfc3339(v)}
			o["next_billed_at"] = rfc3339(v)
		}
		if v, ok := d["updated_at"]; ok {
			o["updated_at"] = rfc3339(v)
		}
		o["scheduled_change"] = nil
		switch ev.Type {
		case SubscriptionCanceled:
			o["scheduled_change"] = map[string]any{"action": "cancel", "effective_at": rfc3339(d["current_period_end"])}
			o["next_billed_at"] = nil
		case SubscriptionEnded:
			o["status"] = "canceled"
			o["canceled_at"] = ev.CreatedAt.UTC().Format(time.RFC3339Nano)
			o["next_billed_at"] = nil
		}
	}
	return o
}

// Sign returns Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...], one h1
// per secret.
func (paddleFlavour) Sign(secrets []string, _ Event, _ string, body []byte, at time.Time) (http.Header, error) {
	if err := checkSecrets("paddle", secrets); err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	parts := []string{"ts=" + ts}
	for _, s := range secrets {
		parts = append(parts, "h1="+hmacHex(s, []byte(ts), []byte(":"), body))
	}
	h := baseHeader("Paddle")
	h.Set("Paddle-Signature", strings.Join(parts, ";"))
	return h, nil
}

func (paddleFlavour) EventsPath() string { return "/events" }

// EventsQuery reads event_type (Paddle type names, comma-separated), after
// (an event id), per_page (1 to 200) and occurred_at[gte] or its alias
// created_from (RFC 3339). Other parameters are ignored.
func (paddleFlavour) EventsQuery(r *http.Request) (Query, error) {
	p, err := params(r)
	if err != nil {
		return Query{}, err
	}
	var q Query
	if v, ok := p["event_type"]; ok {
		if q.Type, err = paddleTypes.parseTypes("event_type", v, false); err != nil {
			return Query{}, err
		}
	}
	for _, k := range []string{"occurred_at[gte]", "created_from"} {
		if v, ok := p[k]; ok {
			t, err := parseRFC3339(k, v)
			if err != nil {
				return Query{}, err
			}
			if t.After(q.CreatedFrom) {
				q.CreatedFrom = t
			}
		}
	}
	if v, ok := p["after"]; ok {
		if q.Cursor, err = parseCursor("after", v); err != nil {
			return Query{}, err
		}
	}
	if v, ok := p["per_page"]; ok {
		if q.Limit, err = parseLimit("per_page", v, 200); err != nil {
			return Query{}, err
		}
	}
	return q, nil
}

// paddleList is Paddle's list response.
type paddleList struct {
	Data []json.RawMessage `json:"data"`
	Meta paddleMeta        `json:"meta"`
}

type paddleMeta struct {
	RequestID  string           `json:"request_id"`
	Pagination paddlePagination `json:"pagination"`
}

type paddlePagination struct {
	PerPage int    `json:"per_page"`
	Next    string `json:"next"`
	HasMore bool   `json:"has_more"`
}

// EventsPage renders {"data":[...],"meta":{"request_id":..,"pagination":
// {"per_page":N,"next":"/events?after=evt_..","has_more":bool}}}. As
// Paddle does, next is set on the last page too (after its last event, so
// a poller can come back for newer events); it carries only after, so a
// client following it adds its own filters. per_page is the page's length
// (the sim does not pass the requested size along).
func (f paddleFlavour) EventsPage(evs []Event, next string) ([]byte, error) {
	data, err := rawList(evs, func(ev Event) ([]byte, error) { return f.Body(ev, "") })
	if err != nil {
		return nil, err
	}
	cursor := next
	if cursor == "" && len(evs) > 0 {
		cursor = evs[len(evs)-1].ID
	}
	var nextURL string
	if cursor != "" {
		nextURL = f.EventsPath() + "?" + url.Values{"after": {cursor}}.Encode()
	}
	return json.Marshal(paddleList{Data: data, Meta: paddleMeta{
		RequestID:  paddleRequestID(),
		Pagination: paddlePagination{PerPage: len(evs), Next: nextURL, HasMore: next != ""},
	}})
}

func (paddleFlavour) EventID(ev Event) string { return ev.ID }
