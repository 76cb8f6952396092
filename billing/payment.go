package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// payment is a payment row locked for the rest of the transaction, with
// the state its money follows from (see ApplyOutcome).
type payment struct {
	ID       int64
	Ref      string
	Kind     string
	Amount   int64
	Currency string
	money
}

// money is what a fiat payment's money follows from, besides its amount.
type money struct {
	// Refunds: refunds posted minus refunds failed, as asked (their sum
	// may exceed the amount; only the amount is ever taken).
	Refunds int64
	// Disputed: what the chargebacks still hold (what each took, less
	// what its win gave back); Open: how many are not won.
	Disputed int64
	Open     int
}

// refunded is what the refunds take: at most the amount.
func (m money) refunded(amount int64) int64 { return min(m.Refunds, amount) }

// kept is what a payment of amount keeps: what refunds and open disputes
// leave, never less than zero.
func (m money) kept(amount int64) int64 {
	return max(0, amount-m.refunded(amount)-m.Disputed)
}

func (m money) status(amount int64) string {
	switch r := m.refunded(amount); {
	case m.Open > 0 || m.Disputed > 0:
		// An open dispute, or a win that gave back only part.
		return "charged_back"
	case r > 0 && r >= amount:
		return "refunded"
	case r > 0:
		return "partially_refunded"
	}
	return "succeeded"
}

// lockPayment locks the payment row (a row lock on PostgreSQL; SQLite's
// single writer already serialises) so that the facts of one payment are
// applied one after the other, and returns it with its money; nil if
// there is none.
func (a *applier) lockPayment(ctx context.Context, ref string) (*payment, error) {
	p := &payment{Ref: ref}
	err := a.tx.QueryRowContext(ctx, `UPDATE payhook_payments SET refunded_amount = refunded_amount
		WHERE source = $1 AND ref = $2
		RETURNING id, kind, amount, currency`, a.source, ref).
		Scan(&p.ID, &p.Kind, &p.Amount, &p.Currency)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock payment %s: %w", ref, err)
	}
	if a.locked == nil {
		a.locked = map[string]bool{}
	}
	a.locked[ref] = true
	if p.money, err = a.moneyOf(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// moneyOf sums the refunds and open chargebacks posted on p, with checked
// arithmetic.
func (a *applier) moneyOf(ctx context.Context, p *payment) (money, error) {
	// A chargeback's win is its "chargeback_won:<dispute>" posting, whose
	// requested amount is what it gave back; the reversal bound to it
	// ("chargeback_reverse:<ref>", see chargebackReversed), when it names
	// an amount (its requested amount, above 0), gives back no more than
	// that, whichever of the two reports of the win came first.
	rows, err := a.tx.QueryContext(ctx, `SELECT c.kind, c.requested_amount,
			CASE WHEN w.id IS NULL THEN 0 ELSE 1 END, COALESCE(w.requested_amount, 0), COALESCE(r.requested_amount, 0)
		FROM payhook_ledger_postings c
		LEFT JOIN payhook_ledger_postings w ON w.reverses_id = c.id AND w.kind = 'chargeback_won'
			AND substr(w.fact_key, 1, 15) = 'chargeback_won:' AND c.kind = 'chargeback'
		LEFT JOIN payhook_ledger_postings r ON r.reverses_id = c.id AND r.kind = 'chargeback_won'
			AND substr(r.fact_key, 1, 19) = 'chargeback_reverse:' AND c.kind = 'chargeback'
		WHERE c.source = $1 AND c.payment_ref = $2 AND c.kind IN ('refund', 'refund_failed', 'chargeback')
		ORDER BY c.id`,
		a.source, p.Ref)
	if err != nil {
		return money{}, fmt.Errorf("read the postings of payment %s: %w", p.Ref, err)
	}
	defer rows.Close()
	var m money
	for rows.Next() {
		var kind string
		var requested int64
		var won int
		var givenBack, reversal int64
		if err := rows.Scan(&kind, &requested, &won, &givenBack, &reversal); err != nil {
			return money{}, fmt.Errorf("read the postings of payment %s: %w", p.Ref, err)
		}
		if reversal > 0 {
			givenBack = min(givenBack, reversal)
		}
		what := "refunds of payment " + p.Ref
		switch {
		case kind == "refund":
			m.Refunds, err = add(what, m.Refunds, requested)
		case kind == "refund_failed":
			m.Refunds, err = add(what, m.Refunds, -requested)
		case won == 0:
			m.Open++
			m.Disputed, err = add("chargebacks of payment "+p.Ref, m.Disputed, requested)
		case givenBack < requested:
			// Won, but the win gave back less than the chargeback took.
			m.Disputed, err = add("chargebacks of payment "+p.Ref, m.Disputed, requested-givenBack)
		}
		if err != nil {
			return money{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return money{}, fmt.Errorf("read the postings of payment %s: %w", p.Ref, err)
	}
	return m, nil
}

// move posts the fact key of the locked fiat payment p once, taking p's
// money to next. The posting's amount is the change of what p keeps (what
// its entries move on provider_receivable, 0 when nothing moves) and
// requested the amount the fact names. Only when the posting is inserted
// does it write the entries and store p's new state; it reports whether
// it did.
func (a *applier) move(ctx context.Context, p *payment, key, kind string, reverses, requested int64, next money) (bool, error) {
	delta := next.kept(p.Amount) - p.kept(p.Amount)
	_, inserted, err := a.postEntries(ctx, key, kind, p.Ref, reverses, delta, requested, p.Currency, AccountReceivable, AccountRevenue)
	if err != nil || !inserted {
		return false, err
	}
	_, err = a.tx.ExecContext(ctx, `UPDATE payhook_payments SET refunded_amount = $2, status = $3, updated_at = $4
		WHERE id = $1`, p.ID, next.refunded(p.Amount), next.status(p.Amount), a.t(a.tx.now))
	if err != nil {
		return false, fmt.Errorf("update payment %s: %w", p.Ref, err)
	}
	p.money = next
	return true, nil
}

// captured places a fiat payment and posts its capture once. The first
// capture decides the amount and currency: a later snapshot that disagrees
// is applied with the stored row and raises AlertPaymentMismatch. The
// order id is filled in the first time a snapshot knows it, and the call
// that inserts the payment or fills its order id pays the order. A zero
// amount (a 100% discount) stores the payment and pays its order with no
// posting. It returns nil (and no error) when ref is a crypto payment:
// nothing to do.
func (a *applier) captured(ctx context.Context, pay Payment) (*payment, error) {
	// A row comes back when it is inserted, or when this snapshot is the
	// first to know the order of a payment stored without one.
	var id int64
	// On PostgreSQL the row says whether it was inserted (xmax is 0 only
	// in a row version no transaction has locked or updated: a new one).
	// A payment inserted now is locked by the insert and has no postings
	// (every fact that posts on a payment needs its row first), so it is
	// not locked and summed again. SQLite's statements cost no round trip:
	// it always does.
	fresh := "FALSE"
	if a.tx.db.Engine == store.Postgres {
		fresh = "xmax = 0"
	}
	var inserted bool
	err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_payments
		(source, ref, kind, order_id, amount, currency, status, refunded_amount, captured_at, created_at, updated_at)
		VALUES ($1, $2, 'fiat', $3, $4, $5, 'succeeded', 0, $6, $7, $7)
		ON CONFLICT (source, ref) DO UPDATE SET order_id = excluded.order_id, updated_at = excluded.updated_at
			WHERE payhook_payments.order_id = '' AND excluded.order_id <> '' AND payhook_payments.kind = 'fiat'
		RETURNING id, `+fresh,
		a.source, pay.Ref, pay.OrderID, pay.Amount, pay.Currency, a.t(pay.CapturedAt), a.t(a.tx.now)).Scan(&id, &inserted)
	orderNew := err == nil && pay.OrderID != ""
	// A capture of nothing posts nothing: its insert (or the snapshot that
	// fills its order) tells it succeeded, once by the fact's id.
	succeeded := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("insert payment %s: %w", pay.Ref, err)
	}
	var p *payment
	if inserted {
		p = &payment{ID: id, Ref: pay.Ref, Kind: "fiat", Amount: pay.Amount, Currency: pay.Currency}
		if a.locked == nil {
			a.locked = map[string]bool{}
		}
		a.locked[pay.Ref] = true
	} else if p, err = a.lockPayment(ctx, pay.Ref); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("payment %s vanished after its insert", pay.Ref)
	}
	if p.Kind != "fiat" {
		return nil, a.kindMismatch(ctx, pay.Ref, p.Kind, "capture")
	}
	if p.Amount != pay.Amount || p.Currency != pay.Currency {
		seen := fmt.Sprintf("%d %s", pay.Amount, pay.Currency)
		if err := a.alert(ctx, AlertPaymentMismatch, pay.Ref, seen,
			fmt.Sprintf("payment %s is %d %s (its first capture); an event says %s; kept %d %s",
				pay.Ref, p.Amount, p.Currency, seen, p.Amount, p.Currency)); err != nil {
			return nil, err
		}
	}
	succeeded = succeeded && p.Amount == 0
	if p.Amount > 0 {
		_, inserted, err := a.postEntries(ctx, "capture:"+pay.Ref, "capture", pay.Ref, 0, p.Amount, p.Amount, p.Currency,
			AccountReceivable, AccountRevenue)
		if err != nil {
			return nil, err
		}
		succeeded = inserted
	}
	if succeeded {
		if err := a.emit(ctx, outbox.PaymentSucceeded, pay.Ref, pay.Ref, pay.CapturedAt,
			paymentData{Payment: pay.Ref, OrderID: pay.OrderID, Amount: p.Amount, Currency: p.Currency, At: pay.CapturedAt}); err != nil {
			return nil, err
		}
	}
	if orderNew {
		if err := a.payOrder(ctx, pay.OrderID, pay.Ref, true); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// place returns the locked fiat payment a refund or chargeback is about,
// placing it from pay when given; ErrNotSeenYet when it is unknown. It
// returns nil (and no error) when the payment is a crypto one, final: the
// fact changes nothing.
func (a *applier) place(ctx context.Context, what string, pay *Payment, ref string) (*payment, error) {
	if pay != nil {
		if ref != "" && pay.Ref != ref {
			return nil, malformed("%s: payment ref %q and the payment's ref %q differ", what, ref, pay.Ref)
		}
		p, err := a.lockPayment(ctx, pay.Ref)
		if err != nil || (p != nil && p.Kind != "fiat") {
			// Not even the snapshot's order is recorded on a final payment.
			if err == nil {
				err = a.kindMismatch(ctx, pay.Ref, p.Kind, what)
			}
			return nil, err
		}
		return a.captured(ctx, *pay)
	}
	p, err := a.lockPayment(ctx, ref)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%s: payment %s: %w", what, ref, ErrNotSeenYet)
	}
	if p.Kind != "fiat" {
		return nil, a.kindMismatch(ctx, ref, p.Kind, what)
	}
	return p, nil
}

// captureID is the id of p's capture posting, which refunds and
// chargebacks reverse; 0 for a payment of zero, which has none.
func (a *applier) captureID(ctx context.Context, p *payment) (int64, error) {
	if p.Amount == 0 {
		return 0, nil
	}
	id, _, _, err := a.posting(ctx, "capture:"+p.Ref)
	if err == nil && id == 0 {
		err = fmt.Errorf("payment %s has no capture posting", p.Ref)
	}
	return id, err
}

// kindMismatch makes an event about a payment stored as another kind a
// success with no change, and raises AlertPaymentKindMismatch once per
// what (the fact it tried).
func (a *applier) kindMismatch(ctx context.Context, ref, storedKind, what string) error {
	return a.alert(ctx, AlertPaymentKindMismatch, ref, what,
		fmt.Sprintf("%s: payment %s is a %s payment; nothing changed", what, ref, storedKind))
}

// PaymentView is one payment.
type PaymentView struct {
	// Source is the configured source the payment came through, and Ref
	// the provider's reference of it (unique per source: a Stripe
	// payment intent, a Paddle transaction, a crypto invoice).
	Source string `json:"source"`
	Ref    string `json:"ref"`
	Kind   string `json:"kind"` // fiat | crypto
	// OrderID is the application's order the payment pays, if known.
	OrderID string `json:"order_id,omitempty"`
	// Amount is what was captured, in minor units of Currency (upper-case
	// ISO 4217, or a crypto ticker).
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Status is one of PaymentStatuses.
	Status string `json:"status"`
	// RefundedAmount is what refunds (net of failed ones) took: never more
	// than Amount, however much was asked.
	RefundedAmount int64 `json:"refunded_amount"`
	// ChainRef is the on-chain reference of a crypto payment.
	ChainRef string `json:"chain_ref,omitempty"`
	// CapturedAt is when the provider captured it; CreatedAt and
	// UpdatedAt when payhook stored the row and last changed it.
	CapturedAt time.Time `json:"captured_at,omitzero"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

const paymentColumns = `source, ref, kind, order_id, amount, currency, status, refunded_amount,
	COALESCE(chain_ref, ''), captured_at, created_at, updated_at`

func scanPayment(row scanner) (PaymentView, error) {
	var v PaymentView
	err := row.Scan(&v.Source, &v.Ref, &v.Kind, &v.OrderID, &v.Amount, &v.Currency, &v.Status, &v.RefundedAmount,
		&v.ChainRef, store.ScanTime(&v.CapturedAt), store.ScanTime(&v.CreatedAt), store.ScanTime(&v.UpdatedAt))
	return v, err
}

// GetPayment returns the payment of source with the provider reference
// ref, or an error wrapping payhook.ErrNotFound.
func GetPayment(ctx context.Context, db *store.DB, source, ref string) (*PaymentView, error) {
	v, err := scanPayment(db.SQL.QueryRowContext(ctx, `SELECT `+paymentColumns+` FROM payhook_payments
		WHERE source = $1 AND ref = $2`, source, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("payment %s of %s: %w", ref, source, payhook.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get payment %s of %s: %w", ref, source, err)
	}
	return &v, nil
}

// PaymentFilter selects payments for ListPayments. Zero fields match
// everything.
type PaymentFilter struct {
	Source  string
	Kind    string
	Status  string
	OrderID string
	// CreatedFrom, if set, keeps the payments payhook created at or
	// after it.
	CreatedFrom time.Time
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListPayments returns matching payments, newest first.
func ListPayments(ctx context.Context, db *store.DB, f PaymentFilter) ([]PaymentView, error) {
	var q query
	if f.Source != "" {
		q.where("source = $%d", f.Source)
	}
	if f.Kind != "" {
		q.where("kind = $%d", f.Kind)
	}
	if f.Status != "" {
		q.where("status = $%d", f.Status)
	}
	if f.OrderID != "" {
		q.where("order_id = $%d", f.OrderID)
	}
	if !f.CreatedFrom.IsZero() {
		q.where("created_at >= $%d", db.TimeValue(f.CreatedFrom))
	}
	return list(ctx, db, "list payments", scanPayment,
		`SELECT `+paymentColumns+` FROM payhook_payments`+q.sql("id DESC", f.Limit), q.args...)
}

// PaymentStatuses lists the statuses a payment can have.
var PaymentStatuses = []string{"succeeded", "partially_refunded", "refunded", "charged_back", "settled", "rejected"}

// PaymentDetail is a payment with its ledger postings (oldest first): what
// the API, the CLI and the console show for one payment.
type PaymentDetail struct {
	PaymentView
	Postings []PostingView `json:"postings"`
}

// LookupPayment returns the payment with the provider reference ref, with
// its postings. With source empty it looks the reference up in every
// source: none is an error wrapping payhook.ErrNotFound, several an
// *AmbiguousError (wrapping payhook.ErrConflict).
func LookupPayment(ctx context.Context, db *store.DB, source, ref string) (*PaymentDetail, error) {
	if source == "" {
		s, err := onlySource(ctx, db, "payment", "payhook_payments", "ref", ref)
		if err != nil {
			return nil, err
		}
		source = s
	}
	p, err := GetPayment(ctx, db, source, ref)
	if err != nil {
		return nil, err
	}
	ps, err := ListPostings(ctx, db, source, ref)
	if err != nil {
		return nil, err
	}
	return &PaymentDetail{PaymentView: *p, Postings: ps}, nil
}
