package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/payhook/payhook/outbox"
)

func (a *applier) settled(ctx context.Context, f Settled) error {
	what := "settlement of invoice " + f.InvoiceRef
	insert := func(status string) (bool, error) {
		var id int64
		err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_payments
			(source, ref, kind, order_id, amount, currency, status, refunded_amount, chain_ref, captured_at, created_at, updated_at)
			VALUES ($1, $2, 'crypto', $3, $4, $5, $6, 0, $7, $8, $9, $9)
			ON CONFLICT DO NOTHING
			RETURNING id`, a.source, f.InvoiceRef, f.OrderID, f.Amount, f.Currency, status, f.ChainRef,
			a.t(f.At), a.t(a.tx.now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: insert payment: %w", what, err)
		}
		return true, nil
	}
	// Both unique indexes answer: (source, ref) for the same invoice again,
	// (source, chain_ref) of credited invoices for a reused reference.
	inserted, err := insert("settled")
	if err != nil {
		return err
	}
	if !inserted {
		var kind, chainRef, currency, status string
		var amount int64
		err := a.tx.QueryRowContext(ctx, `SELECT kind, COALESCE(chain_ref, ''), amount, currency, status FROM payhook_payments
			WHERE source = $1 AND ref = $2`, a.source, f.InvoiceRef).Scan(&kind, &chainRef, &amount, &currency, &status)
		switch {
		case err == nil:
			if kind != "crypto" {
				return a.kindMismatch(ctx, f.InvoiceRef, kind, "settlement with "+f.ChainRef)
			}
			if chainRef != f.ChainRef && status == "rejected" {
				// Rejected for a reference another invoice holds, then
				// settled with another: credited if that one is free, as
				// it would have been in the other order.
				settled, err := a.settleRejected(ctx, f)
				if err != nil {
					return err
				}
				if !settled {
					// Still rejected: the reference credits another
					// invoice. Settled meanwhile by another transaction
					// (the UPDATE waited for it): decide again on the row
					// as it is now.
					var now string
					if err := a.tx.QueryRowContext(ctx, `SELECT status FROM payhook_payments
						WHERE source = $1 AND ref = $2`, a.source, f.InvoiceRef).Scan(&now); err != nil {
						return fmt.Errorf("%s: read payment: %w", what, err)
					}
					if now == "rejected" {
						return a.reused(ctx, f)
					}
					return a.settled(ctx, f)
				}
				inserted = true
				break
			}
			if chainRef != f.ChainRef {
				return a.alert(ctx, AlertCryptoSecondReference, f.InvoiceRef, f.ChainRef,
					fmt.Sprintf("invoice %s settled with %s, then again with %s; credited at most once", f.InvoiceRef, chainRef, f.ChainRef))
			}
			if amount != f.Amount || currency != f.Currency {
				// The same settlement again, saying another amount: the
				// first stands, as for a fiat capture.
				seen := fmt.Sprintf("%d %s", f.Amount, f.Currency)
				return a.alert(ctx, AlertPaymentMismatch, f.InvoiceRef, seen,
					fmt.Sprintf("invoice %s settled with %s for %d %s; a settlement with the same reference says %s; kept %d %s",
						f.InvoiceRef, chainRef, amount, currency, seen, amount, currency))
			}
			return nil // the same settlement again
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%s: read payment: %w", what, err)
		}
	}
	if !inserted {
		// The chain reference credits another invoice.
		if inserted, err = insert("rejected"); err != nil {
			return err
		}
		if !inserted {
			// The invoice was stored by another transaction since the
			// SELECT: decide again on its row.
			return a.settled(ctx, f)
		}
		if f.OrderID != "" {
			if err := a.heardOfOrder(ctx, f.OrderID); err != nil {
				return err
			}
		}
		return a.reused(ctx, f)
	}
	// A first-use chain reference is credited whatever its order says:
	// the coins are in the wallet, as a fiat capture's money is with the
	// provider, so the ledger does not depend on which payment of an order
	// came first. The order rule only alerts.
	_, inserted, err = a.postEntries(ctx, "settle:"+f.InvoiceRef, "settle", f.InvoiceRef, 0, f.Amount, f.Amount, f.Currency,
		AccountCryptoWallet, AccountRevenue)
	if err != nil {
		return err
	}
	if inserted {
		if err := a.emit(ctx, outbox.CryptoSettled, f.InvoiceRef, f.InvoiceRef, f.At, settledData{Invoice: f.InvoiceRef,
			OrderID: f.OrderID, Amount: f.Amount, Currency: f.Currency, ChainRef: f.ChainRef}); err != nil {
			return err
		}
	}
	if f.OrderID == "" {
		return nil
	}
	ok, other, err := a.claimOrder(ctx, f.OrderID, f.InvoiceRef, "crypto", false)
	if err != nil || ok || other == f.InvoiceRef || other == "" {
		return err
	}
	return a.alert(ctx, AlertOrderPaidTwice, f.OrderID, f.InvoiceRef,
		fmt.Sprintf("order %s is paid by %s; invoice %s settled for it too (credited: settlement is final)", f.OrderID, other, f.InvoiceRef))
}

// reused raises AlertCryptoReferenceReused for f, whose chain reference
// credits another invoice.
func (a *applier) reused(ctx context.Context, f Settled) error {
	var holder string
	if err := a.tx.QueryRowContext(ctx, `SELECT ref FROM payhook_payments
		WHERE source = $1 AND chain_ref = $2 AND status = 'settled'`, a.source, f.ChainRef).Scan(&holder); err != nil {
		return fmt.Errorf("settlement of invoice %s: find the invoice credited with %s: %w", f.InvoiceRef, f.ChainRef, err)
	}
	return a.alert(ctx, AlertCryptoReferenceReused, f.ChainRef, f.InvoiceRef,
		fmt.Sprintf("chain reference %s credits invoice %s; invoice %s settled with it again and was not credited", f.ChainRef, holder, f.InvoiceRef))
}

// settleRejected settles f's invoice, stored rejected for a chain
// reference another invoice holds, with f's reference, and reports
// whether it did: not if that reference credits an invoice already. The
// conditional UPDATE decides, on the row still rejected; the unique index
// of credited references stops two transactions settling with one (the
// second fails and is retried, then finds it taken).
func (a *applier) settleRejected(ctx context.Context, f Settled) (bool, error) {
	res, err := a.tx.ExecContext(ctx, `UPDATE payhook_payments
		SET status = 'settled', chain_ref = $3, amount = $4, currency = $5, order_id = COALESCE(NULLIF($6, ''), order_id),
			captured_at = $7, updated_at = $8
		WHERE source = $1 AND ref = $2 AND kind = 'crypto' AND status = 'rejected'
			AND NOT EXISTS (SELECT 1 FROM payhook_payments o WHERE o.source = $1 AND o.chain_ref = $3 AND o.status = 'settled')`,
		a.source, f.InvoiceRef, f.ChainRef, f.Amount, f.Currency, f.OrderID, a.t(f.At), a.t(a.tx.now))
	if err != nil {
		return false, fmt.Errorf("settlement of rejected invoice %s with %s: %w", f.InvoiceRef, f.ChainRef, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("settlement of rejected invoice %s with %s: %w", f.InvoiceRef, f.ChainRef, err)
	}
	return n == 1, nil
}
