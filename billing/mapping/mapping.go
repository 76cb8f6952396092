// Package mapping reads a stored provider event and says, in payhook's own
// terms (the facts of package billing), what it means for billing.
//
// Facts is the one entry point. Its contract:
//
//   - (facts, nil) with at least one fact: apply the facts, in order, inside
//     the transaction that marks the event processed.
//   - (nil, nil): the event means nothing for billing (an unknown type, a
//     test event, a provider without a business vocabulary, a state that
//     moves no money yet such as a refund awaiting approval). The caller
//     stores it as ignored; it is never an error, so the provider is never
//     asked to retry it. Read says why (Result.Ignored).
//   - (nil, err): the payload is not one strict JSON object (read with
//     signing.Object, the envelope's reader: no duplicate names, invalid
//     UTF-8 or lone surrogates, nothing after it; a field read must not
//     appear also under a name differing only in case), lacks what a fact
//     needs, or holds something unreadable (an amount that is not an integer of minor units, a time
//     that is neither RFC 3339 nor unix seconds, an unknown subscription
//     status), or a value payhook cannot store: a reference with NUL or
//     another control or format character (payhook.CheckRef), a time
//     outside payhook.MinTime–MaxTime, an amount with a sign (even "-0")
//     or beyond payhook.MaxAmount. err wraps payhook.ErrMalformed and
//     names the field, e.g. `field "data.refund.id" is missing`. An
//     unknown provider name wraps payhook.ErrConfig.
//
// Facts only reads the payload: it never calls a provider's API and never
// looks at stored state, so the same payload always gives the same facts.
// When the source has API credentials, processing puts the object as the
// provider's API returns it now in place of the event's (billing/process),
// so the statuses below are read as they are now: a dispute won since its
// event, a refund failed since, a subscription canceled since. Each
// movement is applied once per provider reference and a subscription's
// state only when newer, so an old event whose object is newer never
// undoes what a newer event did.
// Times come from the payload (the resource's own time where it has one,
// else the event's envelope time) and fall back to Event.OccurredAt. They
// are UTC. Amounts are integers of minor units (Paddle writes them as
// strings of digits, the others as JSON integers); currencies are
// upper-cased.
//
// # billete (the simulator's provider, neutral vocabulary)
//
//	checkout.completed     Captured{data.payment_id, metadata.order_id, amount, currency, at updated_at}
//	                       + OrderPaid{metadata.order_id, data.payment_id} (when the order id is there)
//	payment.succeeded      Captured{data.id, order_id, amount, currency, at created_at}
//	                       + OrderPaid{order_id, data.id} (when order_id is there)
//	payment.refunded       Refunded{Payment: snapshot of data, data.id, refund.id, refund.amount, at refund.created_at};
//	                       refund.status failed (the refund as fetched now): RefundFailed
//	refund.failed          RefundFailed{data.payment_id, data.id, at updated_at or created_at}
//	payment.charged_back   ChargedBack{Payment: snapshot of data, data.id, dispute "dp_"+data.id
//	                       (or data.dispute_id / data.dispute.id when given), at charged_back_at
//	                       or updated_at}; a payment back to succeeded or partially_refunded (as
//	                       fetched now: the dispute was won since) + ChargebackWon
//	payment.chargeback_won ChargebackWon{data.id, the dispute as for payment.charged_back, at updated_at}
//	subscription.*         Subscription{id, customer, plan, status active|canceled|ended
//	                       (subscription.ended: ended), current_period_end, updated_at}
//	invoice.settled        Settled{id, order_id, amount, currency, chain_ref, at updated_at}
//	webhook_endpoint.test  nil
//
// # stripe
//
//	checkout.session.completed     Captured{payment_intent, amount_total, currency} + OrderPaid
//	                               (metadata.order_id or client_reference_id); mode subscription, or
//	                               no payment intent with payment_status no_payment_required (a
//	                               total of zero): OrderPaid{order, subscription, else the session
//	                               id} only; nil for mode setup, payment_status unpaid, or no order
//	payment_intent.succeeded       Captured{id, amount_received (or amount)} + OrderPaid (metadata.order_id);
//	                               fetched with latest_charge.refunds expanded, also its refunds as
//	                               charge.refunded maps them (a refund in a status unknown here is
//	                               left out: its refund.* event reports it; the release of a
//	                               partial capture too)
//	charge.succeeded,              a charge without a payment intent (the Charges API):
//	charge.captured                Captured{id, amount_captured (or amount)} + OrderPaid; nil when it
//	                               has a payment intent (payment_intent.succeeded captures it) or is
//	                               not captured yet
//	charge.refunded                one Refunded per refund of refunds.data that did not fail, with a
//	                               Payment snapshot of the charge (amount_captured, else amount);
//	                               PaymentRef is the payment_intent, else the charge's id. Without
//	                               refunds.data (API versions from 2022-11-15) nil: the refund.*
//	                               events carry them; nil for a charge never captured (captured
//	                               false, amount_captured 0): its refunds release an authorization.
//	                               A charge captured in part (0 < amount_captured < amount): the
//	                               refund Stripe made at the capture to release the rest moves
//	                               nothing and is left out: the one of reason
//	                               expired_uncaptured_charge, else the oldest without a reason of
//	                               exactly amount − amount_captured (none of a list cut short,
//	                               has_more: the release, the oldest, is not in it)
//	refund.created, refund.updated, the refund object: status succeeded or pending →
//	refund.failed,                 Refunded{payment_intent (else charge), id, amount, currency, at
//	charge.refund.updated          created} (no Payment snapshot); failed or canceled →
//	                               RefundFailed; requires_action → nil; another status is an error;
//	                               reason expired_uncaptured_charge (an authorization released) → nil;
//	                               fetched with charge.refunds expanded, the release of a partial
//	                               capture (as charge.refunded tells it; without the charge's
//	                               refunds, a refund of the remainder while amount_refunded is only
//	                               that remainder) → nil. Not fetched, a refund says nothing of its
//	                               charge: the release of a partial capture without a reason is
//	                               booked as a refund, bounded by billing by the amount captured
//	charge.dispute.created,        ChargedBack{payment_intent (else charge), dispute id, amount (the
//	charge.dispute.funds_withdrawn disputed amount)} (no Payment snapshot); an inquiry (created with a
//	                               status warning_*) or a prevented dispute moves no money: nil;
//	                               status won (the dispute as fetched now) + ChargebackWon
//	charge.dispute.closed,         ChargebackWon when status is won (closed), else nil
//	charge.dispute.funds_reinstated
//	customer.subscription.created/updated
//	                               Subscription: active/trialing/past_due/unpaid/incomplete/paused are
//	                               active, or canceled when cancel_at_period_end or cancel_at is set;
//	                               canceled is canceled while it has no ended_at and either
//	                               cancel_at_period_end or a current_period_end still ahead, else
//	                               ended; incomplete_expired is ended; any other status is an error
//	customer.subscription.deleted  Subscription ended (EndedAt: ended_at)
//	invoice.paid, ping             nil (Stripe invoices are not crypto settlements)
//
// Stripe's times are whole unix seconds (the simulator's updated_at too):
// two changes of one subscription within a second carry the same
// UpdatedAt, and only the resource fetched from the API can order them.
// The simulator's GET /v1/subscriptions/{id} adds updated_at_ns (unix
// nanoseconds, a field Stripe does not have); when present it is the
// Subscription's UpdatedAt.
//
// # paddle (Paddle Billing)
//
//	transaction.completed, transaction.paid
//	                       Captured{payment_id or id, details.totals.grand_total (else total less
//	                       credit), currency_code} + OrderPaid (custom_data.order_id, a string
//	                       or an integer; none for a transaction of origin subscription_*, which
//	                       carries its subscription's); nil for a transaction that carries
//	                       chain_ref (a crypto invoice is not a Paddle payment); fetched with
//	                       include=adjustments, also each adjustment as adjustment.* maps it
//	adjustment.created, adjustment.updated
//	                       action refund: approved → Refunded{transaction_id, refund_id or id,
//	                       totals.total}; rejected → RefundFailed; pending_approval → nil.
//	                       action chargeback: ChargedBack{transaction_id, adjustment id,
//	                       totals.total}; reversed (won) → that ChargedBack + ChargebackWon{transaction_id,
//	                       adjustment id}; rejected → nil. action chargeback_reverse (Paddle's
//	                       won dispute, an adjustment of its own) → ChargebackWon{transaction_id,
//	                       ReversalRef: adjustment id}. chargeback_warning, credit,
//	                       credit_reverse and other actions move no money: nil. An unknown
//	                       refund status is an error (listed on a fetched transaction, that
//	                       adjustment is left out and the transaction still maps).
//	subscription.created, subscription.updated, subscription.activated, .past_due, .paused,
//	subscription.resumed, subscription.trialing, subscription.imported
//	                       Subscription: past_due and paused kept (not paid for); else
//	                       scheduled_change.action cancel → canceled; status canceled → ended;
//	                       active/trialing → active; others are an error
//	subscription.canceled  Subscription ended (EndedAt: canceled_at)
//	notification.test      nil
//
// # crypto (BTCPay-style)
//
//	InvoiceSettled         Settled{invoiceId, metadata.orderId, amount, currency, chainRef, at timestamp}
//	anything else          nil
package mapping

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/signing"
)

// Facts returns what ev, an event of a source of the given provider
// ("stripe", "paddle", "billete", "crypto", "standard", "hmac"), says
// happened. nil facts with a nil error mean: ignore the event (see the
// package doc; Read also says why). "standard" and "hmac" sources always
// give nil, nil: payhook does not know their business vocabulary.
func Facts(provider string, ev *payhook.Event) ([]billing.Fact, error) {
	r, err := Read(provider, ev)
	return r.Facts, err
}

// Result is what an event means for billing: the facts to apply, or, when
// there are none, why the event changes nothing (Ignored).
type Result struct {
	Facts []billing.Fact
	// Ignored is the reason there are no facts, e.g. "a Stripe dispute
	// inquiry (status warning_needs_response) takes no money".
	Ignored string
}

// Read is Facts with the reason an event is ignored. Every fact it
// returns passes billing.Check: a reference that cannot be stored (NUL,
// control or format characters), a time outside payhook's bounds or an
// amount beyond ±payhook.MaxAmount is an error wrapping
// payhook.ErrMalformed, so the event fails at once.
func Read(provider string, ev *payhook.Event) (Result, error) {
	var m mapper
	switch provider {
	case "standard", "hmac":
		return Result{Ignored: provider + " sources carry no billing vocabulary payhook knows"}, nil
	case "billete":
		m = mapper{typeField: "type", timeField: "created_at", data: billete}
	case "stripe":
		m = mapper{typeField: "type", timeField: "created", data: stripe}
	case "paddle":
		m = mapper{typeField: "event_type", timeField: "occurred_at", data: paddle, stringAmounts: true}
	case "crypto":
		m = mapper{typeField: "type", timeField: "timestamp", data: crypto}
	default:
		return Result{}, fmt.Errorf("mapping: unknown provider %q: %w", provider, payhook.ErrConfig)
	}
	if ev == nil {
		return Result{}, fmt.Errorf("mapping %s: no event: %w", provider, payhook.ErrMalformed)
	}
	root, err := parse(ev.Payload, m.stringAmounts)
	if err != nil {
		return Result{}, fmt.Errorf("mapping %s event %s: %w", provider, ev.EventID, err)
	}
	typ, err := root.str(m.typeField)
	if err != nil {
		return Result{}, fmt.Errorf("mapping %s event %s: %w", provider, ev.EventID, err)
	}
	if typ == "" {
		typ = ev.Type
	}
	at, ok, err := root.time(m.timeField)
	if err == nil && !ok {
		at = ev.OccurredAt.UTC()
		err = payhook.CheckTime("the event's time", at)
	}
	if err != nil {
		return Result{}, fmt.Errorf("mapping %s %s event %s: %w", provider, typ, ev.EventID, err)
	}
	facts, err := m.data(&event{typ: typ, at: at, root: root})
	var ign ignored
	if errors.As(err, &ign) {
		return Result{Ignored: ign.reason}, nil
	}
	if err == nil {
		for _, f := range facts {
			if err = billing.Check(f); err != nil {
				break
			}
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("mapping %s %s event %s: %w", provider, typ, ev.EventID, err)
	}
	if len(facts) == 0 {
		return Result{Ignored: typ + " events change no billing state"}, nil
	}
	return Result{Facts: facts}, nil
}

// mapper is one provider's reading of payloads.
type mapper struct {
	typeField, timeField string
	stringAmounts        bool
	data                 func(*event) ([]billing.Fact, error)
}

// event is a parsed payload.
type event struct {
	typ  string
	at   time.Time // the envelope's time, else Event.OccurredAt
	root obj
}

// obj is a JSON object of the payload, read with payhook's one strict
// reader (signing.Object): the payload must be strict JSON (no duplicate
// names, valid UTF-8, no lone surrogates) and a field read must not also
// appear under a name differing only in case, so that billing reads what
// an application decoding the stored payload with encoding/json reads.
type obj struct {
	o signing.Object
	// strAmounts accepts amounts written as strings of digits (Paddle).
	strAmounts bool
}

// parse reads a payload: one strict JSON object.
func parse(payload []byte, strAmounts bool) (obj, error) {
	o, err := signing.ParseObject(payload)
	if err != nil {
		return obj{}, fmt.Errorf("payload: %w", err)
	}
	return obj{o: o, strAmounts: strAmounts}, nil
}

func malformed(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, payhook.ErrMalformed)...)
}

// name is the path of field k.
func (o obj) name(k string) string { return o.o.Path(k) }

// kind returns the kind of field k's value, 0 when absent or null.
func (o obj) kind(k string) (byte, error) {
	kind, err := o.o.Kind(k)
	return byte(kind), err
}

// has reports whether field k is present and not null.
func (o obj) has(k string) (bool, error) {
	kind, err := o.kind(k)
	return kind != 0, err
}

// child returns the object in field k; an absent or null field gives an
// empty object (whose fields are all absent).
func (o obj) child(k string) (obj, error) {
	c, err := o.o.Object(k)
	if err != nil {
		return obj{}, err
	}
	return obj{o: c, strAmounts: o.strAmounts}, nil
}

// dig follows a path of objects; absent steps give an empty object.
func (o obj) dig(keys ...string) (obj, error) {
	var err error
	for _, k := range keys {
		if o, err = o.child(k); err != nil {
			return obj{}, err
		}
	}
	return o, nil
}

// list returns the objects of the array in field k (nil when absent).
func (o obj) list(k string) ([]obj, error) {
	os, err := o.o.Objects(k)
	if err != nil || os == nil {
		return nil, err
	}
	out := make([]obj, len(os))
	for i, c := range os {
		out[i] = obj{o: c, strAmounts: o.strAmounts}
	}
	return out, nil
}

// str returns the string field k, "" when absent or null.
func (o obj) str(k string) (string, error) { return o.o.String(k) }

// need returns the string field k, which must be there and not empty.
func (o obj) need(k string) (string, error) {
	s, err := o.str(k)
	if err == nil && s == "" {
		err = malformed("field %q is missing", o.name(k))
	}
	return s, err
}

// ref returns an identifier field that may also be an expanded object
// carrying an id (Stripe's expandable fields), "" when absent.
func (o obj) ref(k string) (string, error) {
	if kind, err := o.kind(k); err != nil || kind != '{' {
		return o.str(k)
	}
	c, err := o.child(k)
	if err != nil {
		return "", err
	}
	return c.str("id")
}

// id returns an identifier field of data the application writes freely
// (Paddle's custom_data): a string, or a JSON integer as its digits; ""
// when absent or null.
func (o obj) id(k string) (string, error) {
	if kind, err := o.kind(k); err != nil || kind != '0' {
		return o.str(k)
	}
	n, _, err := o.integer(k)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10), nil
}

// needRef is ref for a field that must be there.
func (o obj) needRef(k string) (string, error) {
	s, err := o.ref(k)
	if err == nil && s == "" {
		err = malformed("field %q is missing", o.name(k))
	}
	return s, err
}

// flag returns the boolean field k, false when absent.
func (o obj) flag(k string) (bool, error) {
	b, _, err := o.o.Bool(k)
	return b, err
}

// amount returns the amount in field k, in minor units, and whether it is
// there. It must be an unsigned integer of at most payhook.MaxAmount: a
// JSON integer, or a string of digits for providers that write amounts as
// strings. A sign (even "-0") is malformed: providers write refunds and
// disputes as positive amounts of their own objects.
func (o obj) amount(k string) (int64, bool, error) {
	kind, err := o.kind(k)
	if err != nil || kind == 0 {
		return 0, false, err
	}
	var s string
	switch kind {
	case '0':
		s, err = o.o.Number(k)
	case '"':
		if !o.strAmounts {
			return 0, false, malformed("field %q is a string, not an integer amount of minor units", o.name(k))
		}
		s, err = o.str(k)
	default:
		return 0, false, malformed("field %q is not an amount", o.name(k))
	}
	if err != nil {
		return 0, false, err
	}
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return 0, false, malformed("field %q is %q: an amount has no sign", o.name(k), s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, malformed("field %q is %q, not an integer amount of minor units within ±%d", o.name(k), s, payhook.MaxAmount)
	}
	if err := payhook.CheckAmount(fmt.Sprintf("field %q", o.name(k)), n); err != nil {
		return 0, false, err
	}
	return n, true, nil
}

// integer returns the JSON integer in field k and whether it is there.
func (o obj) integer(k string) (int64, bool, error) {
	kind, err := o.kind(k)
	if err != nil || kind == 0 {
		return 0, false, err
	}
	if kind != '0' {
		return 0, false, malformed("field %q is not an integer", o.name(k))
	}
	x, err := o.o.Number(k)
	if err != nil {
		return 0, false, err
	}
	n, err := strconv.ParseInt(x, 10, 64)
	if err != nil {
		return 0, false, malformed("field %q is %s, not an integer", o.name(k), x)
	}
	return n, true, nil
}

// needAmount is amount for a field that must be there.
func (o obj) needAmount(k string) (int64, error) {
	n, ok, err := o.amount(k)
	if err == nil && !ok {
		err = malformed("field %q is missing", o.name(k))
	}
	return n, err
}

// currency returns the currency in field k, upper-cased, "" when absent.
func (o obj) currency(k string) (string, error) {
	s, err := o.str(k)
	return strings.ToUpper(s), err
}

// needCurrency returns the currency in field k of the first of os that
// has one, upper-cased; an error naming the first's field when none has.
func needCurrency(k string, os ...obj) (string, error) {
	for _, o := range os {
		cur, err := o.currency(k)
		if err != nil || cur != "" {
			return cur, err
		}
	}
	return "", malformed("field %q is missing", os[0].name(k))
}

// time returns the time in field k (an RFC 3339 string or integer unix
// seconds), in UTC, and whether it is there. A time outside payhook's
// bounds (payhook.CheckTime; milliseconds where seconds belong) is
// malformed.
func (o obj) time(k string) (time.Time, bool, error) {
	kind, err := o.kind(k)
	if err != nil || kind == 0 {
		return time.Time{}, false, err
	}
	what := fmt.Sprintf("field %q", o.name(k))
	switch kind {
	case '"':
		x, err := o.str(k)
		if err != nil || x == "" {
			return time.Time{}, false, err
		}
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return time.Time{}, false, malformed("%s is %q, not an RFC 3339 time", what, x)
		}
		if t.IsZero() {
			// CheckTime passes the zero time as "unknown"; written in a
			// payload it is as far out of bounds as any year before 2000.
			return time.Time{}, false, malformed("%s is %q, outside %d–%d", what, x, payhook.MinTime.Year(), payhook.MaxTime.Year())
		}
		if err := payhook.CheckTime(what, t); err != nil {
			return time.Time{}, false, err
		}
		return t.UTC(), true, nil
	case '0':
		x, err := o.o.Number(k)
		if err != nil {
			return time.Time{}, false, err
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return time.Time{}, false, malformed("%s is %s, not unix seconds", what, x)
		}
		t, err := payhook.UnixSeconds(what, n)
		if err != nil {
			return time.Time{}, false, err
		}
		return t, true, nil
	}
	return time.Time{}, false, malformed("%s is not a time", what)
}

// timeOr returns the first of fields keys that is there, else def.
func (o obj) timeOr(def time.Time, keys ...string) (time.Time, error) {
	for _, k := range keys {
		t, ok, err := o.time(k)
		if err != nil || ok {
			return t, err
		}
	}
	return def, nil
}

// payment reads the fields of a payment snapshot; amount and currency are
// required.
func (o obj) payment(ref, orderID, amountField, currencyField string, at time.Time) (billing.Payment, error) {
	amount, err := o.needAmount(amountField)
	if err != nil {
		return billing.Payment{}, err
	}
	cur, err := o.currency(currencyField)
	if err == nil && cur == "" {
		err = malformed("field %q is missing", o.name(currencyField))
	}
	if err != nil {
		return billing.Payment{}, err
	}
	return billing.Payment{Ref: ref, OrderID: orderID, Amount: amount, Currency: cur, CapturedAt: at}, nil
}

// snapshot is payment for an optional snapshot: nil when the amount or the
// currency is absent (but an error when they are there and unreadable).
func (o obj) snapshot(ref, orderID, amountField, currencyField string, at time.Time) (*billing.Payment, error) {
	for _, k := range []string{amountField, currencyField} {
		if ok, err := o.has(k); err != nil || !ok {
			return nil, err
		}
	}
	p, err := o.payment(ref, orderID, amountField, currencyField, at)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// captured returns Captured for p, plus OrderPaid when p names its order.
func captured(p billing.Payment) []billing.Fact {
	facts := []billing.Fact{billing.Captured{Payment: p}}
	if p.OrderID != "" {
		facts = append(facts, billing.OrderPaid{OrderID: p.OrderID, PaymentRef: p.Ref, At: p.CapturedAt})
	}
	return facts
}

// first returns the first non-empty string field of keys.
func (o obj) first(keys ...string) (string, error) {
	for _, k := range keys {
		s, err := o.str(k)
		if err != nil || s != "" {
			return s, err
		}
	}
	return "", nil
}

// errStatus is an unknown status value.
func errStatus(o obj, k, v string) error {
	return unknownStatus{malformed("field %q has unknown value %q", o.name(k), v)}
}

// unknownStatus is errStatus's error: a status this mapping does not know.
// A payment's fetched object that lists a refund or an adjustment in such
// a status still maps the payment (see listed).
type unknownStatus struct{ error }

func (u unknownStatus) Unwrap() error { return u.error }

// listed is the answer for one refund or adjustment listed on a payment's
// fetched object: one in a status this mapping does not know is left out
// (nothing of it moves) rather than failing the payment's own facts for
// good; its own event (refund.*, adjustment.*) fails with the status.
func listed(facts []billing.Fact, err error) ([]billing.Fact, error) {
	var u unknownStatus
	if errors.As(err, &u) {
		return nil, nil
	}
	return facts, err
}

// ignored is the error a provider's mapping returns for an event that
// changes nothing; Read turns it into Result.Ignored.
type ignored struct{ reason string }

func (i ignored) Error() string { return "ignored: " + i.reason }

// ignore is the answer for an event that changes nothing, and why.
func ignore(format string, a ...any) ([]billing.Fact, error) {
	return nil, ignored{fmt.Sprintf(format, a...)}
}
