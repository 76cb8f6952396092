package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
)

// A payment with two chargebacks is compared dispute by dispute, whatever
// order the provider lists them in (Paddle: newest first): payhook's
// postings of each dispute against its status at the provider.
func TestReconcileDisputesPerPayment(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := at.Add(time.Hour)
	type dispute struct{ ref, status string } // status: Paddle's, listed newest first
	cases := []struct {
		name     string
		disputes []dispute
		here     []billing.Fact // after the payment's capture
		want     string         // the difference's fields and fix; "" for none
	}{
		{"the newer one lost, unseen here", []dispute{{"adj_2", "approved"}, {"adj_1", "reversed"}},
			[]billing.Fact{billing.ChargedBack{DisputeRef: "adj_1", At: at}, billing.ChargebackWon{DisputeRef: "adj_1", At: at}},
			`status:succeeded→charged_back dispute adj_2:none→charged_back fix:the payment.charged_back event of dispute adj_2`},
		{"both as here", []dispute{{"adj_2", "approved"}, {"adj_1", "reversed"}},
			[]billing.Fact{billing.ChargedBack{DisputeRef: "adj_1", At: at}, billing.ChargebackWon{DisputeRef: "adj_1", At: at},
				billing.ChargedBack{DisputeRef: "adj_2", At: at}}, ""},
		{"both lost, one unseen here", []dispute{{"adj_2", "approved"}, {"adj_1", "approved"}},
			[]billing.Fact{billing.ChargedBack{DisputeRef: "adj_1", At: at}},
			`dispute adj_2:none→charged_back fix:the payment.charged_back event of dispute adj_2`},
		{"the older one won, its win unseen here", []dispute{{"adj_2", "approved"}, {"adj_1", "reversed"}},
			[]billing.Fact{billing.ChargedBack{DisputeRef: "adj_1", At: at}, billing.ChargedBack{DisputeRef: "adj_2", At: at}},
			`dispute adj_1:charged_back→won fix:the payment.chargeback_won event of dispute adj_1`},
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL) // one database, a source per case
		for i, tc := range cases {
			source := fmt.Sprint("paddle", i)
			var adjs []string
			for _, d := range tc.disputes {
				adjs = append(adjs, `{"id":"`+d.ref+`","action":"chargeback","transaction_id":"txn_1","status":"`+d.status+
					`","currency_code":"EUR","totals":{"total":"1000","currency_code":"EUR"},"created_at":"2026-11-30T12:30:00Z"}`)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var data []string
				switch {
				case r.URL.Path == "/transactions":
					data = []string{`{"id":"txn_1","status":"completed","currency_code":"EUR","details":{"totals":{"total":"1000",` +
						`"grand_total":"1000","currency_code":"EUR"}},"created_at":"2026-11-30T12:00:00Z"}`}
				case r.URL.Path == "/adjustments" && r.URL.Query().Get("action") == "chargeback":
					data = adjs
				}
				fmt.Fprintf(w, `{"data":[%s],"meta":{"pagination":{"has_more":false}}}`, strings.Join(data, ","))
			}))
			c, err := provider.NewClient("paddle", adapter.ClientConfig{BaseURL: srv.URL, Key: "pdl_sdbx_apikey_x"})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := billing.Begin(ctx, db, at)
			if err != nil {
				t.Fatal(err)
			}
			facts := []billing.Fact{billing.Captured{Payment: billing.Payment{Ref: "txn_1", Amount: 1000, Currency: "EUR", CapturedAt: at}}}
			for _, f := range tc.here {
				switch f := f.(type) {
				case billing.ChargedBack:
					f.PaymentRef = "txn_1"
					facts = append(facts, f)
				case billing.ChargebackWon:
					f.PaymentRef = "txn_1"
					facts = append(facts, f)
				}
			}
			if err := billing.Apply(ctx, tx, source, facts); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			rep, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, Source: source, Client: c, Since: at.Add(-time.Hour), Now: func() time.Time { return now }})
			srv.Close()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got []string
			for _, d := range rep.Differences {
				var s []string
				for _, f := range d.Fields {
					s = append(s, f.Name+":"+f.Here+"→"+f.Provider)
				}
				fix, _, _ := strings.Cut(d.Fix, ": payhook backfill")
				got = append(got, strings.Join(s, " ")+" fix:"+fix)
			}
			if strings.Join(got, "; ") != tc.want {
				t.Errorf("%s: differences %q; want %q", tc.name, got, tc.want)
			}
		}
	})
}
