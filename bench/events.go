package bench

import (
	"bytes"
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

// newEvents returns the generator of provider's deliveries signed with
// secret: completed checkouts of 19.99 USD, each with its own order and
// payment, created at created.
func newEvents(provider, secret string, created time.Time) (*events, error) {
	if secret == "" {
		return nil, fmt.Errorf("bench: a signing secret is required")
	}
	tok := string(token)
	data := map[string]any{
		"id": "chk_" + tok, "object": "checkout", "amount": 1999, "currency": "USD", "status": "completed",
		"payment_id": "pay_" + tok, "metadata": map[string]any{"order_id": "ord_" + tok},
		"created_at": created.UTC().Format(time.RFC3339), "updated_at": created.UTC().Format(time.RFC3339Nano),
	}
	e := &events{provider: provider, secret: secret}
	var err error
	switch provider {
	case "standard":
		e.template, err = json.Marshal(map[string]any{
			"type": flavour.CheckoutCompleted, "timestamp": created.UTC().Format(time.RFC3339), "data": data,
		})
	case "stripe", "paddle", "billete":
		if e.fl, err = flavour.ByName(provider); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.template, err = e.fl.Body(flavour.Event{
			ID: "evt_" + tok, Type: flavour.CheckoutCompleted, CreatedAt: created,
			Environment: "test", APIVersion: "2026-01-01", ObjectID: "chk_" + tok, Data: data,
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
