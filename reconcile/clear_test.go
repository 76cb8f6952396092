package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
)

// A difference a later run no longer finds is fixed: a run that ends
// without error acknowledges its open alert; those still reported, those
// of another source (even one whose name the source's begins), those of
// objects outside the run's window (an earlier run with a longer --since
// raised it) and all of them after a failed run stay open.
func TestReconcileClearsFixedDifferences(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := at.Add(time.Hour)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		// A provider of its own: the engines run at once, and a failing
		// run of one must not fail the other's.
		var mu sync.Mutex
		failing := false
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				http.Error(w, `{"error":{"type":"request_error","code":"bad_request","detail":"no"}}`, http.StatusBadRequest)
				return
			}
			var data []string
			if r.URL.Path == "/transactions" {
				for _, id := range []string{"txn_1", "txn_2"} {
					data = append(data, `{"id":"`+id+`","status":"completed","currency_code":"EUR","details":{"totals":{"total":"1000",`+
						`"grand_total":"1000","currency_code":"EUR"}},"created_at":"2026-11-30T12:00:00Z"}`)
				}
			}
			fmt.Fprintf(w, `{"data":[%s],"meta":{"pagination":{"has_more":false}}}`, strings.Join(data, ","))
		}))
		t.Cleanup(srv.Close)
		c, err := provider.NewClient("paddle", adapter.ClientConfig{BaseURL: srv.URL, Key: "pdl_sdbx_apikey_x"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		db := openDB(t, dbURL)
		apply := func(do func(tx *billing.Tx) error) {
			t.Helper()
			tx, err := billing.Begin(ctx, db, at)
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
		// Another source, "p2", has an open difference of its own, and a
		// payment of p's outside the runs' window has one too.
		apply(func(tx *billing.Tx) error {
			if err := billing.RaiseAlert(ctx, tx, reconcile.AlertDifference, "p/payment/txn_old", "older"); err != nil {
				return err
			}
			return billing.RaiseAlert(ctx, tx, reconcile.AlertDifference, "p2/payment/txn_1", "p2's")
		})
		run := func() error {
			_, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, Source: "p", Client: c, Since: at.Add(-time.Hour),
				Now: func() time.Time { return now }, MaxAttempts: 1})
			return err
		}
		open := func() []string {
			t.Helper()
			as, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: reconcile.AlertDifference, Unacknowledged: true})
			if err != nil {
				t.Fatal(err)
			}
			var subjects []string
			for _, a := range as {
				subjects = append(subjects, a.Subject)
			}
			slices.Sort(subjects)
			return subjects
		}
		steps := []struct {
			name string
			do   func() error
			want []string
		}{
			{"both missing here", run, []string{"p/payment/txn_1", "p/payment/txn_2", "p/payment/txn_old", "p2/payment/txn_1"}},
			{"txn_1 captured here, then a run", func() error {
				apply(func(tx *billing.Tx) error {
					return billing.Apply(ctx, tx, "p", []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "txn_1", Amount: 1000, Currency: "EUR", CapturedAt: at}}})
				})
				return run()
			}, []string{"p/payment/txn_2", "p/payment/txn_old", "p2/payment/txn_1"}},
			{"txn_2 captured here, then a failed run", func() error {
				apply(func(tx *billing.Tx) error {
					return billing.Apply(ctx, tx, "p", []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "txn_2", Amount: 1000, Currency: "EUR", CapturedAt: at}}})
				})
				mu.Lock()
				failing = true
				mu.Unlock()
				err := run()
				mu.Lock()
				failing = false
				mu.Unlock()
				if err == nil {
					return fmt.Errorf("the failing run returned no error")
				}
				return nil
			}, []string{"p/payment/txn_2", "p/payment/txn_old", "p2/payment/txn_1"}},
			{"a run that succeeds", run, []string{"p/payment/txn_old", "p2/payment/txn_1"}},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if got := open(); !slices.Equal(got, s.want) {
				t.Fatalf("%s: open differences %q; want %q", s.name, got, s.want)
			}
		}
	})
}
