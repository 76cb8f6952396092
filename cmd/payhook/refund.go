package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/refunds"
	"github.com/payhook/payhook/provider/adapter"
)

const refundHelp = `Usage: payhook payments refund REF [--amount N] [--reason R] [--source S] [--again]
                              [--abandon] [--json] [--config FILE] [--db URL]

Asks the payment's provider to refund it: --amount minor units, or all that
the payment keeps (its amount less what its refunds took). The request is
stored before the call with the idempotency key
refund-<source>-<payment>-<seq> (seq numbers the payment's refunds from 1;
refund-<digest>-<seq> when the source or the payment has a dash, or the key
would pass 255 bytes),
sent as the Idempotency-Key, so the provider refunds once however often it
is sent:
  - running it again while the request is pending (a failed call, or a
    crash before payhook recorded the answer) re-sends the same key;
    a pending request must be finished (same --amount, or none) before
    another amount is asked; one pending for 23 hours or more is refused
    (Stripe forgets a key after 24 hours: sending it again could refund
    twice): check at the provider, then --abandon gives it up (failed)
    and refunds with a new request;
  - running it again after it completed is refused: --again refunds again,
    with the next seq and a new key;
  - a request the provider refused (a 4xx) is failed, not reused.
Refunding more than the payment keeps, or anything of a crypto payment (final
once settled), is refused before any call. The
payment's refunded amount changes when the refund's webhook arrives, through
the normal path (payhook payments show REF).

The source's api_url and api_key come from the config file, read as serve
reads it (--config or PAYHOOK_CONFIG; --db or PAYHOOK_DB). Providers:
billete (POST /refunds) and stripe (POST /v1/refunds; REF a pi_... or ch_...).
Exit status 0 when the provider accepted the refund, 1 when it failed (run
it again if the request is pending), 2 for a usage error or a refusal.

Examples:
  payhook payments refund pi_3Nx0001 --amount 500 --reason requested_by_customer
  payhook payments refund pay_42 --source shop
  payhook payments refund pi_3Nx0001 --amount 500 --again --json`

func (m *Main) paymentsRefund(ctx context.Context, args []string) error {
	fs := m.flags("payments refund", refundHelp)
	configPath := fs.String("config", "", "YAML file listing the sources (env PAYHOOK_CONFIG)")
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "the payment's source (needed when REF exists in several)")
	amount := fs.Int64("amount", 0, "minor units to refund (default: all that the payment keeps)")
	reason := fs.String("reason", "", "the refund's reason, passed to the provider (Stripe: duplicate, fraudulent, requested_by_customer)")
	again := fs.Bool("again", false, "refund again a payment whose refund of the same amount completed")
	abandon := fs.Bool("abandon", false, "give up the payment's request pending 23 hours or more (checked at the provider: it refunded nothing) and refund with a new one")
	asJSON := fs.Bool("json", false, "print the request as JSON")
	ref, err := oneArg(fs, args, "REF")
	if err != nil {
		return err
	}
	if err := storableArgs(fs, ref); err != nil {
		return err
	}
	// --amount 0 is no amount to refund, not "all of it": only leaving the
	// flag out asks for what the payment keeps.
	amountSet := false
	fs.Visit(func(f *flag.Flag) { amountSet = amountSet || f.Name == "amount" })
	if *amount < 0 || (amountSet && *amount == 0) || payhook.CheckAmount("--amount", *amount) != nil {
		return fmt.Errorf("%w: payments refund: --amount %d: want a positive amount of minor units, at most %d", errUsage, *amount, payhook.MaxAmount)
	}
	if err := payhook.CheckRef("--reason", *reason); err != nil {
		return fmt.Errorf("%w: payments refund: %v", errUsage, err)
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	// The payment's source decides which provider and key refund it.
	p, err := billing.LookupPayment(ctx, db, *source, ref)
	if err != nil {
		return ambiguous(err)
	}
	src, client, err := m.sourceClient(*configPath, p.Source)
	if err != nil {
		return err
	}
	refunder, ok := client.(adapter.Refunder)
	if !ok {
		return fmt.Errorf("%w: payments refund: source %q (%s): payhook cannot refund through this provider's API", errUsage, src.Name, src.Provider)
	}
	r, err := refunds.Refund(ctx, refunds.Config{DB: db, Refunder: refunder, Now: m.Now},
		refunds.Ask{Source: p.Source, Payment: p.Ref, Amount: *amount, Reason: *reason, Again: *again, Abandon: *abandon})
	if err != nil {
		if errors.Is(err, payhook.ErrInvalid) && (r == nil || r.Status == refunds.StatusFailed) {
			err = fmt.Errorf("%w: payments refund: %w", errUsage, err)
		}
		if r != nil && *asJSON {
			m.printJSON(r)
		}
		return err
	}
	if *asJSON {
		return m.printJSON(r)
	}
	how := "asked"
	if r.Reused {
		how = "re-sent"
	}
	_, err = fmt.Fprintf(m.Stdout, "refund %d of %s %s (%s): %s %d %s with key %s: provider refund %s\n",
		r.Seq, r.Payment, how, r.Source, r.Status, r.Amount, r.Currency, r.Key, r.ProviderRef)
	return err
}
