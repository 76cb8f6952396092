package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/sim/flavour"
)

// Providers lists the providers whose deliveries the generator signs.
func Providers() []string { return []string{"stripe", "paddle", "standard", "billete"} }

// Kinds lists the events the generator sends, by their neutral type (as
// the simulator names them): a completed checkout (Stripe
// checkout.session.completed), the default, or a succeeded payment
// (Stripe payment_intent.succeeded, status succeeded). payhook's billing
// turns either into a captured payment of an order paid. The second is
// what stripe-sync-engine stores from the payload alone, where a
// checkout.session.completed makes it call Stripe's API for the
// session's line items.
func Kinds() []string { return []string{flavour.CheckoutCompleted, flavour.PaymentSucceeded} }

// idLen is the length of the part after "evt_" of every event id: a run
// prefix then the event's number, zero-padded.
const idLen = 24

// token stands for the id part in a rendered body; every occurrence is
// replaced, so the event id and the ids of its checkout, payment and
// order all differ from event to event.
var token = []byte(strings.Repeat("Z", idLen))

// events renders and signs the deliveries of one provider. A body is
// rendered once as a template; each event copies it with its own id, and
// is signed when it is sent.
type events struct {
	provider string
	secret   string
	template []byte
	fl       flavour.Flavour // nil for standard
}

// newEvents returns the generator of provider's deliveries of kind (one
// of Kinds; "" is the first) signed with secret: completed checkouts or
// succeeded payments of 19.99 USD, each with its own order and payment,
// created at created.
func newEvents(provider, kind, secret string, created time.Time) (*events, error) {
	if secret == "" {
		return nil, fmt.Errorf("bench: a signing secret is required")
	}
	tok := string(token)
	kind = cmp.Or(kind, flavour.CheckoutCompleted)
	var data map[string]any
	objectID := ""
	switch kind {
	case flavour.CheckoutCompleted:
		objectID = "chk_" + tok
		data = map[string]any{
			"id": objectID, "object": "checkout", "amount": 1999, "currency": "USD", "status": "completed",
			"payment_id": "pay_" + tok, "metadata": map[string]any{"order_id": "ord_" + tok},
			"created_at": created.UTC().Format(time.RFC3339), "updated_at": created.UTC().Format(time.RFC3339Nano),
		}
	case flavour.PaymentSucceeded:
		objectID = "pay_" + tok
		data = map[string]any{
			"id": objectID, "object": "payment", "amount": 1999, "currency": "USD", "status": "succeeded",
			"order_id": "ord_" + tok, "metadata": map[string]any{"order_id": "ord_" + tok},
			"created_at": created.UTC().Format(time.RFC3339), "updated_at": created.UTC().Format(time.RFC3339Nano),
		}
	default:
		return nil, fmt.Errorf("bench: unknown event kind %q (want one of %s)", kind, strings.Join(Kinds(), ", "))
	}
	e := &events{provider: provider, secret: secret}
	var err error
	switch provider {
	case "standard":
		e.template, err = json.Marshal(map[string]any{
			"type": kind, "timestamp": created.UTC().Format(time.RFC3339), "data": data,
		})
	case "stripe", "paddle", "billete":
		if e.fl, err = flavour.ByName(provider); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.template, err = e.fl.Body(flavour.Event{
			ID: "evt_" + tok, Type: kind, CreatedAt: created,
			Environment: "test", APIVersion: "2026-01-01", ObjectID: objectID, Data: data,
		}, "")
	default:
		return nil, fmt.Errorf("bench: unknown provider %q (want one of %s)", provider, strings.Join(Providers(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("bench: render a %s event: %w", provider, err)
	}
	return e, nil
}

// eventID returns the id of event n of a run: "evt_" + prefix + n,
// idLen characters after "evt_".
func eventID(prefix string, n int) string {
	return fmt.Sprintf("evt_%s%0*d", prefix, idLen-len(prefix), n)
}

// body returns the body of the event with id.
func (e *events) body(id string) []byte {
	return bytes.ReplaceAll(e.template, token, []byte(id[len("evt_"):]))
}

// sign returns the headers of a delivery of the event with id and body,
// signed at at.
func (e *events) sign(id string, body []byte, at time.Time) (http.Header, error) {
	if e.fl == nil {
		h, err := standard.Sign(e.secret, id, at, body)
		if err != nil {
			return nil, fmt.Errorf("bench: sign: %w", err)
		}
		h.Set("Content-Type", "application/json")
		return h, nil
	}
	h, err := e.fl.Sign([]string{e.secret}, flavour.Event{ID: id}, "", body, at)
	if err != nil {
		return nil, fmt.Errorf("bench: sign: %w", err)
	}
	return h, nil
}

// NewSecret returns a fresh signing secret in provider's format.
func NewSecret(provider string) (string, error) {
	if provider == "standard" {
		provider = "billete" // the same whsec_ secrets
	}
	fl, err := flavour.ByName(provider)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return fl.NewSecret(), nil
}
