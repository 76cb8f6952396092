package mapping_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store/storetest"
)

// TestPaddleAdjustmentStoryInAnyOrder: Paddle's own adjustment shapes on
// one transaction of 65215: a refund of 100 (created pending_approval,
// then approved), a chargeback of the whole transaction (created
// approved, then marked reversed when won) and its chargeback_reverse,
// with a warning and a credit that move nothing, delivered in every order
// (an event about what is not seen yet waits, as the queue retries it),
// each twice: the transaction keeps 65115, refunded 100.
func TestPaddleAdjustmentStoryInAnyOrder(t *testing.T) {
	const txn = "txn_01hv8wptq8987qeep44cyrewp9"
	adjustment := func(file, id, status, total string) []byte {
		return editFixture(t, file, func(d map[string]any) {
			d["id"], d["transaction_id"], d["status"] = id, txn, status
			d["totals"].(map[string]any)["total"] = total
		})
	}
	_, paid := readFixture(t, "paddle/transaction.paid.json")
	fixed := [][]byte{
		paid,
		adjustment("paddle/adjustment.created.chargeback_warning.json", "adj_warn", "approved", "65215"),
		adjustment("paddle/adjustment.created.credit.json", "adj_credit", "approved", "300"),
	}
	moving := [][]byte{
		adjustment("paddle/adjustment.created.json", "adj_refund", "pending_approval", "100"),
		adjustment("paddle/adjustment.updated.approved.json", "adj_refund", "approved", "100"),
		adjustment("paddle/adjustment.created.chargeback.json", "adj_cb", "approved", "65215"),
		adjustment("paddle/adjustment.created.chargeback.json", "adj_cb", "reversed", "65215"),
		adjustment("paddle/adjustment.created.chargeback_reverse.json", "adj_cbr", "approved", "65215"),
	}
	var orders [][][]byte
	var perm func(rest, done [][]byte)
	perm = func(rest, done [][]byte) {
		if len(rest) == 0 {
			orders = append(orders, append(append([][]byte{}, fixed...), done...))
			return
		}
		for i := range rest {
			next := append(append([][]byte{}, rest[:i]...), rest[i+1:]...)
			perm(next, append(append([][]byte{}, done...), rest[i]))
		}
	}
	perm(moving, nil)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := storetest.Migrated(t, dbURL)
		for n, order := range orders {
			source := fmt.Sprintf("paddle_%d", n)
			// Each event delivered twice; one not seen yet goes to the end.
			queue := append(append([][]byte{}, order...), order...)
			for tries := 0; len(queue) > 0; tries++ {
				if tries > 100 {
					t.Fatalf("order %d: events never applied", n)
				}
				payload := queue[0]
				queue = queue[1:]
				facts, err := mapping.Facts("paddle", &payhook.Event{EventID: "evt", OccurredAt: occurred, Payload: payload})
				if err != nil {
					t.Fatal(err)
				}
				if facts == nil {
					continue
				}
				tx, err := billing.Begin(ctx, db, occurred)
				if err != nil {
					t.Fatal(err)
				}
				err = billing.Apply(ctx, tx, source, facts)
				if err != nil {
					tx.Rollback()
					if !errors.Is(err, billing.ErrNotSeenYet) {
						t.Fatalf("order %d: %v", n, err)
					}
					queue = append(queue, payload)
					continue
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			p, err := billing.GetPayment(ctx, db, source, txn)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmtPayment(*p); got != "65215 USD refunded 100 partially_refunded" {
				t.Errorf("order %d: %s; want 65215 USD refunded 100 partially_refunded", n, got)
			}
			bal, err := billing.SourceBalances(ctx, db, source)
			if err != nil {
				t.Fatal(err)
			}
			if got := bal["USD"][billing.AccountReceivable]; got != 65115 {
				t.Errorf("order %d: receivable %d; want 65115", n, got)
			}
		}
	})
}
