package flavour

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// cryptoFlavour delivers BTCPay-Server-style invoice webhooks.
type cryptoFlavour struct {
	webhookID string
}

// Crypto returns the BTCPay-style flavour: payloads {"deliveryId",
// "webhookId","originalDeliveryId","isRedelivery","type","timestamp",
// "storeId","invoiceId","metadata",...} signed with BTCPay-Sig:
// sha256=<hex> (HMAC-SHA256 of the body, no timestamp). payhook's event id
// is "<invoiceId>:<type>". BTCPay has no events list; the sim offers the
// billete-style GET /events so that dropped events can be found again.
// Each call returns a flavour with its own webhookId.
func Crypto() Flavour { return cryptoFlavour{webhookID: randomString(rand.Reader, 22, alnum)} }

// cryptoStore is the storeId of every payload.
const cryptoStore = "store_sim"

// cryptoTypes maps neutral types to BTCPay's: invoice.settled is
// InvoiceSettled; the others have no BTCPay counterpart and become the
// CamelCase of the neutral name (PaymentRefunded, SubscriptionEnded...).
var cryptoTypes = typeMap{
	to:       map[string]string{InvoiceSettled: "InvoiceSettled"},
	fallback: camel,
}

// camel returns "payment.charged_back" as "PaymentChargedBack".
func camel(t string) string {
	var b strings.Builder
	for w := range strings.FieldsFuncSeq(t, func(r rune) bool { return r == '.' || r == '_' }) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

func (cryptoFlavour) Name() string     { return "crypto" }
func (cryptoFlavour) Provider() string { return "crypto" }

// NewSecret returns 32 random letters and digits.
func (f cryptoFlavour) NewSecret() string { return f.NewSecretFrom(rand.Reader) }

// NewSecretFrom is NewSecret drawing from r.
func (cryptoFlavour) NewSecretFrom(r io.Reader) string { return randomString(r, 32, alnum) }

// invoiceID is the invoiceId of ev's payload: the invoice for invoice
// events, so that a settlement is stored once per invoice however often it
// is delivered; for the other events, which BTCPay does not have, the
// event id, so that two events about one object (two updates of a
// subscription) stay two events.
func invoiceID(ev Event) string {
	if strings.HasPrefix(ev.Type, "invoice.") {
		return ev.ObjectID
	}
	return ev.ID
}

// Body renders the payload. deliveryId and originalDeliveryId are
// deliveryID (the sim's resends keep the delivery id, so isRedelivery is
// false); in the events list, where deliveryID is "", they are the event
// id, which is also the list's cursor.
func (f cryptoFlavour) Body(ev Event, deliveryID string) ([]byte, error) {
	if deliveryID == "" {
		deliveryID = ev.ID
	}
	d := ev.Data
	p := map[string]any{
		"deliveryId":         deliveryID,
		"webhookId":          f.webhookID,
		"originalDeliveryId": deliveryID,
		"isRedelivery":       false,
		"type":               cryptoTypes.name(ev.Type),
		"timestamp":          ev.CreatedAt.Unix(),
		"storeId":            cryptoStore,
		"invoiceId":          invoiceID(ev),
	}
	meta := map[string]any{}
	if v, ok := d["order_id"]; ok {
		meta["orderId"] = v
	}
	p["metadata"] = meta
	if ev.Type == InvoiceSettled {
		p["manuallyMarked"] = false
		p["overPaid"] = false
		p["paymentMethod"] = "BTC-CHAIN"
		if v, ok := d["payment_method"]; ok {
			p["paymentMethod"] = v
		}
		for from, to := range map[string]string{"chain_ref": "chainRef", "amount": "amount", "currency": "currency", "status": "status"} {
			if v, ok := d[from]; ok {
				p[to] = v
			}
		}
	} else {
		// Not a BTCPay event: the object and its state ride along.
		p["objectId"] = ev.ObjectID
		p["data"] = clone(d)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("crypto: render %s: %w", ev.ID, err)
	}
	return b, nil
}

// Sign returns BTCPay-Sig: sha256=<hex>. BTCPay signs with one secret, so
// during a rotation only the first (current) secret signs.
func (cryptoFlavour) Sign(secrets []string, _ Event, _ string, body []byte, _ time.Time) (http.Header, error) {
	if err := checkSecrets("crypto", secrets); err != nil {
		return nil, err
	}
	h := baseHeader("BTCPayServer")
	h.Set("BTCPay-Sig", "sha256="+hmacHex(secrets[0], body))
	return h, nil
}

func (cryptoFlavour) EventsPath() string { return "/events" }

// EventsQuery reads the billete-style query (type, created_from, cursor,
// limit); type takes the BTCPay names (InvoiceSettled) or neutral ones.
func (cryptoFlavour) EventsQuery(r *http.Request) (Query, error) {
	return listQuery(r, cryptoTypes, true)
}

// EventsPage renders the billete-style page of BTCPay payloads.
func (f cryptoFlavour) EventsPage(evs []Event, next string) ([]byte, error) {
	return renderList(evs, next, func(ev Event) ([]byte, error) { return f.Body(ev, "") })
}

// EventID returns "<invoiceId>:<type>", as payhook's crypto verifier does.
func (cryptoFlavour) EventID(ev Event) string {
	return invoiceID(ev) + ":" + cryptoTypes.name(ev.Type)
}
