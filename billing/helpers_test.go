package billing_test

import (
	"context"
	"errors"
	"github.com/payhook/payhook/store/storetest"
	"sort"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/store"
)

const src = "src"

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func pay(ref, orderID string, amount int64, currency string) billing.Payment {
	return billing.Payment{Ref: ref, OrderID: orderID, Amount: amount, Currency: currency, CapturedAt: t0.Add(-time.Hour)}
}

// openDB opens and migrates the database, and checks the ledger when the
// test ends.
func openDB(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	db := storetest.Migrated(t, dbURL)
	t.Cleanup(func() { checkLedger(t, db) })
	return db
}

// applyTx applies facts in their own transaction, committed on success
// and rolled back on error.
func applyTx(ctx context.Context, db *store.DB, facts ...billing.Fact) (billing.Outcome, error) {
	tx, err := billing.Begin(ctx, db, t0)
	if err != nil {
		return billing.Outcome{}, err
	}
	out, err := billing.ApplyOutcome(ctx, tx, src, facts)
	if err != nil {
		return out, errors.Join(err, tx.Rollback())
	}
	return out, tx.Commit()
}

// applySource applies facts of source in their own transaction.
func applySource(t *testing.T, db *store.DB, source string, facts ...billing.Fact) billing.Outcome {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, db, t0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := billing.ApplyOutcome(ctx, tx, source, facts)
	if err != nil {
		t.Fatalf("apply %s %#v: %v", source, facts, errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return out
}

func apply(t *testing.T, db *store.DB, facts ...billing.Fact) billing.Outcome {
	t.Helper()
	out, err := applyTx(context.Background(), db, facts...)
	if err != nil {
		t.Fatalf("apply %#v: %v", facts, err)
	}
	return out
}

// checkLedger checks that every posting's entries and every currency's
// entries sum to zero, that each posting's amount is what its entries move
// on the receivable side (provider_receivable or crypto_wallet) in its
// currency, and that each payment's money in the ledger is what its row
// says it keeps.
func checkLedger(t *testing.T, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.SQL.QueryContext(ctx, `SELECT posting_id, CAST(SUM(amount) AS BIGINT) FROM payhook_ledger_entries
		GROUP BY posting_id HAVING SUM(amount) <> 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, sum int64
		if err := rows.Scan(&id, &sum); err != nil {
			t.Fatalf("ledger: read the sums of postings: %v", err)
		}
		t.Errorf("ledger: posting %d's entries sum to %d", id, sum)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("ledger: read the sums of postings: %v", err)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range postings(t, db, "", "") {
		var moved int64
		for _, e := range p.Entries {
			if e.Currency != p.Currency {
				t.Errorf("ledger: posting %s (%s) has an entry in %s", p.FactKey, p.Currency, e.Currency)
			}
			if e.Account == billing.AccountReceivable || e.Account == billing.AccountCryptoWallet {
				moved += e.Amount
			}
		}
		if moved != p.Amount {
			t.Errorf("ledger: posting %s says amount %d; its entries move %d", p.FactKey, p.Amount, moved)
		}
		if p.RequestedAmount < 0 {
			t.Errorf("ledger: posting %s requests %d", p.FactKey, p.RequestedAmount)
		}
	}
	for cur, accounts := range balances(t, db) {
		var sum int64
		for _, v := range accounts {
			sum += v
		}
		if sum != 0 {
			t.Errorf("ledger: %s sums to %d: %v", cur, sum, accounts)
		}
	}
	pays, err := billing.ListPayments(ctx, db, billing.PaymentFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pays {
		var got int64
		if err := db.SQL.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(e.amount), 0) AS BIGINT)
			FROM payhook_ledger_entries e JOIN payhook_ledger_postings p ON p.id = e.posting_id
			WHERE p.source = $1 AND p.payment_ref = $2 AND e.account IN ('provider_receivable', 'crypto_wallet')`,
			p.Source, p.Ref).Scan(&got); err != nil {
			t.Fatal(err)
		}
		want := p.Amount - p.RefundedAmount
		switch p.Status {
		case "charged_back":
			// What the disputes still hold: what each took, less what its
			// win gave back, at most what the reversal bound to it names.
			var disputed int64
			if err := db.SQL.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(c.requested_amount - CASE
					WHEN COALESCE(r.requested_amount, 0) > 0 AND r.requested_amount < COALESCE(w.requested_amount, 0)
					THEN r.requested_amount ELSE COALESCE(w.requested_amount, 0) END), 0) AS BIGINT)
				FROM payhook_ledger_postings c LEFT JOIN payhook_ledger_postings w ON w.reverses_id = c.id
					AND w.kind = 'chargeback_won' AND substr(w.fact_key, 1, 15) = 'chargeback_won:'
				LEFT JOIN payhook_ledger_postings r ON r.reverses_id = c.id
					AND r.kind = 'chargeback_won' AND substr(r.fact_key, 1, 19) = 'chargeback_reverse:'
				WHERE c.source = $1 AND c.payment_ref = $2 AND c.kind = 'chargeback'`,
				p.Source, p.Ref).Scan(&disputed); err != nil {
				t.Fatal(err)
			}
			want = max(0, want-disputed)
		case "rejected":
			want = 0
		case "settled":
			want = p.Amount
		}
		if got != want {
			t.Errorf("ledger: payment %s (%s, %d, refunded %d) keeps %d in the ledger; want %d",
				p.Ref, p.Status, p.Amount, p.RefundedAmount, got, want)
		}
	}
}

func payment(t *testing.T, db *store.DB, ref string) billing.PaymentView {
	t.Helper()
	p, err := billing.GetPayment(context.Background(), db, src, ref)
	if err != nil {
		t.Fatal(err)
	}
	return *p
}

func order(t *testing.T, db *store.DB, id string) billing.OrderView {
	t.Helper()
	o, err := billing.GetOrder(context.Background(), db, src, id)
	if err != nil {
		t.Fatal(err)
	}
	return *o
}

func subscription(t *testing.T, db *store.DB, ref string) billing.SubscriptionView {
	t.Helper()
	s, err := billing.GetSubscription(context.Background(), db, src, ref)
	if err != nil {
		t.Fatal(err)
	}
	return *s
}

// postings returns the postings of source and paymentRef (every one if
// empty), oldest first.
func postings(t *testing.T, db *store.DB, source, paymentRef string) []billing.PostingView {
	t.Helper()
	ps, err := billing.ListPostings(context.Background(), db, source, paymentRef)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func balances(t *testing.T, db *store.DB) map[string]map[string]int64 {
	t.Helper()
	bal, err := billing.Balances(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return bal
}

// postingKeys returns the fact keys posted, sorted.
func postingKeys(t *testing.T, db *store.DB) []string {
	t.Helper()
	keys := []string{}
	for _, p := range postings(t, db, "", "") {
		keys = append(keys, p.FactKey)
	}
	sort.Strings(keys)
	return keys
}

// kept returns the money kept in currency: receivable plus wallet.
func kept(t *testing.T, db *store.DB, currency string) int64 {
	t.Helper()
	bal := balances(t, db)
	return bal[currency][billing.AccountReceivable] + bal[currency][billing.AccountCryptoWallet]
}

func alerts(t *testing.T, db *store.DB) []billing.AlertView {
	t.Helper()
	return listAlerts(t, db, billing.AlertFilter{})
}

func listAlerts(t *testing.T, db *store.DB, f billing.AlertFilter) []billing.AlertView {
	t.Helper()
	as, err := billing.ListAlerts(context.Background(), db, f)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// raise raises an alert at now in its own transaction.
func raise(t *testing.T, db *store.DB, kind, subject, message string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, db, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := billing.RaiseAlert(ctx, tx, kind, subject, message); err != nil {
		t.Fatal(errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
