package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

var billingT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// seedBilling migrates the database at dbURL and applies a small story:
//
//	stripe: pay_1 captured for ord_1 (10000 USD), refunded 3000; sub_1;
//	        pay_dup (also in paddle)
//	paddle: pay_dup (2500 EUR)
//	crypto: inv_1 settled with chain ref tx_1; inv_2 reusing tx_1:
//	        rejected, one alert
func seedBilling(t *testing.T, dbURL string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	apply := func(source string, facts ...billing.Fact) {
		t.Helper()
		tx, err := billing.Begin(ctx, db, billingT0)
		if err != nil {
			t.Fatal(err)
		}
		if err := billing.Apply(ctx, tx, source, facts); err != nil {
			tx.Rollback()
			t.Fatalf("apply %s: %v", source, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	apply("stripe",
		billing.Captured{Payment: billing.Payment{Ref: "pay_1", OrderID: "ord_1", Amount: 10000, Currency: "USD", CapturedAt: billingT0}},
		billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 3000, Currency: "USD", At: billingT0},
		billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active",
			CurrentPeriodEnd: billingT0.AddDate(0, 1, 0), UpdatedAt: billingT0},
		billing.Captured{Payment: billing.Payment{Ref: "pay_dup", OrderID: "ord_dup", Amount: 1000, Currency: "USD", CapturedAt: billingT0}},
	)
	apply("paddle", billing.Captured{Payment: billing.Payment{Ref: "pay_dup", OrderID: "ord_dup", Amount: 2500, Currency: "EUR", CapturedAt: billingT0}})
	apply("crypto", billing.Settled{InvoiceRef: "inv_1", OrderID: "ord_2", Amount: 50000, Currency: "BTC", ChainRef: "tx_1", At: billingT0})
	apply("crypto", billing.Settled{InvoiceRef: "inv_2", OrderID: "ord_3", Amount: 50000, Currency: "BTC", ChainRef: "tx_1", At: billingT0})
}

// cli runs one billing command in-process like main does, with PAYHOOK_DB
// set to dbURL, and returns its stdout and error.
func cli(t *testing.T, dbURL string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr syncBuffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Now: time.Now,
		Getenv: func(k string) string {
			if k == "PAYHOOK_DB" {
				return dbURL
			}
			return ""
		}}
	c, ok := lookup(args[0])
	if !ok {
		t.Fatalf("no command %q", args[0])
	}
	err := c.run(m, context.Background(), args[1:])
	return stdout.String(), err
}

// mustCLI runs the command, wants no error, and decodes its output into v
// when v is not nil.
func mustCLI(t *testing.T, dbURL string, v any, args ...string) string {
	t.Helper()
	out, err := cli(t, dbURL, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("%v: decode %q: %v", args, out, err)
		}
	}
	return out
}

// hasRow reports whether out has a line whose fields match the words in
// order, separated by the table's spacing.
func hasRow(out string, words ...string) bool {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = regexp.QuoteMeta(w)
	}
	return regexp.MustCompile(`(?m)^` + strings.Join(quoted, `\s+`) + `(\s|$)`).MatchString(out)
}

func TestBillingCommands(t *testing.T) {
	for _, name := range []string{"alerts", "ledger", "orders", "payments", "subscriptions"} {
		if c, ok := lookup(name); !ok || c.run == nil {
			t.Errorf("the command table has no %q", name)
		}
	}
}

func TestBillingCLI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		seedBilling(t, dbURL)

		t.Run("payments", func(t *testing.T) {
			out := mustCLI(t, dbURL, nil, "payments", "list")
			if !hasRow(out, "SOURCE", "REF", "KIND", "STATUS", "AMOUNT", "CURRENCY", "REFUNDED", "ORDER") ||
				!hasRow(out, "stripe", "pay_1", "fiat", "partially_refunded", "10000", "USD", "3000", "ord_1") ||
				!hasRow(out, "crypto", "inv_2", "crypto", "rejected", "50000", "BTC", "0", "ord_3") {
				t.Errorf("payments list:\n%s", out)
			}
			var ps []billing.PaymentView
			mustCLI(t, dbURL, &ps, "payments", "list", "--source", "stripe", "--status", "partially_refunded", "--json")
			if len(ps) != 1 || ps[0].Ref != "pay_1" || ps[0].RefundedAmount != 3000 || ps[0].OrderID != "ord_1" {
				t.Errorf("payments list --json = %+v; want pay_1", ps)
			}
			mustCLI(t, dbURL, &ps, "payments", "list", "--kind", "crypto", "--json", "--limit", "1")
			if len(ps) != 1 || ps[0].Kind != "crypto" {
				t.Errorf("payments list --kind crypto --limit 1 = %+v", ps)
			}
			mustCLI(t, dbURL, &ps, "payments", "list", "--order", "nope", "--json")
			if ps == nil || len(ps) != 0 {
				t.Errorf("payments of an unknown order = %#v; want []", ps)
			}

			out = mustCLI(t, dbURL, nil, "payments", "show", "pay_1")
			if !hasRow(out, "status", "partially_refunded") || !hasRow(out, "amount", "10000", "USD") ||
				!strings.Contains(out, "capture:pay_1") || !strings.Contains(out, "refund:re_1") ||
				!strings.Contains(out, "provider_receivable -3000") {
				t.Errorf("payments show:\n%s", out)
			}
			var p billing.PaymentDetail
			mustCLI(t, dbURL, &p, "payments", "show", "pay_1", "--json")
			if p.Source != "stripe" || p.Status != "partially_refunded" || len(p.Postings) != 2 ||
				p.Postings[1].FactKey != "refund:re_1" || p.Postings[1].ReversesID != p.Postings[0].ID {
				t.Errorf("payments show --json = %+v", p)
			}
			mustCLI(t, dbURL, &p, "payments", "show", "--source", "paddle", "pay_dup", "--json")
			if p.Source != "paddle" || p.Amount != 2500 || p.Currency != "EUR" {
				t.Errorf("payments show pay_dup --source paddle = %+v", p.PaymentView)
			}
			_, err := cli(t, dbURL, "payments", "show", "pay_dup")
			if !errors.Is(err, errUsage) || !errors.Is(err, payhook.ErrConflict) || !strings.Contains(err.Error(), "--source paddle") {
				t.Errorf("payments show of an ambiguous ref: %v; want a usage error naming the sources", err)
			}
		})

		t.Run("orders", func(t *testing.T) {
			out := mustCLI(t, dbURL, nil, "orders", "list")
			if !hasRow(out, "stripe", "ord_1", "paid", "pay_1") || !hasRow(out, "crypto", "ord_2", "paid", "inv_1") ||
				!hasRow(out, "paddle", "ord_dup", "paid", "pay_dup") || !hasRow(out, "stripe", "ord_dup", "paid", "pay_dup") {
				t.Errorf("orders list:\n%s", out)
			}
			if out := mustCLI(t, dbURL, nil, "orders", "list", "--source", "paddle"); !hasRow(out, "paddle", "ord_dup") ||
				strings.Contains(out, "ord_1") {
				t.Errorf("orders list --source paddle:\n%s", out)
			}
			var list []billing.OrderView
			mustCLI(t, dbURL, &list, "orders", "list", "--status", "paid", "--json")
			paid := map[string]string{}
			for _, o := range list {
				paid[o.OrderID] = o.PaidBy
			}
			if paid["ord_1"] != "pay_1" || paid["ord_2"] != "inv_1" {
				t.Errorf("orders list --json = %+v", list)
			}
			out = mustCLI(t, dbURL, nil, "orders", "show", "ord_1")
			if !hasRow(out, "status", "paid") || !hasRow(out, "paid_by", "pay_1") {
				t.Errorf("orders show:\n%s", out)
			}
			var o billing.OrderView
			mustCLI(t, dbURL, &o, "orders", "show", "ord_1", "--json")
			if o.Source != "stripe" || o.OrderID != "ord_1" || o.Status != "paid" || o.PaidBy != "pay_1" || o.PaidAt.IsZero() {
				t.Errorf("orders show --json = %+v", o)
			}
			mustCLI(t, dbURL, &o, "orders", "show", "--source", "paddle", "ord_dup", "--json")
			if o.Source != "paddle" || o.OrderID != "ord_dup" || o.PaidBy != "pay_dup" {
				t.Errorf("orders show ord_dup --source paddle = %+v", o)
			}
			_, err := cli(t, dbURL, "orders", "show", "ord_dup")
			if !errors.Is(err, errUsage) || !errors.Is(err, payhook.ErrConflict) || !strings.Contains(err.Error(), "--source paddle") {
				t.Errorf("orders show of an ambiguous order id: %v; want a usage error naming the sources", err)
			}
		})

		t.Run("subscriptions", func(t *testing.T) {
			out := mustCLI(t, dbURL, nil, "subscriptions", "list")
			if !hasRow(out, "stripe", "sub_1", "cus_1", "pro", "active") {
				t.Errorf("subscriptions list:\n%s", out)
			}
			var ss []billing.SubscriptionView
			mustCLI(t, dbURL, &ss, "subscriptions", "list", "--status", "active", "--customer", "cus_1", "--json")
			if len(ss) != 1 || ss[0].Ref != "sub_1" || ss[0].Plan != "pro" {
				t.Errorf("subscriptions list --json = %+v", ss)
			}
			out = mustCLI(t, dbURL, nil, "subscriptions", "show", "sub_1")
			if !hasRow(out, "plan", "pro") || !hasRow(out, "status", "active") || !hasRow(out, "ended_at", "-") {
				t.Errorf("subscriptions show:\n%s", out)
			}
			var s billing.SubscriptionView
			mustCLI(t, dbURL, &s, "subscriptions", "show", "sub_1", "--source", "stripe", "--json")
			if s.Source != "stripe" || s.Customer != "cus_1" || !s.CurrentPeriodEnd.Equal(billingT0.AddDate(0, 1, 0)) {
				t.Errorf("subscriptions show --json = %+v", s)
			}
		})

		t.Run("ledger", func(t *testing.T) {
			out := mustCLI(t, dbURL, nil, "ledger", "balances")
			for _, row := range [][]string{
				{"USD", "provider_receivable", "8000"}, {"USD", "revenue", "-8000"}, {"USD", "(sum)", "0"},
				{"EUR", "provider_receivable", "2500"}, {"EUR", "(sum)", "0"},
				{"BTC", "crypto_wallet", "50000"}, {"BTC", "revenue", "-50000"}, {"BTC", "(sum)", "0"},
			} {
				if !hasRow(out, row...) {
					t.Errorf("ledger balances has no row %v:\n%s", row, out)
				}
			}
			var b billing.BalancesView
			mustCLI(t, dbURL, &b, "ledger", "balances", "--json")
			if len(b.Balances) != 3 || b.Balances["USD"].Accounts[billing.AccountReceivable] != 8000 ||
				b.Balances["BTC"].Accounts[billing.AccountCryptoWallet] != 50000 {
				t.Errorf("ledger balances --json = %+v", b)
			}
			for cur, cb := range b.Balances {
				var sum int64
				for _, v := range cb.Accounts {
					sum += v
				}
				if sum != 0 || cb.Sum != 0 {
					t.Errorf("%s sums to %d (says %d); want 0", cur, sum, cb.Sum)
				}
			}
		})

		t.Run("alerts", func(t *testing.T) {
			out := mustCLI(t, dbURL, nil, "alerts", "list")
			if !hasRow(out, "ID", "KIND", "SUBJECT", "COUNT", "ACK") ||
				!regexp.MustCompile(`(?m)^\d+\s+crypto_reference_reused\s+tx_1\s+1\s+no\s`).MatchString(out) {
				t.Errorf("alerts list:\n%s", out)
			}
			var as []billing.AlertView
			mustCLI(t, dbURL, &as, "alerts", "list", "--open", "--json")
			if len(as) != 1 || as[0].Kind != billing.AlertCryptoReferenceReused || as[0].Subject != "tx_1" || as[0].Acknowledged {
				t.Fatalf("alerts list --open --json = %+v; want the reused chain ref", as)
			}
			id := as[0].ID
			// --kind takes payhook's kinds and those stored: a misspelt
			// one listed nothing, which reads as "none of that kind".
			mustCLI(t, dbURL, &as, "alerts", "list", "--kind", billing.AlertCryptoReferenceReused, "--json")
			if len(as) != 1 || as[0].Subject != "tx_1" {
				t.Errorf("alerts list --kind crypto_reference_reused = %+v; want the reused chain ref", as)
			}
			mustCLI(t, dbURL, &as, "alerts", "list", "--kind", billing.AlertSourceSilent, "--json")
			if len(as) != 0 {
				t.Errorf("alerts list --kind source_silent = %+v; want none", as)
			}
			code, out, errOut := run(t, map[string]string{"PAYHOOK_DB": dbURL}, "alerts", "list", "--kind", "crypto_reference_reuse")
			if code != 2 || out != "" || !strings.Contains(errOut, `alert kind "crypto_reference_reuse": want one of `+strings.Join(billing.AlertKinds, ", ")) {
				t.Errorf("alerts list --kind crypto_reference_reuse = %d\n%s\n%s; want 2, naming the known kinds", code, out, errOut)
			}
			out = mustCLI(t, dbURL, nil, "alerts", "ack", strconv.FormatInt(id, 10))
			if !strings.Contains(out, "acknowledged") {
				t.Errorf("alerts ack: %q", out)
			}
			mustCLI(t, dbURL, &as, "alerts", "list", "--open", "--json")
			if len(as) != 0 {
				t.Errorf("open alerts after ack = %+v; want none", as)
			}
			mustCLI(t, dbURL, &as, "alerts", "list", "--json")
			if len(as) != 1 || !as[0].Acknowledged {
				t.Errorf("alerts after ack = %+v; want one, acknowledged", as)
			}
			if out := mustCLI(t, dbURL, nil, "alerts", "list", "--open"); !strings.Contains(out, "(no alerts)") {
				t.Errorf("alerts list --open with none open:\n%s", out)
			}
		})

		t.Run("not found", func(t *testing.T) {
			for _, args := range [][]string{
				{"payments", "show", "pay_nope"},
				{"payments", "show", "pay_1", "--source", "paddle"},
				{"orders", "show", "ord_nope", "--json"},
				{"orders", "show", "ord_1", "--source", "paddle"},
				{"subscriptions", "show", "sub_nope"},
				{"alerts", "ack", "999999"},
			} {
				out, err := cli(t, dbURL, args...)
				if !errors.Is(err, payhook.ErrNotFound) || !strings.Contains(err.Error(), "not found") || errors.Is(err, errUsage) || out != "" {
					t.Errorf("%v: %v, stdout %q; want a not found error and no output", args, err, out)
				}
			}
		})

		t.Run("usage", func(t *testing.T) {
			for _, args := range [][]string{
				{"payments"},
				{"payments", "delete"},
				{"payments", "list", "--bogus"},
				{"payments", "list", "--status", "lost"},
				{"payments", "list", "--kind", "cash"},
				{"payments", "list", "--limit", "0"},
				{"payments", "list", "extra"},
				{"payments", "show"},
				{"payments", "show", "a", "b"},
				{"orders", "list", "--status", "maybe"},
				{"orders", "show", "--json"},
				{"subscriptions", "list", "--limit", "x"},
				{"subscriptions", "list", "--status", "cancelled"},
				{"ledger"},
				{"ledger", "postings"},
				{"ledger", "balances", "--bogus"},
				{"alerts", "list", "--acknowledged"},
				{"alerts", "list", "--kind", "event_faild"},
				{"payments", "list", "--source", "shop\xff"},
				{"subscriptions", "list", "--customer", "cus\x00"},
				{"payments", "show", "pay\xff"},
				{"events", "list", "--type", "a\x00"},
				{"alerts", "ack", "x"},
				{"alerts", "ack"},
			} {
				out, err := cli(t, dbURL, args...)
				if !errors.Is(err, errUsage) || out != "" {
					t.Errorf("%v: %v, stdout %q; want a usage error", args, err, out)
				}
			}
		})
	})
}

func TestBillingHelp(t *testing.T) {
	for _, cmd := range []string{"payments", "orders", "subscriptions", "ledger", "alerts"} {
		out, err := cli(t, "", cmd, "--help")
		if err != nil || !strings.Contains(out, "Usage: payhook "+cmd) || !strings.Contains(out, "Examples:") {
			t.Errorf("%s --help: %v\n%s", cmd, err, out)
		}
	}
	if _, err := cli(t, "", "payments", "list", "--help"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("payments list --help: %v; want flag.ErrHelp", err)
	}
}

// TestBillingMissingDatabase: like the events commands, the billing views
// refuse a database that does not exist or was never migrated, and create
// nothing.
func TestBillingMissingDatabase(t *testing.T) {
	dir := t.TempDir()
	missing := "sqlite://" + filepath.Join(dir, "typo.db")
	empty := filepath.Join(dir, "empty.db")
	for _, args := range [][]string{
		{"payments", "list"}, {"payments", "show", "pay_1"}, {"orders", "list"}, {"orders", "show", "o"},
		{"subscriptions", "list"}, {"subscriptions", "show", "s"}, {"ledger", "balances"},
		{"alerts", "list"}, {"alerts", "ack", "1"},
	} {
		if _, err := cli(t, missing, args...); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("%v on a missing database: %v; want does not exist", args, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the billing commands created %v", entries)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, "sqlite://"+empty, "ledger", "balances"); err == nil || !strings.Contains(err.Error(), "no payhook schema") {
		t.Errorf("ledger balances on an unmigrated database: %v; want no payhook schema", err)
	}
}
