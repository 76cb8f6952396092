package billing_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

// Every posting's amount is what its entries move on the receivable side,
// also when that is not the amount the fact names.
func TestPostingAmounts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 100, "USD")})
		apply(t, db, billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1"})
		apply(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 30, Currency: "USD"})
		apply(t, db, billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_1"})
		apply(t, db, billing.RefundFailed{PaymentRef: "pay_1", RefundRef: "re_1"})
		apply(t, db, billing.Settled{InvoiceRef: "inv_1", Amount: 500, Currency: "BTC", ChainRef: "tx_1", At: t0})
		ps, err := billing.ListPostings(ctx, db, src, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%s %+d/%d", p.FactKey, p.Amount, p.RequestedAmount))
		}
		want := []string{"capture:pay_1 +100/100", "chargeback:dp_1 -100/100", "refund:re_1 +0/30",
			"chargeback_won:dp_1 +70/100", "refund_failed:re_1 +30/30", "settle:inv_1 +500/500"}
		if !slices.Equal(got, want) {
			t.Fatalf("postings (key amount/requested):\n got %q\nwant %q", got, want)
		}
		if p := payment(t, db, "pay_1"); p.Status != "succeeded" || p.RefundedAmount != 0 {
			t.Fatalf("payment = %+v", p)
		}
		if k := kept(t, db, "USD"); k != 100 {
			t.Fatalf("kept = %d; want 100", k)
		}
		// checkLedger (at cleanup) checks amount = entries for every posting.
	})
}

// TestBalancesBeyondInt64: a ledger whose balance no longer fits an int64
// (about 9,224 captures of the largest amount) makes Balances fail on both
// engines (SQLite's SUM: integer overflow; PostgreSQL's CAST: bigint out
// of range), never a wrapped or rounded total.
func TestBalancesBeyondInt64(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", payhook.MaxAmount, "USD")})
		var posting int64
		if err := db.SQL.QueryRowContext(ctx, `SELECT id FROM payhook_ledger_postings WHERE fact_key = 'capture:pay_1'`).Scan(&posting); err != nil {
			t.Fatal(err)
		}
		// What 9,224 more such captures would add, written straight in.
		for range 10 {
			if _, err := db.SQL.ExecContext(ctx, `INSERT INTO payhook_ledger_entries (posting_id, account, currency, amount)
				VALUES ($1, 'provider_receivable', 'USD', $2), ($1, 'revenue', 'USD', $3)`,
				posting, int64(1e18), int64(-1e18)); err != nil {
				t.Fatal(err)
			}
		}
		bal, err := billing.Balances(ctx, db)
		if err == nil || !strings.Contains(err.Error(), "ledger balances") {
			t.Errorf("Balances = %v, %v; want an error", bal, err)
		}
		// Leave the ledger as billing wrote it for the cleanup's checks.
		if _, err := db.SQL.ExecContext(ctx, `DELETE FROM payhook_ledger_entries WHERE posting_id = $1 AND amount IN ($2, $3)`,
			posting, int64(1e18), int64(-1e18)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLedgerBalances(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 1000, "USD")},
			billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 300, Currency: "USD"},
			billing.Settled{InvoiceRef: "inv_1", Amount: 5, Currency: "BTC", ChainRef: "tx_1", At: t0})
		b, err := billing.LedgerBalances(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Currencies(); !slices.Equal(got, []string{"BTC", "USD"}) {
			t.Errorf("Currencies() = %v; want BTC, USD", got)
		}
		if u := b.Unbalanced(); len(u) != 0 {
			t.Errorf("Unbalanced() = %v; want none", u)
		}
		usd := b.Balances["USD"]
		if usd.Sum != 0 || usd.Accounts[billing.AccountReceivable] != 700 || usd.Accounts[billing.AccountRevenue] != -700 {
			t.Errorf("USD = %+v; want receivable 700, revenue -700, sum 0", usd)
		}
		if btc := b.Balances["BTC"]; btc.Sum != 0 || btc.Accounts[billing.AccountCryptoWallet] != 5 {
			t.Errorf("BTC = %+v; want wallet 5, sum 0", btc)
		}
		// Another source's money is in the whole ledger's balances, not in
		// the first source's.
		applySource(t, db, "other", billing.Captured{Payment: pay("pay_9", "", 50, "USD")})
		all, err := billing.Balances(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		own, err := billing.SourceBalances(ctx, db, src)
		if err != nil {
			t.Fatal(err)
		}
		if all["USD"][billing.AccountReceivable] != 750 || own["USD"][billing.AccountReceivable] != 700 ||
			own["USD"][billing.AccountRevenue] != -700 || own["BTC"][billing.AccountCryptoWallet] != 5 {
			t.Errorf("Balances = %v, SourceBalances(%q) = %v; want receivable 750 and 700", all, src, own)
		}
		broken := billing.BalancesView{Balances: map[string]billing.CurrencyBalance{
			"EUR": {Sum: 1}, "USD": {Sum: 0}, "BTC": {Sum: -1}}}
		if u := broken.Unbalanced(); !slices.Equal(u, []string{"BTC", "EUR"}) {
			t.Errorf("Unbalanced() = %v; want BTC, EUR", u)
		}
	})
}
