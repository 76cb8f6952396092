// Package crypto verifies BTCPay-Server-style webhook deliveries of
// cryptocurrency invoices.
//
// Each delivery carries the header
//
//	BTCPay-Sig: sha256=<hex>
//
// the HMAC-SHA256 of the raw body keyed by the bytes of the webhook's
// secret. No timestamp is signed, so there is no tolerance window: replays
// are stopped by the event id instead. A redelivery gets a new deliveryId,
// but an invoice settles once and is final, so the event id is
// "<invoiceId>:<type>", for instance "Inv42:InvoiceSettled"; storing it
// once is what prevents a double credit. The events of one payment
// (InvoiceReceivedPayment, InvoicePaymentSettled: an invoice paid in
// parts has several) add the payment's id: "Inv42:InvoiceReceivedPayment:
// <payment.id>".
package crypto
