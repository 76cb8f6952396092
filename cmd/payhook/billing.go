package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/api"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/store"
)

// The billing views: payments, orders, subscriptions, the ledger and the
// alerts, read from an existing database (openExisting) like the events
// commands. --json prints the read API's documents (package api): the
// same object for show and balances, and for list the array the API
// answers under its key ({"payments": [...]}).

func (m *Main) payments(ctx context.Context, args []string) error {
	return m.subcommand(ctx, args, paymentsHelp, subs{"list": m.paymentsList, "show": m.paymentsShow, "refund": m.paymentsRefund})
}

func (m *Main) orders(ctx context.Context, args []string) error {
	return m.subcommand(ctx, args, ordersHelp, subs{"list": m.ordersList, "show": m.ordersShow})
}

func (m *Main) subscriptions(ctx context.Context, args []string) error {
	return m.subcommand(ctx, args, subscriptionsHelp, subs{"list": m.subscriptionsList, "show": m.subscriptionsShow})
}

func (m *Main) ledger(ctx context.Context, args []string) error {
	return m.subcommand(ctx, args, ledgerHelp, subs{"balances": m.ledgerBalances})
}

func (m *Main) alerts(ctx context.Context, args []string) error {
	return m.subcommand(ctx, args, alertsHelp, subs{"list": m.alertsList, "ack": m.alertsAck})
}

// subs are the subcommands of a command, by name.
type subs map[string]func(context.Context, []string) error

// subcommand runs the subcommand args[0] among byName, or prints help for
// a help flag. The command table names the subcommands and Run refuses
// others before it gets here.
func (m *Main) subcommand(ctx context.Context, args []string, help string, byName subs) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(m.Stdout, help)
		return nil
	}
	if len(args) == 0 || byName[args[0]] == nil {
		return fmt.Errorf("%w: want a subcommand: %s", errUsage, orList(slices.Sorted(maps.Keys(byName))))
	}
	return byName[args[0]](ctx, args[1:])
}

// checkOneOf checks an optional enumerated flag.
func checkOneOf(flagName, v string, allowed []string) error {
	if v != "" && !slices.Contains(allowed, v) {
		return fmt.Errorf("%w: --%s %q: want one of %s", errUsage, flagName, v, strings.Join(allowed, ", "))
	}
	return nil
}

// storableArgs refuses a flag's value or arg holding text no column can
// hold (not UTF-8, a NUL): nothing stored matches it, and PostgreSQL fails
// the query comparing with it where SQLite finds nothing (api.CheckText).
func storableArgs(fs *flag.FlagSet, arg string) error {
	if payhook.Storable(arg) != arg {
		return fmt.Errorf("%w: %s: the argument is not valid UTF-8 or holds a NUL: nothing stored matches it", errUsage, fs.Name())
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if v := f.Value.String(); err == nil && payhook.Storable(v) != v {
			err = fmt.Errorf("%w: %s: --%s is not valid UTF-8 or holds a NUL: nothing stored matches it", errUsage, fs.Name(), f.Name)
		}
	})
	return err
}

// limitVar adds the --limit flag of a list, "at most this many what",
// into p. Every list has the same default and the same bounds
// (checkLimit), the read API's.
func limitVar(fs *flag.FlagSet, p *int, what string) {
	fs.IntVar(p, "limit", 50, fmt.Sprintf("at most this many %s (1 to %d)", what, api.MaxLimit))
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
	var amb *billing.AmbiguousError
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

// printTable prints a table: the header, then a line for each of rows
// (row writes it), or the line empty when there are none.
func printTable[T any](w io.Writer, rows []T, empty, header string, row func(tw io.Writer, r T)) error {
	tw := newTable(w)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		row(tw, r)
	}
	if len(rows) == 0 {
		fmt.Fprintln(tw, empty)
	}
	return tw.Flush()
}

// table returns a view's print for a list of T: printTable of the list.
func table[T any](empty, header string, row func(tw io.Writer, r T)) func(io.Writer, any) error {
	return func(w io.Writer, v any) error { return printTable(w, v.([]T), empty, header, row) }
}

// fields prints aligned "key value" rows; kv alternates keys and values.
func fields(w io.Writer, kv ...any) error {
	tw := newTable(w)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s\t%v\n", kv[i], kv[i+1])
	}
	return tw.Flush()
}

// A view is a read-only command (payments list, events show, ...): it
// parses its flags and argument, opens the existing database (--db),
// loads one thing and prints it, as JSON with --json, else for people.
type view struct {
	// arg names the one positional argument for the usage error (REF,
	// ID|EVENT_ID); "" when the command takes none.
	arg string
	// anyArgs, with arg "", ignores stray arguments instead of refusing
	// them (events list always has).
	anyArgs bool
	// check, if set, checks the parsed flags before the database is opened.
	check func() error
	// load reads what the command shows, the value --json prints; arg is
	// the positional argument.
	load func(db *store.DB, arg string) (any, error)
	// print writes what load returned for people.
	print func(w io.Writer, v any) error
}

// runView runs the view v on args, with the command's flags fs, to which
// it adds --db and --json.
func (m *Main) runView(ctx context.Context, fs *flag.FlagSet, args []string, v view) error {
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	asJSON := fs.Bool("json", false, "print JSON")
	var arg string
	var err error
	switch {
	case v.arg != "":
		arg, err = oneArg(fs, args, v.arg)
	case v.anyArgs:
		err = parse(fs, args)
	default:
		err = parseNoArgs(fs, args)
	}
	if err != nil {
		return err
	}
	if err := storableArgs(fs, arg); err != nil {
		return err
	}
	if v.check != nil {
		if err := v.check(); err != nil {
			return err
		}
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	doc, err := v.load(db, arg)
	if err != nil {
		return ambiguous(err) // a REF in several sources: say which --source to give
	}
	if *asJSON {
		return m.printJSON(doc)
	}
	return v.print(m.Stdout, doc)
}

// --- payments ---------------------------------------------------------------

const paymentsHelp = `Usage: payhook payments list|show|refund [flags]

  payhook payments list [--source S] [--kind K] [--status S] [--order ID] [--limit N] [--json]
  payhook payments show REF [--source S] [--json]
  payhook payments refund REF [--amount N] [--reason R] [--source S] [--again] [--abandon] [--json] (see payhook help payments refund)

REF is the provider's payment reference (pi_..., txn_..., an invoice id).
When it exists in several sources, give --source. show prints the payment
and its ledger postings. Amounts are in minor units of the currency; a
posting's AMOUNT is what it moves on the receivable side (signed, 0 for a
refund made after a chargeback), REQUESTED the amount its fact names.
Statuses: succeeded, partially_refunded, refunded, charged_back (fiat);
settled, rejected (crypto). Every subcommand takes --db URL (env
PAYHOOK_DB) like serve.

Examples:
  payhook payments list --status refunded
  payhook payments list --order ord_1042 --json
  payhook payments show pi_3Nx0001 --source stripe-live`

func (m *Main) paymentsList(ctx context.Context, args []string) error {
	fs := m.flags("payments list", paymentsHelp)
	var f billing.PaymentFilter
	fs.StringVar(&f.Source, "source", "", "only payments of this source")
	fs.StringVar(&f.Kind, "kind", "", "only payments of this kind: fiat or crypto")
	fs.StringVar(&f.Status, "status", "", "only payments with this status")
	fs.StringVar(&f.OrderID, "order", "", "only payments of this order id")
	limitVar(fs, &f.Limit, "payments, newest first")
	return m.runView(ctx, fs, args, view{
		check: func() error {
			return cmp.Or(checkOneOf("kind", f.Kind, []string{"fiat", "crypto"}),
				checkOneOf("status", f.Status, billing.PaymentStatuses), checkLimit(f.Limit))
		},
		load: func(db *store.DB, _ string) (any, error) { return billing.ListPayments(ctx, db, f) },
		print: table("(no payments)", "SOURCE\tREF\tKIND\tSTATUS\tAMOUNT\tCURRENCY\tREFUNDED\tORDER\tCAPTURED_AT",
			func(tw io.Writer, p billing.PaymentView) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", p.Source, p.Ref, p.Kind, p.Status, p.Amount, p.Currency,
					p.RefundedAmount, dash(p.OrderID), formatTime(p.CapturedAt))
			}),
	})
}

func (m *Main) paymentsShow(ctx context.Context, args []string) error {
	fs := m.flags("payments show", paymentsHelp)
	source := fs.String("source", "", "the payment's source (needed when REF exists in several)")
	return m.runView(ctx, fs, args, view{
		arg:  "REF",
		load: func(db *store.DB, ref string) (any, error) { return billing.LookupPayment(ctx, db, *source, ref) },
		print: func(w io.Writer, v any) error {
			p := v.(*billing.PaymentDetail)
			err := fields(w,
				"source", p.Source,
				"ref", p.Ref,
				"kind", p.Kind,
				"status", p.Status,
				"amount", fmt.Sprintf("%d %s", p.Amount, p.Currency),
				"refunded", fmt.Sprintf("%d %s", p.RefundedAmount, p.Currency),
				"order", dash(p.OrderID),
				"chain_ref", dash(p.ChainRef),
				"captured_at", formatTime(p.CapturedAt),
				"created_at", formatTime(p.CreatedAt),
				"updated_at", formatTime(p.UpdatedAt))
			if err != nil {
				return err
			}
			fmt.Fprintln(w, "\npostings:")
			return printTable(w, p.Postings, "(no postings)",
				"ID\tKIND\tFACT_KEY\tAMOUNT\tREQUESTED\tREVERSES\tPOSTED_AT\tENTRIES",
				func(tw io.Writer, ps billing.PostingView) {
					entries := make([]string, len(ps.Entries))
					for i, e := range ps.Entries {
						entries[i] = fmt.Sprintf("%s %+d", e.Account, e.Amount)
					}
					reverses := "-"
					if ps.ReversesID != 0 {
						reverses = strconv.FormatInt(ps.ReversesID, 10)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%+d %s\t%d\t%s\t%s\t%s\n", ps.ID, ps.Kind, ps.FactKey, ps.Amount, ps.Currency,
						ps.RequestedAmount, reverses, formatTime(ps.PostedAt), strings.Join(entries, ", "))
				})
		},
	})
}

// --- orders -----------------------------------------------------------------

const ordersHelp = `Usage: payhook orders list|show [flags]

  payhook orders list [--source S] [--status pending|paid] [--limit N] [--json]
  payhook orders show ORDER_ID [--source S] [--json]

ORDER_ID is the application's order id, from the checkout's metadata.
Orders belong to a source: the same ORDER_ID in two sources (a test and a
live account) is two orders; when it exists in several, give --source.
An order is paid once, by the payment or crypto invoice shown in PAID_BY.
Every subcommand takes --db URL (env PAYHOOK_DB) like serve.

Examples:
  payhook orders list --status paid
  payhook orders show ord_1042 --source stripe-live --json`

func (m *Main) ordersList(ctx context.Context, args []string) error {
	fs := m.flags("orders list", ordersHelp)
	var f billing.OrderFilter
	fs.StringVar(&f.Source, "source", "", "only orders of this source")
	fs.StringVar(&f.Status, "status", "", "only orders with this status: pending or paid")
	limitVar(fs, &f.Limit, "orders, newest first")
	return m.runView(ctx, fs, args, view{
		check: func() error {
			return cmp.Or(checkOneOf("status", f.Status, billing.OrderStatuses), checkLimit(f.Limit))
		},
		load: func(db *store.DB, _ string) (any, error) { return billing.ListOrders(ctx, db, f) },
		print: table("(no orders)", "SOURCE\tORDER_ID\tSTATUS\tPAID_BY\tPAID_AT\tCREATED_AT",
			func(tw io.Writer, o billing.OrderView) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Source, o.OrderID, o.Status, dash(o.PaidBy), formatTime(o.PaidAt), formatTime(o.CreatedAt))
			}),
	})
}

func (m *Main) ordersShow(ctx context.Context, args []string) error {
	fs := m.flags("orders show", ordersHelp)
	source := fs.String("source", "", "the order's source (needed when ORDER_ID exists in several)")
	return m.runView(ctx, fs, args, view{
		arg:  "ORDER_ID",
		load: func(db *store.DB, id string) (any, error) { return billing.LookupOrder(ctx, db, *source, id) },
		print: func(w io.Writer, v any) error {
			o := v.(*billing.OrderView)
			return fields(w,
				"source", o.Source,
				"order_id", o.OrderID,
				"status", o.Status,
				"paid_by", dash(o.PaidBy),
				"paid_at", formatTime(o.PaidAt),
				"created_at", formatTime(o.CreatedAt))
		},
	})
}

// --- subscriptions ----------------------------------------------------------

const subscriptionsHelp = `Usage: payhook subscriptions list|show [flags]

  payhook subscriptions list [--source S] [--status S] [--customer C] [--limit N] [--json]
  payhook subscriptions show REF [--source S] [--json]

REF is the provider's subscription reference (sub_...). When it exists in
several sources, give --source. Statuses: active, canceled, ended, and
incomplete, past_due, unpaid, paused (not paid for: no access); ENDED_AT
is when the provider says it ended, set exactly when the status is ended.
Every subcommand takes --db URL
(env PAYHOOK_DB) like serve.

Examples:
  payhook subscriptions list --status active
  payhook subscriptions show sub_1Nx0001 --json`

func (m *Main) subscriptionsList(ctx context.Context, args []string) error {
	fs := m.flags("subscriptions list", subscriptionsHelp)
	var f billing.SubscriptionFilter
	fs.StringVar(&f.Source, "source", "", "only subscriptions of this source")
	fs.StringVar(&f.Status, "status", "", "only subscriptions with this status: "+strings.Join(billing.SubscriptionStatuses, ", "))
	fs.StringVar(&f.Customer, "customer", "", "only subscriptions of this customer")
	limitVar(fs, &f.Limit, "subscriptions, newest first")
	return m.runView(ctx, fs, args, view{
		check: func() error {
			return cmp.Or(checkOneOf("status", f.Status, billing.SubscriptionStatuses), checkLimit(f.Limit))
		},
		load: func(db *store.DB, _ string) (any, error) { return billing.ListSubscriptions(ctx, db, f) },
		print: table("(no subscriptions)", "SOURCE\tREF\tCUSTOMER\tPLAN\tSTATUS\tPERIOD_END\tENDED_AT\tPROVIDER_UPDATED_AT",
			func(tw io.Writer, s billing.SubscriptionView) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Source, s.Ref, dash(s.Customer), dash(s.Plan), dash(s.Status),
					formatTime(s.CurrentPeriodEnd), formatTime(s.EndedAt), formatTime(s.ProviderUpdatedAt))
			}),
	})
}

func (m *Main) subscriptionsShow(ctx context.Context, args []string) error {
	fs := m.flags("subscriptions show", subscriptionsHelp)
	source := fs.String("source", "", "the subscription's source (needed when REF exists in several)")
	return m.runView(ctx, fs, args, view{
		arg:  "REF",
		load: func(db *store.DB, ref string) (any, error) { return billing.LookupSubscription(ctx, db, *source, ref) },
		print: func(w io.Writer, v any) error {
			s := v.(*billing.SubscriptionView)
			return fields(w,
				"source", s.Source,
				"ref", s.Ref,
				"customer", dash(s.Customer),
				"plan", dash(s.Plan),
				"status", dash(s.Status),
				"current_period_end", formatTime(s.CurrentPeriodEnd),
				"ended_at", formatTime(s.EndedAt),
				"provider_updated_at", formatTime(s.ProviderUpdatedAt),
				"created_at", formatTime(s.CreatedAt),
				"updated_at", formatTime(s.UpdatedAt))
		},
	})
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

func (m *Main) ledgerBalances(ctx context.Context, args []string) error {
	var b billing.BalancesView
	err := m.runView(ctx, m.flags("ledger balances", ledgerHelp), args, view{
		load: func(db *store.DB, _ string) (any, error) {
			var err error
			b, err = billing.LedgerBalances(ctx, db)
			return b, err
		},
		print: func(w io.Writer, v any) error {
			b := v.(billing.BalancesView)
			tw := newTable(w)
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
			return tw.Flush()
		},
	})
	if err != nil {
		return err
	}
	// Printed either way; an unbalanced ledger then fails the command.
	if bad := b.Unbalanced(); len(bad) > 0 {
		return fmt.Errorf("the ledger does not balance in %s", strings.Join(bad, ", "))
	}
	return nil
}

// --- alerts -----------------------------------------------------------------

const alertsHelp = `Usage: payhook alerts list|ack [flags]

  payhook alerts list [--open] [--kind K] [--limit N] [--json]
  payhook alerts ack [--count N] ID

Alerts are raised by processing (a reused crypto chain reference, an order
paid twice, an event that failed its last attempt), by reconcile (a
difference with the provider), by the source and sink watches (a silent
source, refused signatures, a paused sink) and at ingest; raising one
again counts it and makes it open (unacknowledged) again. --open lists
only the unacknowledged ones; --kind only those of one kind: one of
payhook's, or an application's own once an alert of it is stored (any
other kind is refused, naming payhook's). ack --count N acknowledges the
alert only as listed with COUNT N: one raised again since stays open, so
that an ack does not hide what was not seen. Every subcommand takes --db
URL (env PAYHOOK_DB) like serve.

Examples:
  payhook alerts list --open
  payhook alerts list --kind event_failed --json
  payhook alerts ack 3
  payhook alerts ack --count 2 3`

func (m *Main) alertsList(ctx context.Context, args []string) error {
	fs := m.flags("alerts list", alertsHelp)
	var f billing.AlertFilter
	fs.BoolVar(&f.Unacknowledged, "open", false, "only alerts not acknowledged")
	fs.StringVar(&f.Kind, "kind", "", "only alerts of this kind: "+strings.Join(billing.AlertKinds, ", ")+", or an application's own")
	limitVar(fs, &f.Limit, "alerts, most recently seen first")
	return m.runView(ctx, fs, args, view{
		check: func() error { return checkLimit(f.Limit) },
		load: func(db *store.DB, _ string) (any, error) {
			as, err := billing.ListAlerts(ctx, db, f)
			if errors.Is(err, payhook.ErrInvalid) {
				return nil, fmt.Errorf("%w: --kind: %w", errUsage, err) // a kind neither payhook's nor stored
			}
			return as, err
		},
		print: table("(no alerts)", "ID\tKIND\tSUBJECT\tCOUNT\tACK\tLAST_SEEN\tMESSAGE",
			func(tw io.Writer, a billing.AlertView) {
				ack := "no"
				if a.Acknowledged {
					ack = "yes"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", a.ID, a.Kind, a.Subject, a.Count, ack, formatTime(a.LastSeen),
					strings.ReplaceAll(a.Message, "\n", " "))
			}),
	})
}

func (m *Main) alertsAck(ctx context.Context, args []string) error {
	fs := m.flags("alerts ack", alertsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	count := fs.Int("count", 0, "acknowledge only if its count is still `N`, as alerts list showed it (raised again since: left open)")
	id, err := idArg(fs, args, "alert", "alerts list")
	if err != nil {
		return err
	}
	if *count < 0 {
		return fmt.Errorf("%w: alerts ack: --count %d: want the count alerts list showed", errUsage, *count)
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := billing.AckAlertSeen(ctx, db, id, *count); err != nil {
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
