package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/payhook/payhook/api"
	"github.com/payhook/payhook/billing"
)

// The billing views: payments, orders, subscriptions, the ledger and the
// alerts, read from an existing database (openExisting) like the events
// commands. --json prints the read API's documents (package api): the
// same object for show and balances, and for list the array the API
// answers under its key ({"payments": [...]}).

// billingCommands returns the billing commands, for the command table of
// Run.
func (m *Main) billingCommands() map[string]func(context.Context, []string) error {
	return map[string]func(context.Context, []string) error{
		"payments":      m.payments,
		"orders":        m.orders,
		"subscriptions": m.subscriptions,
		"ledger":        m.ledger,
		"alerts":        m.alerts,
	}
}

// subcommands dispatches args[0] among subs, printing help for help.
func (m *Main) subcommands(ctx context.Context, cmd, help string, args []string,
	subs map[string]func(context.Context, []string) error) error {
	names := make([]string, 0, len(subs))
	for name := range subs {
		names = append(names, name)
	}
	slices.Sort(names)
	want := strings.Join(names, " or ")
	if len(args) == 0 {
		return fmt.Errorf("%w: %s needs a subcommand: %s", errUsage, cmd, want)
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprintln(m.Stdout, help)
		return nil
	}
	run, ok := subs[sub]
	if !ok {
		return fmt.Errorf("%w: unknown %s subcommand %q (want %s)", errUsage, cmd, sub, want)
	}
	return run(ctx, rest)
}

// checkOneOf checks an optional enumerated flag.
func checkOneOf(flagName, v string, allowed []string) error {
	if v != "" && !slices.Contains(allowed, v) {
		return fmt.Errorf("%w: --%s %q: want one of %s", errUsage, flagName, v, strings.Join(allowed, ", "))
	}
	return nil
}

// checkLimit checks a --limit flag.
func checkLimit(n int) error {
	if n <= 0 || n > api.MaxLimit {
		return fmt.Errorf("%w: --limit %d: want 1 to %d", errUsage, n, api.MaxLimit)
	}
	return nil
}

// ambiguous turns an ambiguous reference into a usage error saying which
// --source to give.
func ambiguous(err error) error {
	var amb *api.AmbiguousError
	if errors.As(err, &amb) {
		return fmt.Errorf("%w: %w; give --source %s", errUsage, err, strings.Join(amb.Sources, " or --source "))
	}
	return err
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// --- payments ---------------------------------------------------------------

const paymentsHelp = `Usage: payhook payments list|show [flags]

  payhook payments list [--source S] [--kind K] [--status S] [--order ID] [--limit N] [--json]
  payhook payments show REF [--source S] [--json]

REF is the provider's payment reference (pi_..., txn_..., an invoice id).
When it exists in several sources, give --source. show prints the payment
and its ledger postings. Amounts are in minor units of the currency.
Statuses: succeeded, partially_refunded, refunded, charged_back (fiat);
settled, rejected (crypto). Every subcommand takes --db URL (env
PAYHOOK_DB) like serve.

Examples:
  payhook payments list --status refunded
  payhook payments list --order ord_1042 --json
  payhook payments show pi_3Nx0001 --source stripe-live`

func (m *Main) payments(ctx context.Context, args []string) error {
	return m.subcommands(ctx, "payments", paymentsHelp, args, map[string]func(context.Context, []string) error{
		"list": m.paymentsList,
		"show": m.paymentsShow,
	})
}

func (m *Main) paymentsList(ctx context.Context, args []string) error {
	fs := m.flags("payments list", paymentsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "only payments of this source")
	kind := fs.String("kind", "", "only payments of this kind: fiat or crypto")
	status := fs.String("status", "", "only payments with this status")
	orderID := fs.String("order", "", "only payments of this order id")
	limit := fs.Int("limit", 50, "at most this many payments, newest first")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := checkOneOf("kind", *kind, []string{"fiat", "crypto"}); err != nil {
		return err
	}
	if err := checkOneOf("status", *status, api.PaymentStatuses); err != nil {
		return err
	}
	if err := checkLimit(*limit); err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	ps, err := billing.ListPayments(ctx, db, billing.PaymentFilter{
		Source: *source, Kind: *kind, Status: *status, OrderID: *orderID, Limit: *limit,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(ps)
	}
	tw := newTable(m.Stdout)
	fmt.Fprintln(tw, "SOURCE\tREF\tKIND\tSTATUS\tAMOUNT\tCURRENCY\tREFUNDED\tORDER\tCAPTURED_AT")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", p.Source, p.Ref, p.Kind, p.Status, p.Amount, p.Currency,
			p.RefundedAmount, dash(p.OrderID), formatTime(p.CapturedAt))
	}
	if len(ps) == 0 {
		fmt.Fprintln(tw, "(no payments)")
	}
	return tw.Flush()
}

func (m *Main) paymentsShow(ctx context.Context, args []string) error {
	fs := m.flags("payments show", paymentsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "the payment's source (needed when REF exists in several)")
	asJSON := fs.Bool("json", false, "print JSON")
	ref, err := oneArg(fs, args, "REF")
	if err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := api.Payment(ctx, db, *source, ref)
	if err != nil {
		return ambiguous(err)
	}
	if *asJSON {
		return m.printJSON(p)
	}
	tw := newTable(m.Stdout)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("source", p.Source)
	row("ref", p.Ref)
	row("kind", p.Kind)
	row("status", p.Status)
	row("amount", fmt.Sprintf("%d %s", p.Amount, p.Currency))
	row("refunded", fmt.Sprintf("%d %s", p.RefundedAmount, p.Currency))
	row("order", dash(p.OrderID))
	row("chain_ref", dash(p.ChainRef))
	row("captured_at", formatTime(p.CapturedAt))
	row("created_at", formatTime(p.CreatedAt))
	row("updated_at", formatTime(p.UpdatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "\npostings:")
	tw = newTable(m.Stdout)
	fmt.Fprintln(tw, "ID\tKIND\tFACT_KEY\tAMOUNT\tREVERSES\tPOSTED_AT\tENTRIES")
	for _, ps := range p.Postings {
		entries := make([]string, len(ps.Entries))
		for i, e := range ps.Entries {
			entries[i] = fmt.Sprintf("%s %+d", e.Account, e.Amount)
		}
		reverses := "-"
		if ps.ReversesID != 0 {
			reverses = strconv.FormatInt(ps.ReversesID, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d %s\t%s\t%s\t%s\n", ps.ID, ps.Kind, ps.FactKey, ps.Amount, ps.Currency, reverses,
			formatTime(ps.PostedAt), strings.Join(entries, ", "))
	}
	if len(p.Postings) == 0 {
		fmt.Fprintln(tw, "(no postings)")
	}
	return tw.Flush()
}

// --- orders -----------------------------------------------------------------

const ordersHelp = `Usage: payhook orders list|show [flags]

  payhook orders list [--status pending|paid] [--limit N] [--json]
  payhook orders show ORDER_ID [--json]

ORDER_ID is the application's order id, from the checkout's metadata.
An order is paid once, by the payment or crypto invoice shown in PAID_BY.
Every subcommand takes --db URL (env PAYHOOK_DB) like serve.

Examples:
  payhook orders list --status paid
  payhook orders show ord_1042 --json`

func (m *Main) orders(ctx context.Context, args []string) error {
	return m.subcommands(ctx, "orders", ordersHelp, args, map[string]func(context.Context, []string) error{
		"list": m.ordersList,
		"show": m.ordersShow,
	})
}

func (m *Main) ordersList(ctx context.Context, args []string) error {
	fs := m.flags("orders list", ordersHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	status := fs.String("status", "", "only orders with this status: pending or paid")
	limit := fs.Int("limit", 50, "at most this many orders, newest first")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := checkOneOf("status", *status, api.OrderStatuses); err != nil {
		return err
	}
	if err := checkLimit(*limit); err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	list, err := billing.ListOrders(ctx, db, billing.OrderFilter{Status: *status, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(list)
	}
	tw := newTable(m.Stdout)
	fmt.Fprintln(tw, "ORDER_ID\tSTATUS\tPAID_BY\tPAID_AT\tCREATED_AT")
	for _, o := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.OrderID, o.Status, dash(o.PaidBy), formatTime(o.PaidAt), formatTime(o.CreatedAt))
	}
	if len(list) == 0 {
		fmt.Fprintln(tw, "(no orders)")
	}
	return tw.Flush()
}

func (m *Main) ordersShow(ctx context.Context, args []string) error {
	fs := m.flags("orders show", ordersHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	asJSON := fs.Bool("json", false, "print JSON")
	id, err := oneArg(fs, args, "ORDER_ID")
	if err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	o, err := billing.GetOrder(ctx, db, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(o)
	}
	tw := newTable(m.Stdout)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("order_id", o.OrderID)
	row("status", o.Status)
	row("paid_by", dash(o.PaidBy))
	row("paid_at", formatTime(o.PaidAt))
	row("created_at", formatTime(o.CreatedAt))
	return tw.Flush()
}

// --- subscriptions ----------------------------------------------------------

const subscriptionsHelp = `Usage: payhook subscriptions list|show [flags]

  payhook subscriptions list [--source S] [--status S] [--customer C] [--limit N] [--json]
  payhook subscriptions show REF [--source S] [--json]

REF is the provider's subscription reference (sub_...). When it exists in
several sources, give --source. Statuses: active, canceled, ended; ENDED_AT
is when payhook claimed the end (once). Every subcommand takes --db URL
(env PAYHOOK_DB) like serve.

Examples:
  payhook subscriptions list --status active
  payhook subscriptions show sub_1Nx0001 --json`

func (m *Main) subscriptions(ctx context.Context, args []string) error {
	return m.subcommands(ctx, "subscriptions", subscriptionsHelp, args, map[string]func(context.Context, []string) error{
		"list": m.subscriptionsList,
		"show": m.subscriptionsShow,
	})
}

func (m *Main) subscriptionsList(ctx context.Context, args []string) error {
	fs := m.flags("subscriptions list", subscriptionsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "only subscriptions of this source")
	status := fs.String("status", "", "only subscriptions with this status (active, canceled, ended)")
	customer := fs.String("customer", "", "only subscriptions of this customer")
	limit := fs.Int("limit", 50, "at most this many subscriptions, newest first")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := checkLimit(*limit); err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	ss, err := billing.ListSubscriptions(ctx, db, billing.SubscriptionFilter{
		Source: *source, Status: *status, Customer: *customer, Limit: *limit,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(ss)
	}
	tw := newTable(m.Stdout)
	fmt.Fprintln(tw, "SOURCE\tREF\tCUSTOMER\tPLAN\tSTATUS\tPERIOD_END\tENDED_AT\tPROVIDER_UPDATED_AT")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Source, s.Ref, dash(s.Customer), dash(s.Plan), dash(s.Status),
			formatTime(s.CurrentPeriodEnd), formatTime(s.EndedAt), formatTime(s.ProviderUpdatedAt))
	}
	if len(ss) == 0 {
		fmt.Fprintln(tw, "(no subscriptions)")
	}
	return tw.Flush()
}

func (m *Main) subscriptionsShow(ctx context.Context, args []string) error {
	fs := m.flags("subscriptions show", subscriptionsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "the subscription's source (needed when REF exists in several)")
	asJSON := fs.Bool("json", false, "print JSON")
	ref, err := oneArg(fs, args, "REF")
	if err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := api.Subscription(ctx, db, *source, ref)
	if err != nil {
		return ambiguous(err)
	}
	if *asJSON {
		return m.printJSON(s)
	}
	tw := newTable(m.Stdout)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("source", s.Source)
	row("ref", s.Ref)
	row("customer", dash(s.Customer))
	row("plan", dash(s.Plan))
	row("status", dash(s.Status))
	row("current_period_end", formatTime(s.CurrentPeriodEnd))
	row("ended_at", formatTime(s.EndedAt))
	row("provider_updated_at", formatTime(s.ProviderUpdatedAt))
	row("created_at", formatTime(s.CreatedAt))
	row("updated_at", formatTime(s.UpdatedAt))
	return tw.Flush()
}

// --- ledger -----------------------------------------------------------------

const ledgerHelp = `Usage: payhook ledger balances [--db URL] [--json]

Prints the balance of every ledger account per currency, in minor units,
and each currency's sum, which is 0 in a sound ledger (double entry).
A currency that does not sum to 0 is reported and the command exits 1.
The money kept is provider_receivable plus crypto_wallet (minus revenue,
the same number). --db URL (env PAYHOOK_DB) as for serve.

Examples:
  payhook ledger balances
  payhook ledger balances --json`

func (m *Main) ledger(ctx context.Context, args []string) error {
	return m.subcommands(ctx, "ledger", ledgerHelp, args, map[string]func(context.Context, []string) error{
		"balances": m.ledgerBalances,
	})
}

func (m *Main) ledgerBalances(ctx context.Context, args []string) error {
	fs := m.flags("ledger balances", ledgerHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	b, err := api.Balances(ctx, db)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := m.printJSON(b); err != nil {
			return err
		}
	} else {
		tw := newTable(m.Stdout)
		fmt.Fprintln(tw, "CURRENCY\tACCOUNT\tBALANCE")
		for _, cur := range b.Currencies() {
			cb := b.Balances[cur]
			accounts := make([]string, 0, len(cb.Accounts))
			for a := range cb.Accounts {
				accounts = append(accounts, a)
			}
			slices.Sort(accounts)
			for _, a := range accounts {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", cur, a, cb.Accounts[a])
			}
			fmt.Fprintf(tw, "%s\t(sum)\t%d\n", cur, cb.Sum)
		}
		if len(b.Balances) == 0 {
			fmt.Fprintln(tw, "(no ledger entries)")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if bad := b.Unbalanced(); len(bad) > 0 {
		return fmt.Errorf("the ledger does not balance in %s", strings.Join(bad, ", "))
	}
	return nil
}

// --- alerts -----------------------------------------------------------------

const alertsHelp = `Usage: payhook alerts list|ack [flags]

  payhook alerts list [--open] [--kind K] [--limit N] [--json]
  payhook alerts ack ID

Alerts are raised by processing (a reused crypto chain reference, an order
paid twice, an event that failed its last attempt); raising one again
counts it and makes it open (unacknowledged) again. --open lists only the
unacknowledged ones. Every subcommand takes --db URL (env PAYHOOK_DB) like
serve.

Examples:
  payhook alerts list --open
  payhook alerts list --json
  payhook alerts ack 3`

func (m *Main) alerts(ctx context.Context, args []string) error {
	return m.subcommands(ctx, "alerts", alertsHelp, args, map[string]func(context.Context, []string) error{
		"list": m.alertsList,
		"ack":  m.alertsAck,
	})
}

func (m *Main) alertsList(ctx context.Context, args []string) error {
	fs := m.flags("alerts list", alertsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	open := fs.Bool("open", false, "only alerts not acknowledged")
	kind := fs.String("kind", "", "only alerts of this kind")
	limit := fs.Int("limit", 50, "at most this many alerts, most recently seen first")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := checkLimit(*limit); err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	as, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: *kind, Unacknowledged: *open, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(as)
	}
	tw := newTable(m.Stdout)
	fmt.Fprintln(tw, "ID\tKIND\tSUBJECT\tCOUNT\tACK\tLAST_SEEN\tMESSAGE")
	for _, a := range as {
		ack := "no"
		if a.Acknowledged {
			ack = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", a.ID, a.Kind, a.Subject, a.Count, ack, formatTime(a.LastSeen),
			strings.ReplaceAll(a.Message, "\n", " "))
	}
	if len(as) == 0 {
		fmt.Fprintln(tw, "(no alerts)")
	}
	return tw.Flush()
}

func (m *Main) alertsAck(ctx context.Context, args []string) error {
	fs := m.flags("alerts ack", alertsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	key, err := oneArg(fs, args, "ID")
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(key, 10, 64)
	if err != nil || id <= 0 {
		return fmt.Errorf("%w: alerts ack takes the alert's numeric id, got %q (see payhook alerts list)", errUsage, key)
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := billing.AckAlert(ctx, db, id); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "alert %d acknowledged\n", id)
	return nil
}

// parseNoArgs parses flags for a subcommand that takes no positional
// argument; a stray argument is a usage error.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no argument, got %q", errUsage, fs.Name(), fs.Arg(0))
	}
	return nil
}
