// Package billing turns provider events into billing state an application
// can trust: payments (one row per provider reference), a double-entry
// ledger whose movements are posted once and reversed by entries that
// point at what they reverse, subscriptions guarded against older events,
// orders marked paid only if pending, and alerts.
//
// Events are first mapped to facts (package billing/mapping); Apply then
// writes facts inside the transaction that marks the event processed. Each
// fact is idempotent and commutative: a unique key or a conditional UPDATE
// decides, so duplicates, replays and any delivery order reach the same
// state.
//
// Writes go through a Tx (Begin, or Wrap of a transaction someone else
// holds), which carries the engine and the transaction's time. Reads
// (GetPayment, ListPayments, Balances, ListAlerts...) go through the
// database's pool, never while a transaction is open on SQLite, and return
// errors wrapping payhook.ErrNotFound for what does not exist. The views
// they return (PaymentView, PaymentDetail, BalancesView, EventView...) are
// what the read API, the CLI and the console show, one per thing; the
// Lookup functions find a reference in whichever source holds it.
//
// One file per aggregate, each holding its writes and its views:
//
//	apply.go         Apply: checks each fact and hands it to its aggregate
//	many.go          ApplyMany: several events at once, new captures and
//	                 subscription snapshots together
//	tx.go            Tx: the transaction, its engine and its time
//	fact.go          the facts; check.go their bounds
//	ledger.go        postings and entries; balances
//	payment.go       payments and their money; captures
//	refund.go        refunds and their failures
//	chargeback.go    chargebacks and won disputes
//	order.go         orders paid once
//	settle.go        crypto settlements, final
//	subscription.go  subscriptions ranked against older snapshots
//	alert.go         alerts raised once per occurrence
//	event.go         the view of a stored event
//	query.go         list filters and lookups across sources
package billing
