package sim_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/flavour"
)

// verifyingServer answers 200 to deliveries that payhook's verifier for
// the flavour accepts and counts them by stored event id.
func verifyingServer(t *testing.T, f flavour.Flavour, secret string) (*httptest.Server, func() map[string]int) {
	t.Helper()
	v, err := provider.New(provider.Options{Provider: f.Provider(), Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		env, err := v.Verify(payhook.Delivery{Header: r.Header, Body: body, ReceivedAt: time.Now()})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[env.EventID]++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

func TestStormEveryFlavour(t *testing.T) {
	for _, name := range flavour.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, _ := flavour.ByName(name)
			secret := f.NewSecret()
			srv, seen := verifyingServer(t, f, secret)
			res, _, err := sim.Run(context.Background(), "storm", sim.RunConfig{
				Target: srv.URL, Secret: secret, Flavour: f, Seed: 3, TimeScale: 20000, Size: 0.2,
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			st := res.Stats
			if st.Duplicates == 0 || st.Bursts == 0 || st.Outage == 0 || st.Dropped != 0 || st.GaveUp != 0 {
				t.Fatalf("stats %+v: want duplicates, bursts and outage failures, nothing dropped or given up", st)
			}
			got := seen()
			for _, ev := range res.Expected.Events {
				if !ev.Delivered || got[ev.StoredID] == 0 {
					t.Fatalf("event %s (%s) delivered=%v, verified %d times", ev.ID, ev.Type, ev.Delivered, got[ev.StoredID])
				}
			}
			if len(got) != len(res.Expected.Events) {
				t.Fatalf("receiver saw %d distinct events, provider created %d", len(got), len(res.Expected.Events))
			}
			if name == "billete" || name == "crypto" {
				if len(res.Expected.Alerts) != 1 || res.Expected.Alerts[0].Kind != sim.AlertReusedReference {
					t.Fatalf("alerts = %+v, want one reused reference", res.Expected.Alerts)
				}
			}
		})
	}
}

// The storm wins back a third of its chargebacks, one of them of a
// partially refunded payment, and expects their money kept again.
func TestStormWinsChargebacksBack(t *testing.T) {
	t.Parallel()
	f := flavour.Billete()
	secret := f.NewSecret()
	srv, _ := verifyingServer(t, f, secret)
	res, _, err := sim.Run(context.Background(), "storm", sim.RunConfig{Target: srv.URL, Secret: secret, Flavour: f,
		Seed: 7, TimeScale: 20000, Size: 0.15, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ev := range res.Expected.Events {
		count[ev.Type]++
	}
	if cb, won := count[flavour.PaymentChargedBack], count[flavour.ChargebackWon]; cb < 3 || won != (cb+1)/3 {
		t.Fatalf("%d chargebacks, %d won; want every third won", cb, won)
	}
	balances := map[string]int64{}
	statuses := map[string]int{}
	for _, p := range res.Expected.Payments {
		if p.DisputeID == "" {
			balances[p.Currency] += p.Amount - p.RefundedAmount
			continue
		}
		statuses[p.Status]++
		if p.Status != "charged_back" {
			balances[p.Currency] += p.Amount - p.RefundedAmount
		}
	}
	if statuses["succeeded"] == 0 || statuses["partially_refunded"] == 0 || statuses["charged_back"] == 0 {
		t.Errorf("disputed payments end %v; want some won back to each status, some lost", statuses)
	}
	for _, inv := range res.Expected.Invoices {
		if inv.Credited {
			balances[inv.Currency] += inv.Amount
		}
	}
	for cur, n := range res.Expected.Balances {
		if balances[cur] != n {
			t.Errorf("balance %s: expected %d, payments say %d", cur, n, balances[cur])
		}
	}
}

func TestStormIsReproducible(t *testing.T) {
	t.Parallel()
	run := func() *sim.Result {
		f := flavour.Billete()
		secret := f.NewSecret()
		srv, _ := verifyingServer(t, f, secret)
		res, _, err := sim.Run(context.Background(), "storm", sim.RunConfig{Target: srv.URL, Secret: secret, Flavour: f,
			Seed: 42, TimeScale: 20000, Size: 0.1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(), run()
	ja, _ := json.Marshal(ids(a))
	jb, _ := json.Marshal(ids(b))
	if string(ja) != string(jb) || a.Stats.Duplicates != b.Stats.Duplicates || a.Stats.Bursts != b.Stats.Bursts {
		t.Fatalf("same seed, different runs:\n%s\n%s", ja, jb)
	}
}

func ids(r *sim.Result) []string {
	var out []string
	for _, ev := range r.Expected.Events {
		out = append(out, ev.ID+" "+ev.Type)
	}
	return out
}

// TestOutageDropsOnlyTheEventsAPIFinds: dropped events never reach the
// receiver but are listed by GET /events.
func TestOutageDropsOnlyTheEventsAPIFinds(t *testing.T) {
	t.Parallel()
	f := flavour.Billete()
	secret := f.NewSecret()
	srv, seen := verifyingServer(t, f, secret)
	res, p, err := sim.Run(context.Background(), "outage", sim.RunConfig{Target: srv.URL, Secret: secret, Flavour: f,
		Seed: 9, TimeScale: 20000, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lost := res.Expected.Undelivered()
	if len(lost) == 0 || res.Stats.Dropped != len(lost) || res.Stats.Outage == 0 {
		t.Fatalf("%d undelivered, stats %+v: want some dropped and outage failures", len(lost), res.Stats)
	}
	got := seen()
	api := httptest.NewServer(p.Handler())
	defer api.Close()
	test, _ := p.Keys()
	listed := map[string]bool{}
	query := ""
	for {
		req, _ := http.NewRequest("GET", api.URL+"/events?limit=50"+query, nil)
		req.Header.Set("Authorization", "Bearer "+test)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /events: %v %v", resp.Status, err)
		}
		var page struct {
			Data       []struct{ ID string }
			NextCursor string `json:"next_cursor"`
		}
		json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		for _, ev := range page.Data {
			listed[ev.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		query = "&cursor=" + page.NextCursor
	}
	for _, ev := range lost {
		if got[ev.StoredID] != 0 || !listed[ev.ID] {
			t.Fatalf("dropped event %s: received %d times, listed %v; want 0 and listed", ev.ID, got[ev.StoredID], listed[ev.ID])
		}
	}
	if len(listed) != len(res.Expected.Events) {
		t.Fatalf("events API listed %d, provider created %d", len(listed), len(res.Expected.Events))
	}
}
