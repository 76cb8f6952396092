package billing

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// Facts are the facts of one event, of Source, for ApplyMany.
type Facts struct {
	Source string
	Facts  []Fact
}

// ApplyMany applies the facts of several events in tx, each event's as
// ApplyOutcome applies them, and returns their outcomes in their order:
// the batch ends exactly as its events applied one by one in their order
// would leave it, those that failed left out. failed[i] is the error of
// event i when it failed and nothing of it was kept (rolled back to a
// savepoint, as when applied alone and rolled back); the others may be
// committed. On an error nothing of tx is to be committed: the caller
// rolls it back (and may apply the events one by one).
//
// The captures of fiat payments not stored yet come first, together: an
// event whose facts are a Captured, with the OrderPaid of its payment's
// order when it has one (what mappings make of a payment that
// succeeded), costs no statement of its own, but a row in one statement
// per table for all such events (payments, postings, entries, orders,
// facts, untold facts) instead of five to eight; on PostgreSQL each of
// those is a round trip. A capture whose payment or order an earlier event
// of the batch names waits for its turn, so that coming first changes
// nothing. A capture of a payment stored already that changes nothing (a
// payment told in two events) is found with the others in one query and
// costs nothing more (see recaptured). The snapshots of subscriptions
// come next, together in the same way (see snapshots): a renewal wave or
// a wave of ends costs three statements a batch. The rest, and the
// captures of payments stored already that change something, are applied
// one event after the other, each under a savepoint when there are 32 of
// them at most (a PostgreSQL subtransaction each: past 64 in one
// transaction they slow every snapshot); when there are more, the first
// of them to fail is the error of the whole batch.
func ApplyMany(ctx context.Context, tx *Tx, events []Facts) (outs []Outcome, failed []error, err error) {
	if err := tx.check(); err != nil {
		return nil, nil, err
	}
	outs = make([]Outcome, len(events))
	as := make([]*applier, len(events))
	for i, ev := range events {
		if ev.Source == "" {
			return nil, nil, errNoSource
		}
		as[i] = &applier{tx: tx, source: ev.Source, out: &outs[i]}
	}
	first := firstToName(events, nil)
	// done[i]: how many of event i's first facts were applied together.
	done, err := newCaptures(ctx, tx, as, events, first)
	if err != nil {
		return nil, nil, err
	}
	if err := recaptured(ctx, tx, as, events, firstToName(events, done), done); err != nil {
		return nil, nil, err
	}
	if err := snapshots(ctx, tx, as, events, first, done); err != nil {
		return nil, nil, err
	}
	alone := 0
	for i := range events {
		if done[i] == 0 {
			alone++
		}
	}
	failed = make([]error, len(events))
	for i, ev := range events {
		saved := done[i] == 0 && alone <= isolated
		err := tx.saved(ctx, saved, func() error { return as[i].apply(ctx, ev.Facts[done[i]:], done[i]) })
		if !saved || errors.Is(err, errSavepoint) {
			if err != nil {
				return nil, nil, fmt.Errorf("event %d of %d: %w", i+1, len(events), err)
			}
			continue
		}
		if err != nil {
			outs[i], failed[i] = Outcome{}, err
		}
	}
	return outs, failed, nil
}

// isolated is how many events ApplyMany applies under a savepoint each, at
// most.
const isolated = 32

// errSavepoint wraps the error of a savepoint's own statement.
var errSavepoint = errors.New("savepoint")

// saved runs f, under a savepoint if save: when f fails, tx is rolled
// back to it, what tx keeps for the caller (its deliveries and untold
// facts) too, and f's error returned. An error of the savepoint's own
// statements wraps errSavepoint: tx is then to be rolled back.
func (tx *Tx) saved(ctx context.Context, save bool, f func() error) error {
	if !save {
		return f()
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT payhook_apply`); err != nil {
		return fmt.Errorf("%w: %w", errSavepoint, err)
	}
	deliveries, untold := len(tx.deliveries), len(tx.untold)
	ferr := f()
	if ferr != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT payhook_apply`); err != nil {
			return fmt.Errorf("%w: roll back: %w (after %w)", errSavepoint, err, ferr)
		}
		tx.deliveries, tx.untold = tx.deliveries[:deliveries], tx.untold[:untold]
	}
	if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT payhook_apply`); err != nil {
		return fmt.Errorf("%w: release: %w", errSavepoint, err)
	}
	return ferr
}

// capture is a Captured ApplyMany applies with others, of the event at
// index i.
type capture struct {
	i   int
	pay Payment
}

// newCaptures applies the Captured facts that begin the events that are a
// capture alone (isCapture) and whose payment is not stored yet, as
// applier.captured would, together; it reports how many facts of each
// event it applied. A capture whose payment or order an event before it
// names (a second capture of one payment or order, too) is left to be
// applied in its turn, alone: the result is that of the events applied
// one by one in their order.
func newCaptures(ctx context.Context, tx *Tx, as []*applier, events []Facts, first []bool) ([]int, error) {
	done := make([]int, len(events))
	var cs []capture
	for i, ev := range events {
		if pay, ok := isCapture(ev.Facts); ok && first[i] {
			cs = append(cs, capture{i: i, pay: pay})
		}
	}
	if len(cs) < 2 {
		return done, nil
	}
	cs, err := insertPayments(ctx, tx, as, cs)
	if err != nil || len(cs) == 0 {
		return done, err
	}
	for _, c := range cs {
		a := as[c.i]
		a.locked = map[string]bool{c.pay.Ref: true}
		done[c.i] = 1
	}
	if err := postCaptures(ctx, tx, as, cs); err != nil {
		return nil, err
	}
	claimed, err := claimOrders(ctx, tx, as, cs)
	if err != nil {
		return nil, err
	}
	// The facts in the order captured writes them: the payment's, then
	// its order's.
	var facts []outbox.Fact
	var outs []*Outcome
	for j, c := range cs {
		p := c.pay
		f, err := tx.fact(outbox.PaymentSucceeded, as[c.i].source, p.Ref, p.Ref, p.CapturedAt,
			paymentData{Payment: p.Ref, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, At: p.CapturedAt})
		if err != nil {
			return nil, err
		}
		facts, outs = append(facts, f), append(outs, as[c.i].out)
		if claimed[j] {
			f, err := tx.fact(outbox.OrderPaid, as[c.i].source, p.OrderID, p.OrderID, tx.now,
				orderPaidData{OrderID: p.OrderID, PaidBy: p.Ref, Kind: "fiat"})
			if err != nil {
				return nil, err
			}
			facts, outs = append(facts, f), append(outs, as[c.i].out)
		}
	}
	emitted, err := outbox.EmitMany(ctx, tx.db, tx.Tx, tx.box, facts, tx.now)
	if err != nil {
		return nil, err
	}
	for k, e := range emitted {
		tx.record(outs[k], facts[k], e)
	}
	// An order paid already: as captured pays it, alone (and raises what
	// it raises).
	for j, c := range cs {
		if c.pay.OrderID != "" && !claimed[j] {
			if err := as[c.i].payOrder(ctx, c.pay.OrderID, c.pay.Ref, true); err != nil {
				return nil, fmt.Errorf("apply fact 0 (billing.Captured) of source %s: %w", as[c.i].source, err)
			}
		}
	}
	return done, nil
}

// firstToName reports, for each event, whether no event before it names
// what it names, but those done already (done[j] > 0, if done is not
// nil): applied ahead of the events before it, such an event leaves what
// applying them in their order does.
func firstToName(events []Facts, done []int) []bool {
	first := make([]bool, len(events))
	named := map[name]bool{}
	for i, ev := range events {
		var ns []name
		for _, f := range ev.Facts {
			ns = append(ns, names(ev.Source, f)...)
		}
		first[i] = !slices.ContainsFunc(ns, func(n name) bool { return named[n] })
		for _, n := range ns {
			if n.ref != "" && (done == nil || done[i] == 0) {
				named[n] = true
			}
		}
	}
	return first
}

// name is a payment or a subscription of a source, or an order.
type name struct{ source, kind, ref string }

// orderName is the name of an order of any source: the alerts of orders
// (AlertOrderPaidTwice, counted, its message the last raise's) are about
// the order id alone, so that a capture raising one must not pass an
// event of another source raising it too.
func orderName(id string) name { return name{"", "order", id} }

// names returns the payments and orders f is about (a dispute's payment is
// stored before its chargeback: f names it).
func names(source string, f Fact) []name {
	pay := func(p *Payment) []name {
		if p == nil {
			return nil
		}
		return []name{{source, "payment", p.Ref}, orderName(p.OrderID)}
	}
	switch f := value(f).(type) {
	case Captured:
		return pay(&f.Payment)
	case Refunded:
		return append(pay(f.Payment), name{source, "payment", f.PaymentRef})
	case ChargedBack:
		return append(pay(f.Payment), name{source, "payment", f.PaymentRef})
	case RefundFailed:
		return []name{{source, "payment", f.PaymentRef}}
	case ChargebackWon:
		return []name{{source, "payment", f.PaymentRef}}
	case OrderPaid:
		return []name{{source, "payment", f.PaymentRef}, orderName(f.OrderID)}
	case Settled:
		return []name{{source, "payment", f.InvoiceRef}, orderName(f.OrderID)}
	case Subscription:
		return []name{{source, "subscription", f.Ref}}
	}
	return nil
}

// isCapture returns the payment of facts when they are what a mapping
// makes of a payment that succeeded: its Captured, then the OrderPaid of
// its order if it has one; each passes Check.
func isCapture(facts []Fact) (Payment, bool) {
	if len(facts) == 0 || len(facts) > 2 {
		return Payment{}, false
	}
	c, ok := value(facts[0]).(Captured)
	if !ok || Check(c) != nil {
		return Payment{}, false
	}
	p := c.Payment
	if len(facts) == 1 {
		return p, true
	}
	o, ok := value(facts[1]).(OrderPaid)
	return p, ok && p.OrderID != "" && o.OrderID == p.OrderID && o.PaymentRef == p.Ref && Check(o) == nil
}

// insertPayments inserts the payments of cs that are not stored yet, as
// captured does, and returns those it inserted.
func insertPayments(ctx context.Context, tx *Tx, as []*applier, cs []capture) ([]capture, error) {
	rows := make([][]any, len(cs))
	for k, c := range cs {
		p := c.pay
		rows[k] = []any{as[c.i].source, p.Ref, p.OrderID, p.Amount, p.Currency, tx.timeValue(p.CapturedAt)}
	}
	db := tx.db
	inserted := map[[2]string]bool{}
	err := store.QueryRows(ctx, tx, rows, `INSERT INTO payhook_payments
			(source, ref, kind, order_id, amount, currency, status, refunded_amount, captured_at, created_at, updated_at)
		SELECT j.value->>0, j.value->>1, 'fiat', j.value->>2, CAST(j.value->>3 AS BIGINT), j.value->>4, 'succeeded', 0,
			`+db.TimeColumn("j.value->>5")+`, $2, $2
		FROM `+db.JSONRows()+`
		WHERE TRUE
		ORDER BY j.n
		ON CONFLICT (source, ref) DO NOTHING
		RETURNING source, ref`, []any{tx.timeValue(tx.now)}, keysInto(inserted))
	if err != nil {
		return nil, fmt.Errorf("insert %d payments: %w", len(cs), err)
	}
	return slices.DeleteFunc(cs, func(c capture) bool { return !inserted[[2]string{as[c.i].source, c.pay.Ref}] }), nil
}

// recaptured counts done (every fact of their events) the events not done
// yet that are a capture (isCapture) of a payment stored already, named by
// no event before them but those done (first), and that change nothing:
// captured and orderPaid would find the payment fiat, of the capture's
// amount and currency, recorded for the capture's order (or the capture
// names none), and its order, when the event pays it, paid by it; then
// they write nothing and raise nothing (a fiat payment is stored with its
// capture posting, in one transaction). One query tells them all, after
// newCaptures wrote the batch's new payments; the others are applied
// alone in their turn. A provider telling one payment in several events
// (Stripe's checkout.session.completed and payment_intent.succeeded)
// makes every one but the first such a capture, in the batch of the first
// or a later one. What the query reads, once so, stays so: a payment's
// kind, amount, currency and recorded order, and a paid order never
// change.
func recaptured(ctx context.Context, tx *Tx, as []*applier, events []Facts, first []bool, done []int) error {
	var cs []capture
	for i, ev := range events {
		if pay, ok := isCapture(ev.Facts); ok && first[i] && done[i] == 0 {
			cs = append(cs, capture{i: i, pay: pay})
		}
	}
	if len(cs) == 0 {
		return nil
	}
	rows := make([][]any, len(cs))
	for k, c := range cs {
		p := c.pay
		orderPaid := len(events[c.i].Facts) == 2 // its OrderPaid (isCapture)
		rows[k] = []any{as[c.i].source, p.Ref, p.OrderID, p.Amount, p.Currency, orderPaid}
	}
	same := map[[2]string]bool{}
	err := store.QueryRows(ctx, tx, rows, `SELECT p.source, p.ref
		FROM `+tx.db.JSONRows()+`
		JOIN payhook_payments p ON p.source = j.value->>0 AND p.ref = j.value->>1
		WHERE p.kind = 'fiat' AND p.amount = CAST(j.value->>3 AS BIGINT) AND p.currency = j.value->>4
			AND (j.value->>2 = '' OR p.order_id = j.value->>2)
			AND (NOT CAST(j.value->>5 AS BOOLEAN) OR EXISTS (SELECT 1 FROM payhook_orders o
				WHERE o.source = p.source AND o.order_id = p.order_id AND o.status = 'paid' AND o.paid_by = p.ref))`,
		nil, keysInto(same))
	if err != nil {
		return fmt.Errorf("read %d payments captured before: %w", len(cs), err)
	}
	for _, c := range cs {
		if same[[2]string{as[c.i].source, c.pay.Ref}] {
			done[c.i] = len(events[c.i].Facts)
		}
	}
	return nil
}

// keysInto returns a scan for QueryRows that adds each row's (source,
// ref) to keys.
func keysInto(keys map[[2]string]bool) func(*sql.Rows) error {
	return func(r *sql.Rows) error {
		var k [2]string
		err := r.Scan(&k[0], &k[1])
		keys[k] = true
		return err
	}
}

// postCaptures posts the capture of each payment of cs just inserted, with
// its entries, as captured does (nothing for an amount of zero).
func postCaptures(ctx context.Context, tx *Tx, as []*applier, cs []capture) error {
	var rows [][]any
	for _, c := range cs {
		if c.pay.Amount > 0 {
			rows = append(rows, []any{as[c.i].source, c.pay.Ref, c.pay.Amount, c.pay.Currency})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	var entries [][]any
	err := store.QueryRows(ctx, tx, rows, `INSERT INTO payhook_ledger_postings
			(source, fact_key, kind, payment_ref, reverses_id, amount, requested_amount, currency, posted_at)
		SELECT j.value->>0, 'capture:' || (j.value->>1), 'capture', j.value->>1, NULL,
			CAST(j.value->>2 AS BIGINT), CAST(j.value->>2 AS BIGINT), j.value->>3, $2
		FROM `+tx.db.JSONRows()+`
		WHERE TRUE
		ORDER BY j.n
		ON CONFLICT (source, fact_key) DO NOTHING
		RETURNING id, amount, currency`, []any{tx.timeValue(tx.now)}, func(r *sql.Rows) error {
		var id, amount int64
		var currency string
		err := r.Scan(&id, &amount, &currency)
		entries = append(entries, []any{id, AccountReceivable, currency, amount}, []any{id, AccountRevenue, currency, -amount})
		return err
	})
	if err != nil {
		return fmt.Errorf("post %d captures: %w", len(rows), err)
	}
	if len(entries) != 2*len(rows) {
		// A capture posted for a payment that was not stored: applied one
		// by one, the events say which.
		return fmt.Errorf("post %d captures: %d were posted already, before their payments", len(rows), len(rows)-len(entries)/2)
	}
	// In the order entries writes them: by posting, debit first.
	slices.SortStableFunc(entries, func(a, b []any) int { return cmp.Compare(a[0].(int64), b[0].(int64)) })
	err = store.QueryRows(ctx, tx, entries, `INSERT INTO payhook_ledger_entries (posting_id, account, currency, amount)
		SELECT CAST(j.value->>0 AS BIGINT), j.value->>1, j.value->>2, CAST(j.value->>3 AS BIGINT)
		FROM `+tx.db.JSONRows()+`
		ORDER BY j.n`, nil, nil)
	if err != nil {
		return fmt.Errorf("write the entries of %d captures: %w", len(rows), err)
	}
	for _, c := range cs {
		if c.pay.Amount > 0 {
			as[c.i].out.Posted = append(as[c.i].out.Posted, "capture:"+c.pay.Ref)
		}
	}
	return nil
}

// claimOrders marks paid by its payment the order of each capture of cs
// that has one, if pending or unknown, as claimOrder does for a capture
// that just recorded it, and reports which it marked. No two captures of
// cs name one order (newCaptures).
func claimOrders(ctx context.Context, tx *Tx, as []*applier, cs []capture) ([]bool, error) {
	var rows [][]any
	for _, c := range cs {
		if c.pay.OrderID != "" {
			rows = append(rows, []any{as[c.i].source, c.pay.OrderID, c.pay.Ref})
		}
	}
	claimed := make([]bool, len(cs))
	if len(rows) == 0 {
		return claimed, nil
	}
	paid := map[[3]string]bool{}
	err := store.QueryRows(ctx, tx, rows, `INSERT INTO payhook_orders (source, order_id, status, paid_by, paid_at, created_at)
		SELECT j.value->>0, j.value->>1, 'paid', j.value->>2, $2, $2
		FROM `+tx.db.JSONRows()+`
		WHERE TRUE
		ORDER BY j.n
		ON CONFLICT (source, order_id) DO UPDATE SET status = 'paid', paid_by = excluded.paid_by, paid_at = excluded.paid_at
			WHERE payhook_orders.status = 'pending'
		RETURNING source, order_id, paid_by`, []any{tx.timeValue(tx.now)}, func(r *sql.Rows) error {
		var k [3]string
		err := r.Scan(&k[0], &k[1], &k[2])
		paid[k] = true
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mark %d orders paid: %w", len(rows), err)
	}
	for j, c := range cs {
		a := as[c.i]
		if !paid[[3]string{a.source, c.pay.OrderID, c.pay.Ref}] {
			continue
		}
		claimed[j] = true
		a.out.OrdersPaid = append(a.out.OrdersPaid, c.pay.OrderID)
		a.claimed = map[string]string{c.pay.OrderID: c.pay.Ref}
	}
	return claimed, nil
}
