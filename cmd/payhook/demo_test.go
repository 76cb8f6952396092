package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// TestDemoSaysWhatItDoes: the demo prints a numbered line per phase as
// it plays, and what each did; without a terminal no progress bar (no
// carriage return) is drawn. The money it says the ledger kept is what
// payhook ledger balances shows on the same database
// (provider_receivable + crypto_wallet), not the simulator's own
// figure, which differs when payhook credited the other invoice of a
// reused chain reference (seed 1 at size 0.5 has such a pair: the
// simulator's figure was BTC 433268, the ledger's 399866).
func TestDemoSaysWhatItDoes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		// The flag, not the environment, lets it run on the test
		// cluster (fsync=off); the URL is shown without its password.
		code, out, errOut := run(t, map[string]string{"PAYHOOK_UNSAFE_DURABILITY": ""},
			"demo", "--db", dbURL, "--size", "0.5", "--seed", "1", "--unsafe-durability")
		if code != 0 {
			t.Fatalf("payhook demo = %d\n%s\n%s", code, out, errOut)
		}
		shown := store.Redact(dbURL)
		if strings.HasPrefix(dbURL, "postgres") {
			if shown == dbURL || strings.Contains(out+errOut, dbURL) {
				t.Errorf("demo shows the database's password:\n%s\n%s", out, errOut)
			}
			if !strings.Contains(errOut, "warning: running with --unsafe-durability") {
				t.Errorf("demo on a cluster with fsync=off says nothing of it:\n%s", errOut)
			}
			// The commands it prints are pasted as printed: it says
			// where the password went, as serve does.
			if !strings.Contains(out, "payhook events list --db '"+shown+"'   # with the database's password in place of xxxxx") {
				t.Errorf("demo prints a command with the password hidden without saying so:\n%s", out)
			}
		}
		last := -1
		for _, want := range []string{"[1/5] starting payhook serve on " + shown, "[2/5] playing the storm scenario",
			"[3/5] sending 3 forged deliveries", "      3 answered 400", "[4/5] waiting until every stored event is processed",
			"[5/5] comparing payhook's billing state", "      0 differences", "Look around: payhook events list --db '" + shown + "'"} {
			i := strings.Index(out, want)
			if i <= last {
				t.Errorf("demo output lacks %q after the previous phase:\n%s", want, out)
			}
			last = max(last, i)
		}
		if strings.Contains(out+errOut, "\r") {
			t.Errorf("demo drew a progress bar without a terminal:\n%q", out+errOut)
		}

		m := regexp.MustCompile(`(?m)^ledger\s+kept (.*) \(provider_receivable \+ crypto_wallet`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("demo summary has no ledger line:\n%s", out)
		}
		demoKept := map[string]int64{}
		for _, part := range strings.Split(m[1], ", ") {
			cur, n, _ := strings.Cut(part, " ")
			demoKept[cur], _ = strconv.ParseInt(n, 10, 64)
		}
		code, ledgerOut, errOut := run(t, map[string]string{"PAYHOOK_DB": dbURL}, "ledger", "balances", "--json")
		var ledger billing.BalancesView
		if code != 0 || json.Unmarshal([]byte(ledgerOut), &ledger) != nil {
			t.Fatalf("ledger balances = %d\n%s\n%s", code, ledgerOut, errOut)
		}
		if len(ledger.Balances) == 0 || len(demoKept) != len(ledger.Balances) {
			t.Errorf("demo kept %v; ledger balances has %v", demoKept, ledger.Balances)
		}
		for cur, cb := range ledger.Balances {
			if want := cb.Accounts[billing.AccountReceivable] + cb.Accounts[billing.AccountCryptoWallet]; demoKept[cur] != want {
				t.Errorf("demo kept %s %d; ledger balances shows provider_receivable + crypto_wallet = %d", cur, demoKept[cur], want)
			}
		}
	})
}

// TestDemoLeavesAnInboxAlone: payhook demo --db naming a database that
// holds events (someone's inbox) is refused before it starts its serve:
// that serve, with only the demo source, worked the inbox's queue (an
// event waiting there was attempted, and failed for want of its source's
// provider) and on PostgreSQL joined the instances sharing it.
func TestDemoLeavesAnInboxAlone(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		untouched := seedWaiting(t, dbURL, "shop")
		code, out, errOut := run(t, map[string]string{"PAYHOOK_UNSAFE_DURABILITY": ""},
			"demo", "--db", dbURL, "--size", "0.1", "--unsafe-durability")
		if code != 1 || !strings.Contains(errOut, "already holds events") {
			t.Fatalf("payhook demo on an inbox = %d\n%s\n%s; want 1, refused as holding events", code, out, errOut)
		}
		if strings.Contains(out, "starting payhook serve") {
			t.Errorf("demo started its serve on the inbox before refusing it:\n%s", out)
		}
		untouched()
	})
}

// seedWaiting stores, in a migrated database, an event of source
// waiting to be processed (received, its job enqueued), and returns a
// check that it is still so, never attempted.
func seedWaiting(t *testing.T, dbURL, source string) (untouched func()) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, _, err := migrateAll(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	q, err := jobs.New(db, jobs.Config{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ev := &payhook.Event{Source: source, EventID: "evt_waiting", Type: "checkout.completed", ReceivedAt: time.Now(),
		Payload: []byte(`{"id":"evt_waiting"}`)}
	if _, err := q.Ingest(ctx, []*payhook.Event{ev}); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		got, err := db.Event(ctx, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != payhook.StatusReceived || got.Attempts != 0 {
			t.Errorf("the inbox's waiting event: %s after %d attempts (%s); want untouched", got.Status, got.Attempts, got.LastError)
		}
	}
}

// TestServeWithoutConfigLeavesAnInboxAlone: serve without --config (the
// demo source alone) refuses a database holding another source's events,
// before its workers take their jobs: they failed an attempt of each
// (mapping: unknown provider), and went on until the last one failed it.
func TestServeWithoutConfigLeavesAnInboxAlone(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		untouched := seedWaiting(t, dbURL, "stripe")
		env := map[string]string{"PAYHOOK_DB": dbURL, "PAYHOOK_ADDR": "127.0.0.1:0",
			"PAYHOOK_DEMO_SECRET_FILE": filepath.Join(t.TempDir(), "demo.secret")}
		// Before, serve ran: it is stopped after a few seconds.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var stdout, stderr syncBuffer
		code := (&Main{Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(env)}).Run(ctx, []string{"serve", "--unsafe-durability"})
		untouched()
		if code != 1 || !strings.Contains(stderr.String(), `holds events of source "stripe"`) {
			t.Fatalf("serve without a config on an inbox = %d\n%s\n%s; want 1, refused naming the source", code, stdout.String(), stderr.String())
		}
	})
}

// TestDemoAndBenchLeaveAnotherAppsDatabaseAlone: demo --db and bench --db
// naming another application's database (tables of its own, no payhook
// events) are refused before anything is written: before, demo migrated
// payhook's and River's tables into it beside the application's, ran its
// story there and exited 0 (found by an operator's review). demo exits 1
// as for a database holding events, bench 2 as for an inbox's.
func TestDemoAndBenchLeaveAnotherAppsDatabaseAlone(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.SQL.ExecContext(ctx, `CREATE TABLE customers (id INTEGER PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		table := "customers"
		if db.Engine == store.Postgres {
			table = "public.customers"
		}
		for _, c := range []struct {
			code int
			args []string
		}{
			{1, []string{"demo", "--db", dbURL, "--size", "0.05", "--unsafe-durability"}},
			{2, []string{"bench", "--db", dbURL, "--events", "5", "--duplicates", "0", "--concurrency", "1", "--unsafe-durability"}},
		} {
			code, out, errOut := run(t, map[string]string{"PAYHOOK_UNSAFE_DURABILITY": ""}, c.args...)
			if code != c.code || !strings.Contains(errOut, "holds tables that are not payhook's ("+table+")") {
				t.Errorf("payhook %s on another application's database = %d\n%s\n%s; want %d, refused naming its table",
					c.args[0], code, out, errOut, c.code)
			}
			if has, err := db.HasSchema(ctx); err != nil || has {
				t.Fatalf("after payhook %s: payhook schema %v (%v); want none written", c.args[0], has, err)
			}
			if foreign, err := db.ForeignTables(ctx); err != nil || strings.Join(foreign, ",") != table {
				t.Errorf("after payhook %s: tables %v (%v); want only %s", c.args[0], foreign, err, table)
			}
		}
	})
}

// TestBenchChecksEveryDatabaseFirst: bench --db A --db B, B another
// application's database, is refused before anything is written to A
// either: every --db is checked before the first serve starts. Before,
// A's serve had already migrated payhook's and River's tables into A
// when B was refused.
func TestBenchChecksEveryDatabaseFirst(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.SQL.ExecContext(ctx, `CREATE TABLE customers (id INTEGER PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		first := "sqlite://" + filepath.Join(t.TempDir(), "first.db")
		code, out, errOut := run(t, map[string]string{"PAYHOOK_UNSAFE_DURABILITY": ""}, "bench", "--db", first, "--db", dbURL,
			"--events", "5", "--duplicates", "0", "--concurrency", "1", "--unsafe-durability")
		if code != 2 || !strings.Contains(errOut, "holds tables that are not payhook's") {
			t.Fatalf("payhook bench --db A --db B, B another application's = %d\n%s\n%s; want 2, B refused", code, out, errOut)
		}
		a, err := store.Open(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if has, err := a.HasSchema(ctx); err != nil || has {
			t.Errorf("after the refusal, the first --db has payhook's schema %v (%v); want nothing written", has, err)
		}
	})
}
