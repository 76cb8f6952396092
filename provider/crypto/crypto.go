package crypto

import (
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Header is the name of the header that carries the signature.
const Header = "BTCPay-Sig"

// prefix starts the header's value.
const prefix = "sha256="

// Config configures a Verifier.
type Config struct {
	// Secrets are the webhook secrets. Several may be given while a secret
	// is rotated; at least one is required.
	Secrets []string
	// Tolerance is ignored: BTCPay signs no timestamp. It is here so every
	// provider's Config has the same shape.
	Tolerance time.Duration
}

// Verifier verifies BTCPay-style deliveries. It is safe for concurrent use.
type Verifier struct {
	secrets []signing.Secret
}

var (
	_ payhook.Verifier      = (*Verifier)(nil)
	_ payhook.DeliveryNamer = (*Verifier)(nil)
)

// DeliveryFields returns the members BTCPay sets anew for each delivery
// of an event: deliveryId, originalDeliveryId and isRedelivery, and
// timestamp (when the delivery was made). A redelivery of an event is
// the same body but for them. The slice is shared: it must not be
// changed.
func (v *Verifier) DeliveryFields() []string { return deliveryFields }

// deliveryFields is DeliveryFields' answer, made once: NewEvent asks it
// for every delivery.
var deliveryFields = []string{"deliveryId", "originalDeliveryId", "isRedelivery", "timestamp"}

// New returns a Verifier for cfg. It returns an error wrapping
// payhook.ErrConfig when no secret is given or a secret is empty.
func New(cfg Config) (*Verifier, error) {
	secrets, err := signing.ParseSecrets(cfg.Secrets)
	if err != nil {
		return nil, fmt.Errorf("crypto: %w", err)
	}
	return &Verifier{secrets: secrets}, nil
}

// Verify checks the BTCPay-Sig header over the raw body and, when a secret
// matches, reads the event: EventID is "<invoiceId>:<type>" (stable across
// redeliveries; "<invoiceId>:<type>:<payment.id>" for the events of one
// payment, InvoiceReceivedPayment and InvoicePaymentSettled, of which an
// invoice paid in parts has several), OccurredAt the unix "timestamp". It returns an error
// wrapping payhook.ErrSignature when the header is missing or malformed or
// no secret matches, and payhook.ErrMalformed when the signed body is not
// one strict JSON object (signing.ParseObject), lacks invoiceId or type,
// has a ":" in invoiceId, or has an id, type or time that payhook cannot
// store (signing.CheckEnvelope).
func (v *Verifier) Verify(d payhook.Delivery) (payhook.Envelope, error) {
	header := strings.TrimSpace(d.Header.Get(Header))
	if header == "" {
		return payhook.Envelope{}, fmt.Errorf("crypto: missing %s header: %w", Header, payhook.ErrSignature)
	}
	hexSig, ok := strings.CutPrefix(header, prefix)
	if !ok {
		return payhook.Envelope{}, fmt.Errorf("crypto: %s header %q does not start with %s: %w",
			Header, signing.Abbrev(header), prefix, payhook.ErrSignature)
	}
	sig, err := signing.DecodeHex(hexSig)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("crypto: %s: %w", Header, err)
	}
	secret, ok := signing.MatchHMAC(v.secrets, d.Body, [][]byte{sig})
	if !ok {
		return payhook.Envelope{}, fmt.Errorf("crypto: %s signature does not match: %w", Header, payhook.ErrSignature)
	}
	env, err := envelope(d.Body)
	if err != nil {
		return payhook.Envelope{}, fmt.Errorf("crypto: %w", err)
	}
	env.SecretID = secret.ID
	if err := signing.CheckEnvelope(env); err != nil {
		return payhook.Envelope{}, fmt.Errorf("crypto: %w", err)
	}
	return env, nil
}

// paymentEvents are BTCPay's event types about one payment of an invoice,
// which may have several: their event id names the payment too.
var paymentEvents = map[string]bool{"InvoiceReceivedPayment": true, "InvoicePaymentSettled": true}

// envelope reads a verified BTCPay event.
func envelope(body []byte) (payhook.Envelope, error) {
	o, err := signing.ParseObject(body)
	if err != nil {
		return payhook.Envelope{}, err
	}
	invoice, err := o.RequiredString("invoiceId")
	if err != nil {
		return payhook.Envelope{}, err
	}
	// The id joins invoice and type with ":", so a ":" in the invoice
	// would let two different pairs share one dedup key.
	if strings.Contains(invoice, ":") {
		return payhook.Envelope{}, fmt.Errorf("field \"invoiceId\" %q holds a \":\": %w", signing.Abbrev(invoice), payhook.ErrMalformed)
	}
	var env payhook.Envelope
	if env.Type, err = o.RequiredString("type"); err != nil {
		return payhook.Envelope{}, err
	}
	env.EventID = invoice + ":" + env.Type
	if paymentEvents[env.Type] {
		// An invoice paid in parts tells each payment: one event each.
		// A payment object payhook cannot read leaves the invoice's id.
		if pay, err := o.Object("payment"); err == nil {
			if id, err := pay.String("id"); err == nil && id != "" {
				env.EventID += ":" + id
			}
		}
	}
	if env.OccurredAt, err = o.UnixTime("timestamp"); err != nil {
		return payhook.Envelope{}, err
	}
	return env, nil
}
