package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/store"
)

// compareBilling checks payhook's billing state for source against what
// the simulated provider says it must be after a run: every payment with
// its status and refunded amount, every order, every subscription, the
// balances per currency, a ledger that sums to zero, and for a reused
// crypto reference one credit and one alert. It returns the differences,
// none when payhook agrees.
//
// Which of two settlements sharing a chain reference is credited depends
// on which arrives first; either is right, as long as exactly one is.
// Times are compared to the second, the precision of some providers; a
// subscription's updated_at to the microsecond when payhook has it so.
func compareBilling(ctx context.Context, db *store.DB, source string, exp sim.Expected) ([]string, error) {
	var diffs []string
	diff := func(format string, a ...any) { diffs = append(diffs, fmt.Sprintf(format, a...)) }

	for _, p := range exp.Payments {
		got, err := billing.GetPayment(ctx, db, source, p.ID)
		if errors.Is(err, payhook.ErrNotFound) {
			diff("payment %s: missing", p.ID)
			continue
		} else if err != nil {
			return nil, err
		}
		if got.Status != p.Status || got.RefundedAmount != p.RefundedAmount || got.Amount != p.Amount ||
			got.Currency != p.Currency || got.OrderID != p.OrderID {
			diff("payment %s: %s %d %s refunded %d order %s; provider: %s %d %s refunded %d order %s", p.ID,
				got.Status, got.Amount, got.Currency, got.RefundedAmount, got.OrderID,
				p.Status, p.Amount, p.Currency, p.RefundedAmount, p.OrderID)
		}
	}

	// Crypto: credited invoices are settled, the others rejected; a reused
	// reference may have been won by either of its two invoices.
	orders := map[string]sim.ExpectedOrder{}
	for _, o := range exp.Orders {
		orders[o.ID] = o
	}
	byRef := map[string][]sim.ExpectedInvoice{}
	for _, inv := range exp.Invoices {
		byRef[inv.ChainRef] = append(byRef[inv.ChainRef], inv)
	}
	wantBalance := map[string]int64{}
	for cur, n := range exp.Balances {
		wantBalance[cur] = n
	}
	for ref, invs := range byRef {
		credited := 0
		for _, inv := range invs {
			got, err := billing.GetPayment(ctx, db, source, inv.ID)
			if errors.Is(err, payhook.ErrNotFound) {
				diff("crypto invoice %s: missing", inv.ID)
				continue
			} else if err != nil {
				return nil, err
			}
			if got.Status == "settled" {
				credited++
				if !inv.Credited { // payhook chose the other invoice of the pair
					wantBalance[inv.Currency] += inv.Amount
					orders[inv.OrderID] = sim.ExpectedOrder{ID: inv.OrderID, Status: "paid", PaidBy: inv.ID}
				}
			} else if inv.Credited {
				wantBalance[inv.Currency] -= inv.Amount
				orders[inv.OrderID] = sim.ExpectedOrder{ID: inv.OrderID, Status: "pending"}
			}
		}
		if credited != 1 {
			diff("chain reference %s: credited %d times, want once", ref, credited)
		}
		if len(invs) > 1 {
			alerts, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: billing.AlertCryptoReferenceReused})
			if err != nil {
				return nil, err
			}
			n := 0
			for _, a := range alerts {
				if a.Subject == ref {
					n++
				}
			}
			if n != 1 {
				diff("chain reference %s reused: %d alerts, want 1", ref, n)
			}
		}
	}

	for _, o := range orders {
		got, err := billing.GetOrder(ctx, db, source, o.ID)
		if errors.Is(err, payhook.ErrNotFound) {
			diff("order %s: missing", o.ID)
			continue
		} else if err != nil {
			return nil, err
		}
		if got.Status != o.Status || (o.Status == "paid" && got.PaidBy != o.PaidBy) {
			diff("order %s: %s by %q; provider: %s by %q", o.ID, got.Status, got.PaidBy, o.Status, o.PaidBy)
		}
	}

	for _, s := range exp.Subscriptions {
		got, err := billing.GetSubscription(ctx, db, source, s.ID)
		if errors.Is(err, payhook.ErrNotFound) {
			diff("subscription %s: missing", s.ID)
			continue
		} else if err != nil {
			return nil, err
		}
		endedOK := (s.Status == "ended") == !got.EndedAt.IsZero()
		// The state payhook kept is the provider's last one: its updated_at
		// to the microsecond (what databases keep; the sim's Stripe API
		// gives updated_at_ns), or to the second where payhook had only
		// whole seconds (Stripe payloads).
		version := s.UpdatedAt.Truncate(time.Microsecond)
		if got.ProviderUpdatedAt.Equal(got.ProviderUpdatedAt.Truncate(time.Second)) {
			version = s.UpdatedAt.Truncate(time.Second)
		}
		if got.Status != s.Status || got.Plan != s.Plan || got.Customer != s.Customer || !endedOK ||
			!got.CurrentPeriodEnd.Truncate(time.Second).Equal(s.CurrentPeriodEnd.Truncate(time.Second)) ||
			!got.ProviderUpdatedAt.Equal(version) {
			diff("subscription %s: %s %s %s until %s ended %v as of %s; provider: %s %s %s until %s as of %s", s.ID,
				got.Status, got.Plan, got.Customer, got.CurrentPeriodEnd, !got.EndedAt.IsZero(), got.ProviderUpdatedAt,
				s.Status, s.Plan, s.Customer, s.CurrentPeriodEnd, s.UpdatedAt)
		}
	}

	balances, err := billing.Balances(ctx, db)
	if err != nil {
		return nil, err
	}
	for cur, accounts := range balances {
		var sum int64
		for _, n := range accounts {
			sum += n
		}
		if sum != 0 {
			diff("ledger %s: accounts sum to %d, not 0", cur, sum)
		}
	}
	for cur, want := range wantBalance {
		got := balances[cur][billing.AccountReceivable] + balances[cur][billing.AccountCryptoWallet]
		if got != want {
			diff("balance %s: %d kept; provider: %d", cur, got, want)
		}
	}
	return diffs, nil
}
