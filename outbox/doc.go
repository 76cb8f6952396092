// Package outbox is how payhook tells the application what happened, once
// per fact, after the commit that made it.
//
// Facts (outbox.Fact) are payhook's output: normalized and independent of
// the provider, unlike billing.Fact, the input facts the mappings read from
// events. Billing writes them inside the processing transaction (Emit),
// where its unique index or conditional UPDATE said a change happened for
// the first time, each with an ID derived from the business fact (ID):
// however many times an event arrives, is replayed or is backfilled, the
// unique index on the id keeps one row. A crash before the commit leaves
// no fact; after it, the fact and its deliveries are in the database and
// are sent.
//
// Each fact has one delivery per sink whose patterns match its type, run
// as a job of its own (package jobs), retried with backoff on its own: its
// failure never touches the event, which stays processed. Sinks are
// payhook's (HTTP signed the Standard Webhooks way, SMTP, Log) or the
// application's own after-commit effects (AddFunc), registered the same
// way. A delivery's row and its attempts stay as the delivery log. A fact
// whose sinks are all Unrecorded (Log) gets no delivery at all but is
// held by an untold row (one for the facts a statement writes), deleted
// once they are told after the commit (Untold, Tell);
// the sweep routes those left untold. ListTx reads the outbox inside a
// transaction.
//
// A fact's JSON, the body an HTTP sink posts:
//
//	{
//	  "id": "fct_5a037f33a2b37079ee0c15ba564bcce2",
//	  "type": "payment.refunded",
//	  "timestamp": "2026-11-30T12:05:00Z",
//	  "source": "stripe",
//	  "subject": "re_1a",
//	  "data": {"payment": "pay_1", "refund": "re_1a", "amount": 2000, "currency": "USD", "refunded_amount": 2000}
//	}
//
// The types, their subject and data (docs/facts.md has the same table):
//
//	order.paid              order id      order_id, paid_by, kind (fiat|crypto)
//	payment.succeeded       payment ref   payment, order_id, amount, currency, captured_at
//	payment.refunded        refund ref    payment, refund, amount (asked), currency, refunded_amount (the payment's, after it)
//	payment.refund_failed   refund ref    payment, refund, amount (given back), currency
//	payment.charged_back    dispute ref   payment, dispute, amount, currency
//	payment.chargeback_won  dispute ref   payment, dispute, amount (given back), currency
//	crypto.settled          invoice ref   invoice, order_id, amount, currency, chain_ref
//	subscription.created    subscription  subscription, customer, plan, status, current_period_end, ended_at
//	subscription.updated    subscription  the same, for each snapshot that replaced a lower one
//	subscription.ended      subscription  the same, once, when the end is claimed
//	alert.raised            alert subject kind, subject, message
//
// Ids: the business key of each type is its subject (a payment succeeds
// once, an order is paid once, a refund fails once), but for
// subscription.updated, whose key is the snapshot it moved to, and
// alert.raised, whose key is the occurrence that raised it (or the raise's
// count for alerts raised outside billing's rules).
package outbox
