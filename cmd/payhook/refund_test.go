package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/sim"
)

// TestPaymentsRefund: payhook payments refund against the simulator, with
// serve receiving the webhooks: the same command twice refunds once, an
// over-refund is refused before any call, the refund's webhook completes
// the picture in billing, and bad flags change nothing.
func TestPaymentsRefund(t *testing.T) {
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		w := newReconcileWorld(t, engine, "billete", []string{"*"})
		co, err := w.p.CreateCheckout(sim.EnvTest, 1000, "eur", "ord_r1")
		if err != nil {
			t.Fatal(err)
		}
		pay, err := w.p.CompleteCheckout(sim.EnvTest, co.ID)
		if err != nil {
			t.Fatal(err)
		}
		refunded := func() (int64, int64) { // at the provider, in payhook
			t.Helper()
			pp, err := w.p.GetPayment(sim.EnvTest, pay.ID)
			if err != nil {
				t.Fatal(err)
			}
			var here int64 = -1
			if v, err := billing.GetPayment(context.Background(), w.db, w.source, pay.ID); err == nil {
				here = v.RefundedAmount
			}
			return pp.RefundedAmount, here
		}
		waitHere := func(want int64) {
			t.Helper()
			waitProgress(t, fmt.Sprintf("payhook's payment refunded %d", want), func() (bool, string) {
				_, here := refunded()
				return here == want, fmt.Sprint(here)
			})
		}
		waitHere(0)

		for _, tc := range []struct {
			name     string
			args     []string
			wantCode int
			wantErr  string
		}{
			{"no REF", nil, 2, "REF"},
			{"negative amount", []string{pay.ID, "--amount", "-5"}, 2, "positive"},
			{"zero amount", []string{pay.ID, "--amount", "0"}, 2, "positive"},
			{"unknown payment", []string{"pay_nope", "--amount", "5"}, 1, "not found"},
			{"more than the payment keeps", []string{pay.ID, "--amount", "1001"}, 2, "more than the 1000"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, _, errOut := run(t, w.env, append([]string{"payments", "refund"}, tc.args...)...)
				if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
					t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, tc.wantCode, tc.wantErr)
				}
				if at, _ := refunded(); at != 0 {
					t.Fatalf("refused, yet the provider refunded %d", at)
				}
			})
		}

		args := []string{"payments", "refund", pay.ID, "--amount", "300", "--reason", "requested_by_customer"}
		if code, out, errOut := run(t, w.env, args...); code != 0 || !strings.Contains(out, "refund-shop-"+pay.ID+"-1") {
			t.Fatalf("first refund: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if code, _, errOut := run(t, w.env, args...); code != 2 || !strings.Contains(errOut, "--again") {
			t.Fatalf("the same command again: exit %d, stderr %q; want a refusal naming --again", code, errOut)
		}
		if at, _ := refunded(); at != 300 {
			t.Fatalf("provider refunded %d, want 300 once", at)
		}
		waitHere(300) // the refund's webhook, through the normal path

		// All that is left, then nothing left.
		if code, out, errOut := run(t, w.env, "payments", "refund", pay.ID, "--json"); code != 0 || !strings.Contains(out, `"amount": 700`) {
			t.Fatalf("refund the rest: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		waitHere(1000)
		if code, _, errOut := run(t, w.env, "payments", "refund", pay.ID, "--again"); code != 2 || !strings.Contains(errOut, "nothing left") {
			t.Fatalf("refund a refunded payment: exit %d, stderr %q", code, errOut)
		}
		if at, _ := refunded(); at != 1000 {
			t.Fatalf("provider refunded %d, want 1000", at)
		}
	})
}
