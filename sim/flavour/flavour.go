// Package flavour makes the simulated provider look like a real one: each
// Flavour renders events as that provider's webhook payloads, signs them
// the way it does, and shapes its events API pages. Every delivery is
// accepted by the payhook verifier named by Provider.
//
// There are four: Stripe, Paddle, Billete and Crypto (ByName, Names).
//
//	flavour  signature header                       events API                                    event id
//	stripe   Stripe-Signature: t=..,v1=..[,v1=..]   GET /v1/events type created[gte]|created[gt]   ev.ID
//	                                                 starting_after limit(1-100)
//	paddle   Paddle-Signature: ts=..;h1=..[;h1=..]  GET /events event_type after per_page(1-200)   ev.ID
//	                                                 occurred_at[gte]|created_from
//	billete  webhook-id/-timestamp/-signature (v1)  GET /events type created_from cursor           ev.ID
//	                                                 limit(1-1000)
//	crypto   BTCPay-Sig: sha256=..                  GET /events as billete (BTCPay has none)      invoiceId:type
//
// Stripe also serves GET /v1/subscriptions/{id} (Retriever): the
// subscription's current state as its events render it, plus the sim's
// updated_at_ns.
//
// Billete, Stripe and Paddle list recent objects for reconciliation
// (Lister): billete GET /payments, /refunds, /subscriptions; Stripe
// /v1/charges, /v1/refunds, /v1/disputes, /v1/subscriptions; Paddle
// /transactions (created_at[GTE]), /adjustments (action refund or
// chargeback) and /subscriptions, by after and per_page, newest first on
// order_by=id[DESC].
//
// Stripe, Paddle and billete sign with every secret given (a rotation);
// BTCPay signs with one secret only, so crypto signs with the first.
//
// # Event types
//
// The neutral types (Types) translate as follows. Where one provider type
// stands for several neutral ones, EventsQuery turns it into a
// comma-separated Query.Type list; filter with Query.Match (or Select).
//
//	neutral                 stripe                          paddle                              crypto
//	checkout.completed      checkout.session.completed      transaction.completed               CheckoutCompleted
//	payment.succeeded       payment_intent.succeeded        transaction.paid                    PaymentSucceeded
//	payment.refunded        charge.refunded                 adjustment.created (action refund)  PaymentRefunded
//	refund.failed           charge.refund.updated (failed)  adjustment.updated (rejected)       RefundFailed
//	payment.charged_back    charge.dispute.created          adjustment.created (chargeback)     PaymentChargedBack
//	payment.chargeback_won  charge.dispute.closed (won)     adjustment.created                  PaymentChargebackWon
//	                                                        (chargeback_reverse)
//	subscription.created    customer.subscription.created   subscription.created                SubscriptionCreated
//	subscription.updated    customer.subscription.updated   subscription.updated                SubscriptionUpdated
//	subscription.renewed    customer.subscription.updated   subscription.updated                SubscriptionRenewed
//	subscription.canceled   customer.subscription.updated   subscription.updated                SubscriptionCanceled
//	                        (cancel_at_period_end true)     (scheduled_change action cancel)
//	subscription.ended      customer.subscription.deleted   subscription.canceled               SubscriptionEnded
//	invoice.settled         invoice.paid                    transaction.completed               InvoiceSettled
//	webhook_endpoint.test   ping                            notification.test                   WebhookEndpointTest
//
// Stripe and Paddle have no test event of their own (their dashboards
// resend real types); the sim's are "ping" and "notification.test".
// Billete uses the neutral names as they are.
//
// # Payloads
//
// Stripe puts the object in data.object with "object" set (checkout.session,
// payment_intent, charge with refunds, refund, dispute, subscription with
// plan/items and unix times, invoice, webhook_endpoint). A dispute's id is
// the payment's dispute_id (else "dp_" + the payment id), its
// payment_intent the payment; charge.dispute.closed carries status "won"
// (Stripe also sends charge.dispute.funds_reinstated on a win; the sim
// sends one event per neutral event, so only the closed one). Paddle puts the
// entity in data with currency_code, custom_data (the metadata, or
// {order_id}), amounts as strings of minor units, refunds and chargebacks
// as adjustments of the payment's transaction (a chargeback's is
// "adj_cb_" + the payment id; a won dispute is, as Paddle reports it, a
// new adjustment "adj_cbr_" + the payment id with action
// chargeback_reverse, status approved and the payment's amount; the
// adjustment.updated that marks the chargeback's adjustment reversed is
// not emitted), and notification_id
// "ntf_<deliveryID>". Crypto payloads carry deliveryId (= deliveryID),
// webhookId (fixed per flavour), originalDeliveryId (= deliveryId),
// isRedelivery false, unix timestamp, storeId "store_sim", metadata.orderId
// and, for invoice.settled, chainRef, paymentMethod, amount and currency.
// Crypto's invoiceId is the invoice (ObjectID) for invoice events, so a
// settlement is stored once per invoice; the other events, which BTCPay
// does not have, use their event id as invoiceId (and carry objectId and
// data), so that two events about one object are not merged.
//
// Every Sign also sets Content-Type (application/json) and a User-Agent
// like the provider's.
package flavour

import (
	"io"
	"net/http"
	"time"
)

// Event is one event of the simulated provider, in payhook sim's neutral
// vocabulary (the recipe's provider, "billete"):
//
//	checkout.completed         data: the checkout (id, amount, currency, status, metadata.order_id, payment_id)
//	payment.succeeded          data: the payment (id, amount, currency, status, refunded_amount, order_id, checkout_id)
//	payment.refunded           data: the payment after the refund, plus data.refund (id, amount, status)
//	refund.failed              data: the refund (id, payment_id, amount, status "failed", reason)
//	payment.charged_back       data: the payment (status "charged_back", dispute_id, charged_back_at)
//	payment.chargeback_won     data: the payment back to succeeded or partially_refunded, with the
//	                           dispute_id and charged_back_at of its chargeback
//	subscription.created|updated|renewed|canceled|ended
//	                           data: the subscription (id, customer, plan, status, current_period_end, updated_at)
//	invoice.settled            data: the crypto invoice (id, amount, currency, order_id, chain_ref, status "settled")
//	webhook_endpoint.test      data: {endpoint_id}
//
// Amounts are integer minor units. Data holds the resource's state at the
// moment of the event, as JSON-ready values.
type Event struct {
	// ID is unique per event ("evt_" + 24 chars); every retry of the event
	// carries it.
	ID string
	// Type is the neutral type above; flavours translate it.
	Type string
	// CreatedAt is when the provider created the event.
	CreatedAt time.Time
	// Environment is "test" or "live".
	Environment string
	// APIVersion is the version the event is shaped for.
	APIVersion string
	// ObjectID is the id of the resource the event is about.
	ObjectID string
	// Data is the resource's state.
	Data map[string]any
	// Seq orders events by creation, from 1; the events API is stable in it.
	Seq int64
}

// Flavour is one provider's way of delivering and listing events.
type Flavour interface {
	// Name is the flavour's name: "stripe", "paddle", "billete" or "crypto".
	Name() string
	// Provider is the payhook provider that verifies this flavour's
	// deliveries (the provider: key of payhook's config).
	Provider() string
	// NewSecret returns a fresh signing secret in the provider's format,
	// drawn from crypto/rand: NewSecretFrom(rand.Reader).
	NewSecret() string
	// NewSecretFrom is NewSecret drawing its random bytes from r: a
	// simulation passes a source seeded by its run so that a seed replays
	// the same secrets.
	NewSecretFrom(r io.Reader) string
	// Body renders ev as the provider's webhook payload. deliveryID is
	// unique per delivery attempt (BTCPay puts it in the body).
	Body(ev Event, deliveryID string) ([]byte, error)
	// Sign returns the headers that authenticate body, signed at time at
	// with every secret in secrets (several during a rotation).
	Sign(secrets []string, ev Event, deliveryID string, body []byte, at time.Time) (http.Header, error)
	// EventsPath is the path of the provider's events-list API, such as
	// "/v1/events" (Stripe) or "/events".
	EventsPath() string
	// EventsQuery reads the events-list query parameters of r in the
	// provider's names (Stripe: type, created[gte], starting_after, limit;
	// Paddle: event_type, occurred_at[gte]... after, per_page; billete and
	// crypto: type, created_from, cursor, limit). It returns an error for a
	// malformed parameter.
	EventsQuery(r *http.Request) (Query, error)
	// EventsPage renders one page of the events list: the events (oldest
	// first) and the cursor of the next page ("" when this is the last).
	EventsPage(evs []Event, next string) ([]byte, error)
	// EventID returns the id payhook stores for ev as delivered by this
	// flavour (e.g. invoice id + ":" + type for crypto), so a test can
	// match payhook's events to the provider's.
	EventID(ev Event) string
}

// Retriever is implemented by flavours whose API also serves resources in
// the provider's own shape, as integrations retrieve them to act on their
// current state (Stripe: GET /v1/subscriptions/{id}). The sim's API adds
// these routes when its flavour has them.
type Retriever interface {
	// SubscriptionPath is the route of one subscription, with an {id}
	// wildcard, e.g. "/v1/subscriptions/{id}".
	SubscriptionPath() string
	// Subscription renders a subscription's current state as the API
	// returns it. ev is that state as the event of its last change would
	// carry it: Type subscription.updated (active), subscription.canceled
	// or subscription.ended by its status, Data its data, CreatedAt when
	// it last changed (its updated_at, to the nanosecond).
	Subscription(ev Event) ([]byte, error)
}

// Query selects a page of the events list.
type Query struct {
	// Type, if set, keeps only events of this neutral type, or of any
	// type of a comma-separated list of neutral types (what a provider
	// type covering several neutral ones parses to). Use Match.
	Type string
	// CreatedFrom, if set, keeps only events created at or after it.
	CreatedFrom time.Time
	// Cursor is the ID of the last event of the previous page; the page
	// starts after it. Empty: from the first event.
	Cursor string
	// Limit is the page size; 0 means 100, at most 1000.
	Limit int
	// Charge, if set, keeps only the objects of this payment (a refund's
	// payment_id: Stripe's charge filter on its refunds list).
	Charge string
	// Expand are the expansions asked of each listed object (Stripe's
	// expand[] on its refunds list: "data.charge", "data.charge.refunds"):
	// each refund's Data then holds "payment", its payment's data, with
	// "refunds" for data.charge.refunds.
	Expand []string
	// Descending lists newest first (Paddle's order_by=id[DESC]); the
	// cursor is then the newest of what is left. Only object lists
	// (Lister) honour it.
	Descending bool
}
