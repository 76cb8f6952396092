package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payhook/payhook/store"
)

// Ledger accounts. Every posting's entries sum to zero, so every currency
// sums to zero across all accounts.
const (
	// AccountReceivable is what the provider owes for fiat payments kept:
	// captures minus refunds and chargebacks.
	AccountReceivable = "provider_receivable"
	// AccountRevenue is credited by captures and settlements and debited
	// back by refunds and chargebacks.
	AccountRevenue = "revenue"
	// AccountCryptoWallet holds credited crypto settlements.
	AccountCryptoWallet = "crypto_wallet"
)

// post inserts the posting of one business fact unless it exists, and
// reports whether it did. The unique (source, fact_key) index decides.
// amount is what its entries will move on the receivable side (signed),
// requested the amount the fact names.
func (a *applier) post(ctx context.Context, key, kind, paymentRef string, reverses, amount, requested int64, currency string) (int64, bool, error) {
	var rev any
	if reverses != 0 {
		rev = reverses
	}
	var id int64
	err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_ledger_postings
		(source, fact_key, kind, payment_ref, reverses_id, amount, requested_amount, currency, posted_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (source, fact_key) DO NOTHING
		RETURNING id`, a.source, key, kind, paymentRef, rev, amount, requested, currency, a.t(a.tx.now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("post %s: %w", key, err)
	}
	a.out.Posted = append(a.out.Posted, key)
	return id, true, nil
}

// postEntries is post followed, when it inserts, by entries moving the
// posting's amount from credit to debit. On PostgreSQL it is one
// statement (a round trip less per movement), the entries inserted only
// with the posting the unique index let in.
func (a *applier) postEntries(ctx context.Context, key, kind, paymentRef string, reverses, amount, requested int64, currency, debit, credit string) (int64, bool, error) {
	if a.tx.db.Engine != store.Postgres {
		id, inserted, err := a.post(ctx, key, kind, paymentRef, reverses, amount, requested, currency)
		if err != nil || !inserted {
			return id, inserted, err
		}
		return id, true, a.entries(ctx, id, currency, debit, amount, credit)
	}
	var rev any
	if reverses != 0 {
		rev = reverses
	}
	var id int64
	err := a.tx.QueryRowContext(ctx, `WITH p AS (INSERT INTO payhook_ledger_postings
			(source, fact_key, kind, payment_ref, reverses_id, amount, requested_amount, currency, posted_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (source, fact_key) DO NOTHING
			RETURNING id),
		e AS (INSERT INTO payhook_ledger_entries (posting_id, account, currency, amount)
			SELECT p.id, v.account, $8, v.amount
			FROM p CROSS JOIN (VALUES (1, $10::text, $6::bigint), (2, $11::text, -$6::bigint)) AS v(n, account, amount)
			WHERE $6::bigint <> 0
			ORDER BY v.n)
		SELECT id FROM p`, a.source, key, kind, paymentRef, rev, amount, requested, currency, a.t(a.tx.now), debit, credit).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("post %s with its entries: %w", key, err)
	}
	a.out.Posted = append(a.out.Posted, key)
	return id, true, nil
}

// posting returns the id, payment and requested amount of the posting of
// key; id 0 if there is none.
func (a *applier) posting(ctx context.Context, key string) (id int64, paymentRef string, requested int64, err error) {
	err = a.tx.QueryRowContext(ctx, `SELECT id, payment_ref, requested_amount FROM payhook_ledger_postings
		WHERE source = $1 AND fact_key = $2`, a.source, key).Scan(&id, &paymentRef, &requested)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", 0, nil
	}
	if err != nil {
		return 0, "", 0, fmt.Errorf("find posting %s: %w", key, err)
	}
	return id, paymentRef, requested, nil
}

// entries writes +amount on debit and -amount on credit; nothing when
// amount is zero.
func (a *applier) entries(ctx context.Context, postingID int64, currency, debit string, amount int64, credit string) error {
	if amount == 0 {
		return nil
	}
	_, err := a.tx.ExecContext(ctx, `INSERT INTO payhook_ledger_entries (posting_id, account, currency, amount)
		VALUES ($1, $2, $3, $4), ($1, $5, $3, $6)`, postingID, debit, currency, amount, credit, -amount)
	if err != nil {
		return fmt.Errorf("write entries of posting %d: %w", postingID, err)
	}
	return nil
}

// Balances returns the balance of every account per currency:
// balances[currency][account], in minor units. Each currency's accounts
// sum to zero. The money kept in a currency is its provider_receivable
// plus its crypto_wallet (minus revenue, the same number). The database
// sums, with checked arithmetic: a balance beyond the int64 range (about
// 9,224 captures of payhook.MaxAmount in one currency) is an error ("ledger
// balances: ..."), never a wrapped total.
func Balances(ctx context.Context, db *store.DB) (map[string]map[string]int64, error) {
	return balances(ctx, db, `SELECT currency, account, CAST(COALESCE(SUM(amount), 0) AS BIGINT)
		FROM payhook_ledger_entries GROUP BY currency, account`)
}

// SourceBalances is Balances of the postings of source alone: each
// currency's accounts sum to zero there too, every posting balancing.
func SourceBalances(ctx context.Context, db *store.DB, source string) (map[string]map[string]int64, error) {
	return balances(ctx, db, `SELECT e.currency, e.account, CAST(COALESCE(SUM(e.amount), 0) AS BIGINT)
		FROM payhook_ledger_entries e JOIN payhook_ledger_postings p ON p.id = e.posting_id
		WHERE p.source = $1 GROUP BY e.currency, e.account`, source)
}

// balances runs query, which reads (currency, account, balance) rows,
// into Balances' map.
func balances(ctx context.Context, db *store.DB, query string, args ...any) (map[string]map[string]int64, error) {
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger balances: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for rows.Next() {
		var cur, account string
		var sum int64
		if err := rows.Scan(&cur, &account, &sum); err != nil {
			return nil, fmt.Errorf("ledger balances: %w", err)
		}
		if out[cur] == nil {
			out[cur] = map[string]int64{}
		}
		out[cur][account] = sum
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger balances: %w", err)
	}
	return out, nil
}

// PostingView is one ledger posting with its entries.
type PostingView struct {
	ID         int64  `json:"id"`
	Source     string `json:"source"`
	FactKey    string `json:"fact_key"`
	Kind       string `json:"kind"`
	PaymentRef string `json:"payment_ref"`
	// ReversesID is the posting this one reverses; 0 if none.
	ReversesID int64 `json:"reverses_id,omitempty"`
	// Amount is what the posting's entries move on the receivable side
	// (provider_receivable for fiat, crypto_wallet for crypto), signed:
	// positive for captures, settlements, failed refunds and won
	// chargebacks, negative for refunds and chargebacks, 0 when nothing
	// moves (a refund reported after its payment was charged back).
	Amount int64 `json:"amount"`
	// RequestedAmount is the amount the fact names, >= 0: the payment's for
	// a capture, settlement or chargeback, the refund's for a refund and
	// for its failure.
	RequestedAmount int64       `json:"requested_amount"`
	Currency        string      `json:"currency"`
	PostedAt        time.Time   `json:"posted_at"`
	Entries         []EntryView `json:"entries"`
}

// EntryView is one ledger entry: a signed amount on an account.
type EntryView struct {
	Account  string `json:"account"`
	Currency string `json:"currency"`
	Amount   int64  `json:"amount"`
}

// ListPostings returns the postings of source (all sources if empty) and,
// if paymentRef is given, of that payment only, oldest first, with their
// entries.
func ListPostings(ctx context.Context, db *store.DB, source, paymentRef string) ([]PostingView, error) {
	var q query
	if source != "" {
		q.where("p.source = $%d", source)
	}
	if paymentRef != "" {
		q.where("p.payment_ref = $%d", paymentRef)
	}
	where := ""
	if len(q.conds) > 0 {
		where = " WHERE " + strings.Join(q.conds, " AND ")
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT p.id, p.source, p.fact_key, p.kind, p.payment_ref,
		COALESCE(p.reverses_id, 0), p.amount, p.requested_amount, p.currency, p.posted_at,
		COALESCE(e.account, ''), COALESCE(e.currency, ''), COALESCE(e.amount, 0)
		FROM payhook_ledger_postings p LEFT JOIN payhook_ledger_entries e ON e.posting_id = p.id`+where+`
		ORDER BY p.id, e.id`, q.args...)
	if err != nil {
		return nil, fmt.Errorf("list postings: %w", err)
	}
	defer rows.Close()
	out := []PostingView{}
	for rows.Next() {
		var p PostingView
		var e EntryView
		if err := rows.Scan(&p.ID, &p.Source, &p.FactKey, &p.Kind, &p.PaymentRef, &p.ReversesID, &p.Amount,
			&p.RequestedAmount, &p.Currency, store.ScanTime(&p.PostedAt), &e.Account, &e.Currency, &e.Amount); err != nil {
			return nil, fmt.Errorf("list postings: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].ID != p.ID {
			p.Entries = []EntryView{}
			out = append(out, p)
		}
		if e.Account != "" {
			last := &out[len(out)-1]
			last.Entries = append(last.Entries, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list postings: %w", err)
	}
	return out, nil
}

// CurrencyBalance is the ledger of one currency: the balance of every
// account in minor units, and their sum, which is always 0 (a client can
// check it).
type CurrencyBalance struct {
	Accounts map[string]int64 `json:"accounts"`
	Sum      int64            `json:"sum"`
}

// BalancesView is the ledger's balances per currency, as the API, the CLI
// and the console show them.
type BalancesView struct {
	Balances map[string]CurrencyBalance `json:"balances"`
}

// Currencies returns the currencies, sorted.
func (b BalancesView) Currencies() []string {
	out := make([]string, 0, len(b.Balances))
	for c := range b.Balances {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Unbalanced returns the currencies whose accounts do not sum to zero
// (none, unless the ledger is broken), sorted.
func (b BalancesView) Unbalanced() []string {
	var out []string
	for _, c := range b.Currencies() {
		if b.Balances[c].Sum != 0 {
			out = append(out, c)
		}
	}
	return out
}

// LedgerBalances returns Balances as a view: each currency's accounts
// with their sum.
func LedgerBalances(ctx context.Context, db *store.DB) (BalancesView, error) {
	bal, err := Balances(ctx, db)
	if err != nil {
		return BalancesView{}, err
	}
	out := BalancesView{Balances: make(map[string]CurrencyBalance, len(bal))}
	for cur, accounts := range bal {
		var sum int64
		for _, v := range accounts {
			sum += v
		}
		out.Balances[cur] = CurrencyBalance{Accounts: accounts, Sum: sum}
	}
	return out, nil
}
