package billing

import (
	"context"
	"fmt"
)

func (a *applier) orderPaid(ctx context.Context, f OrderPaid) error {
	return a.payOrder(ctx, f.OrderID, f.PaymentRef)
}

// payOrder creates the order of the source as pending if unknown, then
// marks it paid by paidBy only if pending. The first time paidBy tries to
// pay an order paid by another payment, it raises AlertOrderPaidTwice.
func (a *applier) payOrder(ctx context.Context, orderID, paidBy string) error {
	ok, other, err := a.claimOrder(ctx, orderID, paidBy)
	if err != nil || ok || other == paidBy {
		return err
	}
	return a.alert(ctx, AlertOrderPaidTwice, orderID, paidBy,
		fmt.Sprintf("order %s is paid by %s; payment %s paid it again", orderID, other, paidBy))
}

// claimOrder marks the order of the source paid by paidBy if pending; else
// it returns who paid it.
func (a *applier) claimOrder(ctx context.Context, orderID, paidBy string) (claimed bool, paidByBefore string, err error) {
	if err := a.heardOfOrder(ctx, orderID); err != nil {
		return false, "", err
	}
	res, err := a.tx.ExecContext(ctx, `UPDATE payhook_orders SET status = 'paid', paid_by = $3, paid_at = $4
		WHERE source = $1 AND order_id = $2 AND status = 'pending'`, a.source, orderID, paidBy, a.t(a.now))
	if err != nil {
		return false, "", fmt.Errorf("mark order %s paid: %w", orderID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, "", fmt.Errorf("mark order %s paid: %w", orderID, err)
	} else if n == 1 {
		a.out.OrdersPaid = append(a.out.OrdersPaid, orderID)
		return true, paidBy, nil
	}
	err = a.tx.QueryRowContext(ctx, `SELECT paid_by FROM payhook_orders WHERE source = $1 AND order_id = $2`,
		a.source, orderID).Scan(&paidByBefore)
	if err != nil {
		return false, "", fmt.Errorf("read order %s: %w", orderID, err)
	}
	return false, paidByBefore, nil
}

// heardOfOrder creates the order of the source as pending unless it exists.
func (a *applier) heardOfOrder(ctx context.Context, orderID string) error {
	if _, err := a.tx.ExecContext(ctx, `INSERT INTO payhook_orders (source, order_id, status, paid_by, created_at)
		VALUES ($1, $2, 'pending', '', $3) ON CONFLICT (source, order_id) DO NOTHING`, a.source, orderID, a.t(a.now)); err != nil {
		return fmt.Errorf("insert order %s: %w", orderID, err)
	}
	return nil
}
