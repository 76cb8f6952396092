package mapping_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

// fixtureStep is one provider fixture delivered to billing, and what
// applying it must give when it is not applied.
type fixtureStep struct {
	file string
	// notSeenYet: the facts are about a payment not seen yet, retried later.
	notSeenYet bool
}

// fixtureState is what a story leaves: per payment ref its amount,
// refunded amount and status; per currency the provider receivable; per
// order who paid it; per subscription its status and end.
type fixtureState struct {
	Payments      map[string]string
	Receivable    map[string]int64
	Orders        map[string]string
	Subscriptions map[string]string
}

// The providers' own shapes, one payment's story after another, through
// mapping and billing on both engines: each event applied in its own
// transaction, then the whole story delivered again (duplicates change
// nothing).
func TestProviderFixtureStoriesApply(t *testing.T) {
	t.Parallel()
	stories := []struct {
		name  string
		steps []fixtureStep
		want  fixtureState
	}{
		{
			// 1099 captured, 100 refunded, a dispute of 1000 takes what is
			// left (999, not 1000), its win gives the 999 back.
			name: "stripe PaymentIntent: capture, partial refund, dispute, won",
			steps: []fixtureStep{
				{file: "stripe/payment_intent.succeeded.json"},
				{file: "stripe/charge.succeeded.json"},
				{file: "stripe/charge.refunded.json"},
				{file: "stripe/refund.created.json"},
				{file: "stripe/charge.dispute.created.inquiry.json"},
				{file: "stripe/charge.dispute.created.prevented.json"},
				{file: "stripe/charge.dispute.created.json"},
				{file: "stripe/charge.dispute.closed.won.json"},
			},
			want: fixtureState{
				Payments:   map[string]string{stripePI: "1099 USD refunded 100 partially_refunded"},
				Receivable: map[string]int64{"USD": 999},
				Orders:     map[string]string{"ord_3": "paid by " + stripePI},
			},
		},
		{
			// A payment of the Charges API (payment_intent null) is its
			// charge: captured, refunded (by refund.created and again in
			// charge.refunded), then disputed with nothing left to take.
			name: "stripe Charges API: capture, refund, dispute",
			steps: []fixtureStep{
				{file: "stripe/charge.succeeded.charges_api.json"},
				{file: "stripe/refund.created.charges_api.json"},
				{file: "stripe/charge.refunded.charges_api.json"},
				{file: "stripe/charge.dispute.funds_withdrawn.charges_api.json"},
			},
			want: fixtureState{
				Payments:   map[string]string{stripeCharge: "100 USD refunded 100 charged_back"},
				Receivable: map[string]int64{"USD": 0},
			},
		},
		{
			// All three carry the same provider time (whole seconds): the
			// end wins whatever the order, at the provider's ended_at.
			name: "stripe subscription: created, cancel at period end, deleted",
			steps: []fixtureStep{
				{file: "stripe/customer.subscription.deleted.json"},
				{file: "stripe/customer.subscription.created.json"},
				{file: "stripe/customer.subscription.updated.cancel_at_period_end.json"},
				{file: "stripe/checkout.session.completed.subscription.json"},
			},
			want: fixtureState{
				Orders:        map[string]string{"ord_2": "paid by " + stripeSub},
				Subscriptions: map[string]string{stripeSub: "ended at 2009-02-13T23:31:30Z"},
			},
		},
		{
			name: "stripe zero-total checkout pays its order",
			steps: []fixtureStep{
				{file: "stripe/checkout.session.completed.no_payment_required.json"},
				{file: "stripe/checkout.session.completed.json"}, // unpaid: nothing
			},
			want: fixtureState{
				Orders: map[string]string{"ord_4": "paid by cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY"},
			},
		},
		{
			name: "paddle: a paid transaction, a real zero-total one, and adjustments of a transaction not seen",
			steps: []fixtureStep{
				{file: "paddle/transaction.paid.json"},
				{file: "paddle/transaction.completed.json"},
				{file: "paddle/transaction.completed.zero_total.json"},
				{file: "paddle/adjustment.created.json"},
				{file: "paddle/adjustment.updated.approved.json", notSeenYet: true},
				{file: "paddle/adjustment.created.chargeback.json", notSeenYet: true},
				{file: "paddle/adjustment.created.chargeback_warning.json"},
				{file: "paddle/adjustment.created.credit.json"},
			},
			want: fixtureState{
				Payments: map[string]string{
					"txn_01hv8wptq8987qeep44cyrewp9": "65215 USD refunded 0 succeeded",
					"txn_01hywqfe6yxhxcsfb4ays8mqt3": "950 GBP refunded 0 succeeded",
					"txn_01hywqfervkjg6hkk035wy24gt": "0 GBP refunded 0 succeeded",
				},
				Receivable: map[string]int64{"USD": 65215, "GBP": 950},
				Orders:     map[string]string{"ord_p1": "paid by txn_01hv8wptq8987qeep44cyrewp9"},
			},
		},
		{
			name: "paddle subscription: created, updated, scheduled cancel, canceled",
			steps: []fixtureStep{
				{file: "paddle/subscription.updated.json"},
				{file: "paddle/subscription.canceled.json"},
				{file: "paddle/subscription.updated.scheduled_cancel.json"},
			},
			want: fixtureState{
				Subscriptions: map[string]string{"sub_01hv8x29kz0t586xy6zn1a62ny": "ended at 2024-04-12T11:24:54.868Z"},
			},
		},
	}
	for _, st := range stories {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				db := storetest.Migrated(t, dbURL)
				for round := range 2 {
					for _, step := range st.steps {
						err := applyFixture(ctx, t, db, step.file)
						switch {
						case step.notSeenYet && !errors.Is(err, billing.ErrNotSeenYet):
							t.Fatalf("round %d %s: %v; want not seen yet", round, step.file, err)
						case !step.notSeenYet && err != nil:
							t.Fatalf("round %d %s: %v", round, step.file, err)
						}
					}
					if got := readFixtureState(ctx, t, db); !reflect.DeepEqual(got, st.want) {
						t.Fatalf("round %d:\n got  %+v\n want %+v", round, got, st.want)
					}
				}
			})
		})
	}
}

// applyFixture maps a fixture and applies its facts in one transaction,
// rolled back on error.
func applyFixture(ctx context.Context, t *testing.T, db *store.DB, file string) error {
	t.Helper()
	provider, payload := readFixture(t, file)
	facts, err := mapping.Facts(provider, &payhook.Event{EventID: "evt_" + file, OccurredAt: occurred, Payload: payload})
	if err != nil || facts == nil {
		return err
	}
	tx, err := billing.Begin(ctx, db, occurred)
	if err != nil {
		t.Fatal(err)
	}
	if err := billing.Apply(ctx, tx, "src", facts); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func readFixtureState(ctx context.Context, t *testing.T, db *store.DB) fixtureState {
	t.Helper()
	var s fixtureState
	ps, err := billing.ListPayments(ctx, db, billing.PaymentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if s.Payments == nil {
			s.Payments = map[string]string{}
		}
		s.Payments[p.Ref] = fmtPayment(p)
	}
	bal, err := billing.Balances(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for cur, accounts := range bal {
		if s.Receivable == nil {
			s.Receivable = map[string]int64{}
		}
		s.Receivable[cur] = accounts[billing.AccountReceivable]
		var sum int64
		for _, n := range accounts {
			sum += n
		}
		if sum != 0 {
			t.Errorf("ledger: %s accounts sum to %d: %v", cur, sum, accounts)
		}
	}
	os, err := billing.ListOrders(ctx, db, billing.OrderFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range os {
		if s.Orders == nil {
			s.Orders = map[string]string{}
		}
		s.Orders[o.OrderID] = o.Status + " by " + o.PaidBy
		if o.Status != "paid" {
			s.Orders[o.OrderID] = o.Status
		}
	}
	subs, err := billing.ListSubscriptions(ctx, db, billing.SubscriptionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range subs {
		if s.Subscriptions == nil {
			s.Subscriptions = map[string]string{}
		}
		v := sub.Status
		if !sub.EndedAt.IsZero() {
			v += " at " + sub.EndedAt.UTC().Format(time.RFC3339Nano)
		}
		s.Subscriptions[sub.Ref] = v
	}
	return s
}

func fmtPayment(p billing.PaymentView) string {
	return fmt.Sprintf("%d %s refunded %d %s", p.Amount, p.Currency, p.RefundedAmount, p.Status)
}
