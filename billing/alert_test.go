package billing_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

func TestAlertsAndReads(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		raise(t, db, billing.AlertEventFailed, "evt_1", "boom", t0)
		raise(t, db, billing.AlertEventFailed, "evt_1", "boom again", t0.Add(time.Minute))
		as := alerts(t, db)
		if len(as) != 1 || as[0].Count != 2 || as[0].Message != "boom again" || !as[0].FirstSeen.Equal(t0) ||
			!as[0].LastSeen.Equal(t0.Add(time.Minute)) || as[0].Acknowledged {
			t.Fatalf("alerts = %+v", as)
		}
		if err := billing.AckAlert(ctx, db, as[0].ID); err != nil {
			t.Fatal(err)
		}
		if un := listAlerts(t, db, billing.AlertFilter{Unacknowledged: true}); len(un) != 0 {
			t.Fatalf("unacknowledged = %+v", un)
		}
		if as := alerts(t, db); !as[0].Acknowledged {
			t.Fatalf("alert not acknowledged: %+v", as[0])
		}
		raise(t, db, billing.AlertEventFailed, "evt_1", "boom", t0.Add(2*time.Minute))
		if un := listAlerts(t, db, billing.AlertFilter{Unacknowledged: true, Kind: billing.AlertEventFailed}); len(un) != 1 || un[0].Count != 3 {
			t.Fatalf("raised again: %+v; want unacknowledged, count 3", un)
		}
		if err := billing.AckAlert(ctx, db, 999); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("AckAlert(999) = %v; want ErrNotFound", err)
		}
		if _, err := billing.GetPayment(ctx, db, src, "nope"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetPayment = %v; want ErrNotFound", err)
		}
		if _, err := billing.GetOrder(ctx, db, src, "nope"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetOrder = %v; want ErrNotFound", err)
		}
		if _, err := billing.GetSubscription(ctx, db, src, "nope"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetSubscription = %v; want ErrNotFound", err)
		}
		// Scoped by source.
		apply(t, db, billing.Captured{Payment: pay("pay_1", "", 1, "USD")})
		if _, err := billing.GetPayment(ctx, db, "other", "pay_1"); !errors.Is(err, payhook.ErrNotFound) {
			t.Fatalf("GetPayment(other source) = %v; want ErrNotFound", err)
		}
	})
}

// A filter by kind takes payhook's kinds and an application's own once
// one is stored (RaiseAlert takes any kind); a kind neither payhook's nor
// stored is refused, since its empty list would read as "none of that
// kind" when the kind is misspelt.
func TestListAlertsByKind(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		if as := listAlerts(t, db, billing.AlertFilter{Kind: billing.AlertSinkPaused}); len(as) != 0 {
			t.Fatalf("payhook's kind, none raised: %+v; want none", as)
		}
		if _, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: "stock_low"}); !errors.Is(err, payhook.ErrInvalid) ||
			!strings.Contains(err.Error(), `"stock_low": want one of `+strings.Join(billing.AlertKinds, ", ")) {
			t.Fatalf("an unknown kind, none stored: %v; want ErrInvalid naming the kinds", err)
		}
		raise(t, db, "stock_low", "sku_1", "3 left", t0)
		as := listAlerts(t, db, billing.AlertFilter{Kind: "stock_low"})
		if len(as) != 1 || as[0].Subject != "sku_1" {
			t.Fatalf("the application's kind: %+v; want its alert", as)
		}
		if err := billing.AckAlert(ctx, db, as[0].ID); err != nil {
			t.Fatal(err)
		}
		if as := listAlerts(t, db, billing.AlertFilter{Kind: "stock_low", Unacknowledged: true}); len(as) != 0 {
			t.Fatalf("the application's kind, acknowledged, open only: %+v; want none, no error", as)
		}
	})
}

// An alert raised once per occurrence and then resolved (what it reported
// was fixed) is raised again by the very same occurrence, with one more
// alert.raised fact; acknowledged by hand, it is not.
func TestResolvedAlertRaisesAgain(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		in := func(do func(tx *billing.Tx) error) {
			t.Helper()
			tx, err := billing.Begin(ctx, db, t0)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := do(tx); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		raiseOnce := func() (raised bool) {
			in(func(tx *billing.Tx) (err error) {
				raised, err = billing.RaiseAlertOnce(ctx, tx, "k", "s/payment/p1", "s/payment/p1/missing_here", "missing")
				return err
			})
			return raised
		}
		resolve := func(id int64) (resolved bool) {
			in(func(tx *billing.Tx) (err error) {
				resolved, err = billing.ResolveAlert(ctx, tx, "k", id)
				return err
			})
			return resolved
		}
		if !raiseOnce() || raiseOnce() {
			t.Fatal("the first RaiseAlertOnce raises, the second does not")
		}
		id := alerts(t, db)[0].ID
		if resolve(id + 1) {
			t.Error("ResolveAlert of another id resolved something")
		}
		if !resolve(id) || resolve(id) {
			t.Fatal("the first ResolveAlert resolves, the second does not")
		}
		if !raiseOnce() {
			t.Fatal("the same occurrence after ResolveAlert raised nothing")
		}
		if as := alerts(t, db); len(as) != 1 || as[0].Acknowledged || as[0].Count != 2 {
			t.Fatalf("alerts = %+v; want one, open, count 2", as)
		}
		if n := len(facts(t, db)); n != 2 {
			t.Fatalf("%d alert.raised facts; want 2", n)
		}
		if err := billing.AckAlert(ctx, db, id); err != nil {
			t.Fatal(err)
		}
		if raiseOnce() {
			t.Error("the same occurrence after AckAlert raised the alert again")
		}
	})
}

// TestAlertKindsComplete: every alert kind the module defines (a constant
// named Alert... whose value is a string literal, in any package: store,
// outbox and reconcile raise kinds of their own) is in
// billing.AlertKinds, which payhook alerts list --kind, the API and the
// console check a kind filter against: a kind missing there could not be
// listed. Fact types (alert.raised) are not alert kinds.
func TestAlertKindsComplete(t *testing.T) {
	found := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Alert") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if v, err := strconv.Unquote(lit.Value); err == nil && !strings.Contains(v, ".") {
						found[v] = path + ": " + name.Name
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 10 {
		t.Fatalf("found %d alert kinds in the module (%v); the scan is broken", len(found), found)
	}
	for kind, where := range found {
		if !slices.Contains(billing.AlertKinds, kind) {
			t.Errorf("alert kind %q (%s) is not in billing.AlertKinds", kind, where)
		}
	}
	if !slices.IsSorted(billing.AlertKinds) {
		t.Errorf("billing.AlertKinds is not sorted: %v", billing.AlertKinds)
	}
}
