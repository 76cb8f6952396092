package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
)

// A payment the provider made before the window, whose webhook payhook
// processed only inside it (delivered late, or backfilled with a longer
// --since), is outside the window: the provider lists it no more (its
// created is before the window), and it is not reported missing at the
// provider, which no later run would ever clear.
func TestReconcileLatePaymentNotMissingAtProvider(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		// The provider lists what was created in the window: nothing.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"object":"list","data":[],"has_more":false,"next_cursor":null}`)
		}))
		t.Cleanup(srv.Close)
		c, err := provider.NewClient("billete", adapter.ClientConfig{BaseURL: srv.URL, Key: "sk_test_x"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		db := openDB(t, dbURL)
		// Captured at the provider 5 hours ago, processed 10 minutes ago.
		tx, err := billing.Begin(ctx, db, now.Add(-10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := billing.Apply(ctx, tx, "shop", []billing.Fact{billing.Captured{Payment: billing.Payment{
			Ref: "pay_old", Amount: 1000, Currency: "EUR", CapturedAt: now.Add(-5 * time.Hour)}}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		rep, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, Source: "shop", Client: c, Since: now.Add(-time.Hour),
			Now: func() time.Time { return now }, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Differences) != 0 {
			t.Fatalf("differences %+v; want none: the payment was made before the window", rep.Differences)
		}
	})
}

// A payment missing here stays reported until it is fixed: a later run
// whose window starts after the payment was made, but lists it all the
// same (Slack), does not report it (it is before the window) and must not
// take that for a fix and clear its alert. As a schedule of every 1h and
// window 3h does: the second run's window starts 30 minutes after it.
func TestReconcileSlackDoesNotClearAnOpenDifference(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	created := at.Add(-150 * time.Minute)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			data := ""
			if r.URL.Path == "/payments" {
				data = `{"id":"pay_1","object":"payment","amount":1000,"currency":"eur","status":"succeeded",` +
					`"refunded_amount":0,"created_at":"` + created.Format(time.RFC3339) + `"}`
			}
			fmt.Fprintf(w, `{"object":"list","data":[%s],"has_more":false,"next_cursor":null}`, data)
		}))
		t.Cleanup(srv.Close)
		c, err := provider.NewClient("billete", adapter.ClientConfig{BaseURL: srv.URL, Key: "sk_test_x"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		db := openDB(t, dbURL)
		open := func() int {
			t.Helper()
			as, err := billing.ListAlerts(ctx, db, billing.AlertFilter{Kind: reconcile.AlertDifference, Unacknowledged: true})
			if err != nil {
				t.Fatal(err)
			}
			return len(as)
		}
		for i, now := range []time.Time{at, at.Add(time.Hour)} {
			rep, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, Source: "shop", Client: c, Since: now.Add(-3 * time.Hour),
				Now: func() time.Time { return now }, MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			if n := open(); n != 1 {
				t.Fatalf("run %d: %d open differences (report %+v); want pay_1's, still missing here", i+1, n, rep.Differences)
			}
		}
	})
}
