package refunds_test

import (
	"context"
	"errors"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/refunds"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/store"
)

// acceptingRefunder accepts every refund and records what it was asked.
type acceptingRefunder struct{ asked []adapter.RefundRequest }

func (a *acceptingRefunder) Refund(_ context.Context, r adapter.RefundRequest) (adapter.RefundResult, error) {
	a.asked = append(a.asked, r)
	return adapter.RefundResult{Ref: "re_" + r.Key, Status: "succeeded"}, nil
}

// applyFacts applies facts of source shop in their own transaction.
func applyFacts(t *testing.T, db *store.DB, facts ...billing.Fact) {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, db, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := billing.ApplyOutcome(ctx, tx, "shop", facts); err != nil {
		t.Fatal(errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRefundOnlyWhatThePaymentKeeps: the refund command asks the provider
// for no more than billing says the payment keeps. A crypto invoice is
// final (settled) or was never credited (rejected: its chain reference
// credits another invoice): nothing of it is refunded. A fiat payment's
// open chargebacks took their amount back already: refunding it too would
// pay the same money out twice. A won chargeback gave it back.
func TestRefundOnlyWhatThePaymentKeeps(t *testing.T) {
	t.Parallel()
	fiat := billing.Captured{Payment: billing.Payment{Ref: "pay_1", Amount: 1000, Currency: "EUR", CapturedAt: t0}}
	settle := func(inv, chain string) billing.Fact {
		return billing.Settled{InvoiceRef: inv, Amount: 1000, Currency: "BTC", ChainRef: chain, At: t0}
	}
	for _, tc := range []struct {
		name    string
		facts   [][]billing.Fact
		payment string
		amount  int64
		want    int64 // the amount asked of the provider; 0: refused before any call
	}{
		{name: "settled crypto invoice", facts: [][]billing.Fact{{settle("inv_1", "tx_1")}}, payment: "inv_1"},
		{name: "settled crypto invoice, an amount", facts: [][]billing.Fact{{settle("inv_1", "tx_1")}}, payment: "inv_1", amount: 10},
		{name: "rejected crypto invoice (chain reference reused)",
			facts: [][]billing.Fact{{settle("inv_1", "tx_1")}, {settle("inv_2", "tx_1")}}, payment: "inv_2"},
		{name: "charged back", facts: [][]billing.Fact{{fiat},
			{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1", At: t0}}}, payment: "pay_1"},
		{name: "charged back, an amount", facts: [][]billing.Fact{{fiat},
			{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1", At: t0}}}, payment: "pay_1", amount: 100},
		{name: "partly charged back, more than is left", facts: [][]billing.Fact{{fiat},
			{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1", Amount: 300, At: t0}}}, payment: "pay_1", amount: 701},
		{name: "partly charged back, what is left", facts: [][]billing.Fact{{fiat},
			{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1", Amount: 300, At: t0}}}, payment: "pay_1", want: 700},
		{name: "partly charged back and refunded", facts: [][]billing.Fact{{fiat},
			{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1", Amount: 300, At: t0}},
			{billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 200, Currency: "EUR", At: t0}}},
			payment: "pay_1", want: 500},
		{name: "charged back and won", facts: [][]billing.Fact{{fiat},
			{billing.ChargedBack{PaymentRef: "pay_1", DisputeRef: "dp_1", At: t0}},
			{billing.ChargebackWon{PaymentRef: "pay_1", DisputeRef: "dp_1", At: t0}}}, payment: "pay_1", want: 1000},
		{name: "not charged back", facts: [][]billing.Fact{{fiat}}, payment: "pay_1", amount: 1000, want: 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				db := openDB(t, dbURL)
				for _, facts := range tc.facts {
					applyFacts(t, db, facts...)
				}
				var provider acceptingRefunder
				_, err := refunds.Refund(context.Background(), refunds.Config{DB: db, Refunder: &provider},
					refunds.Ask{Source: "shop", Payment: tc.payment, Amount: tc.amount})
				if tc.want == 0 {
					if !errors.Is(err, payhook.ErrInvalid) || len(provider.asked) != 0 {
						t.Fatalf("refund of %s: %v, the provider asked %v; want refused (ErrInvalid) before any call", tc.payment, err, provider.asked)
					}
					return
				}
				if err != nil || len(provider.asked) != 1 || provider.asked[0].Amount != tc.want {
					t.Fatalf("refund of %s: %v, the provider asked %v; want one refund of %d", tc.payment, err, provider.asked, tc.want)
				}
			})
		})
	}
}

// TestRefundCountsCompletedRequests: what a payment of 1000 keeps after a
// request of 400 the provider answered is less billing's refunds and the
// completed requests whose refunds billing has not posted yet, each once:
//   - the request's webhook came: counted once, 600 left to refund;
//   - a refund of 600 made elsewhere (the provider's dashboard) came, the
//     request's webhook not yet: refunded in full, a third refund refused
//     before any call. Counting the larger of the two (600) instead of
//     both left 400 to refund: 1,300 paid out of 1,000.
func TestRefundCountsCompletedRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		elsewhere bool  // the refund that came is one made elsewhere, not the request's
		want      int64 // the amount asked of the provider for the rest; 0: refused before any call
	}{
		{name: "the request's webhook came", want: 600},
		{name: "a refund made elsewhere came", elsewhere: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				db := openDB(t, dbURL)
				applyFacts(t, db, billing.Captured{Payment: billing.Payment{Ref: "pay_1", Amount: 1000, Currency: "EUR", CapturedAt: t0}})
				var provider acceptingRefunder
				cfg := refunds.Config{DB: db, Refunder: &provider}
				ctx := context.Background()
				r, err := refunds.Refund(ctx, cfg, refunds.Ask{Source: "shop", Payment: "pay_1", Amount: 400})
				if err != nil || r.ProviderRef == "" {
					t.Fatalf("first refund: %+v, %v", r, err)
				}
				came := billing.Refunded{PaymentRef: "pay_1", RefundRef: r.ProviderRef, Amount: 400, Currency: "EUR", At: t0}
				if tc.elsewhere {
					came.RefundRef, came.Amount = "re_dashboard", 600
				}
				applyFacts(t, db, came)
				_, err = refunds.Refund(ctx, cfg, refunds.Ask{Source: "shop", Payment: "pay_1"})
				if tc.want == 0 {
					if !errors.Is(err, payhook.ErrInvalid) || len(provider.asked) != 1 {
						t.Fatalf("the rest: %v, the provider asked %v; want refused (ErrInvalid) before any call", err, provider.asked)
					}
					return
				}
				if err != nil || len(provider.asked) != 2 || provider.asked[1].Amount != tc.want {
					t.Fatalf("the rest: %v, the provider asked %v; want a refund of %d", err, provider.asked, tc.want)
				}
			})
		})
	}
}
