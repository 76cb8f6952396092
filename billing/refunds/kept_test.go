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

// TestRefundCountsBothAnUnpostedRequestAndARefundMadeElsewhere: what a
// payment keeps is less both what billing's refunds took and what
// payhook's completed requests took whose webhooks have not arrived yet.
// A request of 400 answered by the provider, its webhook still on its way,
// and a refund of 600 made elsewhere (the provider's dashboard) whose
// webhook came: the payment of 1000 is refunded in full, and a third
// refund must be refused before any call. Counting the larger of the two
// (600) instead of both left 400 to refund: 1,300 paid out of 1,000.
func TestRefundCountsBothAnUnpostedRequestAndARefundMadeElsewhere(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		db := openDB(t, dbURL)
		applyFacts(t, db, billing.Captured{Payment: billing.Payment{Ref: "pay_1", Amount: 1000, Currency: "EUR", CapturedAt: t0}})
		var provider acceptingRefunder
		cfg := refunds.Config{DB: db, Refunder: &provider}
		ctx := context.Background()
		if _, err := refunds.Refund(ctx, cfg, refunds.Ask{Source: "shop", Payment: "pay_1", Amount: 400}); err != nil {
			t.Fatal(err)
		}
		// A refund made at the provider's dashboard, told by its webhook;
		// the request's own webhook has not arrived.
		applyFacts(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_dashboard", Amount: 600, Currency: "EUR", At: t0})
		_, err := refunds.Refund(ctx, cfg, refunds.Ask{Source: "shop", Payment: "pay_1", Amount: 300})
		if !errors.Is(err, payhook.ErrInvalid) || len(provider.asked) != 1 {
			t.Fatalf("third refund: %v, the provider asked %v; want refused (ErrInvalid) before any call: 400 + 600 of 1000 are refunded", err, provider.asked)
		}
	})
}

// TestRefundCountsAPostedRequestOnce: a completed request whose webhook
// came is counted once, in billing's refunds: the rest of the payment can
// be refunded.
func TestRefundCountsAPostedRequestOnce(t *testing.T) {
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
		// The request's own webhook.
		applyFacts(t, db, billing.Refunded{PaymentRef: "pay_1", RefundRef: r.ProviderRef, Amount: 400, Currency: "EUR", At: t0})
		if _, err := refunds.Refund(ctx, cfg, refunds.Ask{Source: "shop", Payment: "pay_1"}); err != nil ||
			len(provider.asked) != 2 || provider.asked[1].Amount != 600 {
			t.Fatalf("the rest: %v, the provider asked %v; want a refund of 600", err, provider.asked)
		}
	})
}
