package mapping

import (
	"github.com/payhook/payhook/billing"
)

// crypto maps BTCPay-style payloads: flat, the invoice in invoiceId, the
// order in metadata.orderId. Only InvoiceSettled means something for
// billing; BTCPay's other types (InvoiceCreated, InvoiceProcessing,
// InvoiceExpired...) and the simulator's non-invoice ones give nil.
func crypto(e *event) ([]billing.Fact, error) {
	if e.typ != "InvoiceSettled" {
		return ignore("%s events change no billing state: only InvoiceSettled credits", e.typ)
	}
	o := e.root
	inv, err := o.need("invoiceId")
	if err != nil {
		return nil, err
	}
	meta, err := o.child("metadata")
	if err != nil {
		return nil, err
	}
	order, err := meta.str("orderId")
	if err != nil {
		return nil, err
	}
	chain, err := o.need("chainRef")
	if err != nil {
		return nil, err
	}
	// timestamp is the envelope's time, already in e.at.
	return settled(o, inv, order, chain, "amount", "currency", e.at)
}
