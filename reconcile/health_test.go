package reconcile_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/receiver"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

// TestCheckSilence: a source silent for longer than its silence raises
// one alert per silent spell, however often it is checked; an event
// coming in clears it; a new spell raises it again.
func TestCheckSilence(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		receive := func(id string, at time.Time) {
			tx, err := db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			ev := &payhook.Event{Source: "shop", EventID: id, Type: "x", ReceivedAt: at, OccurredAt: at, Payload: []byte(`{}`), Status: payhook.StatusReceived}
			if _, err := db.InsertEventsTx(ctx, tx, []*payhook.Event{ev}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		alert := func() (count int, acked bool) {
			db.SQL.QueryRow(`SELECT count, acknowledged FROM payhook_alerts WHERE kind = $1`, reconcile.AlertSilence).Scan(&count, &acked)
			return
		}
		check := func(at time.Time, want bool) {
			t.Helper()
			if silent, err := reconcile.CheckSilence(ctx, db, "shop", time.Hour, at); silent != want || err != nil {
				t.Fatalf("CheckSilence at %s = %v, %v; want %v", at, silent, err, want)
			}
		}
		check(t0, false) // nothing ever received: not judged
		receive("evt_1", t0)
		check(t0.Add(30*time.Minute), false)
		check(t0.Add(2*time.Hour), true)
		check(t0.Add(3*time.Hour), true)
		if n, acked := alert(); n != 1 || acked {
			t.Fatalf("alert count %d, acknowledged %v; want raised once, open", n, acked)
		}
		receive("evt_2", t0.Add(3*time.Hour))
		check(t0.Add(3*time.Hour+time.Minute), false)
		if n, acked := alert(); n != 1 || !acked {
			t.Fatalf("alert count %d, acknowledged %v; want cleared", n, acked)
		}
		check(t0.Add(5*time.Hour), true)
		if n, acked := alert(); n != 2 || acked {
			t.Fatalf("alert count %d, acknowledged %v; want raised again for the new spell", n, acked)
		}
	})
}

// TestCheckSignatures: refused signatures counted by two instances'
// receivers (in memory, flushed to one database) raise one
// signature_failures alert when they reach the limit within the window
// with no valid signature after them; more failures and more checks raise
// nothing more; a valid signature clears it; a new burst raises it again.
// Failures spread wider than the window, or followed by a valid one, are
// no burst; a failed flush keeps its counts; a day later the counts are
// pruned but the alert stays until a valid signature comes.
func TestCheckSignatures(t *testing.T) {
	t.Parallel()
	const secret = "whsec_c2lnbmF0dXJlIGhlYWx0aCB0ZXN0IHNlY3JldA=="
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		clk := &clock{t: t0}
		// Two instances: a receiver each, counting in its own memory.
		var counters [2]*reconcile.SignatureCounter
		var urls [2]string
		for i := range counters {
			c := reconcile.NewSignatureCounter(db, 10*time.Second)
			v, err := billete.New(billete.Config{Secrets: []string{secret}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := receiver.New(receiver.Config{
				Sources: []payhook.Source{{Name: "shop", Provider: "billete", Verifier: v}},
				Inbox:   inboxOf(t, db), Now: clk.now, Logger: slog.New(slog.DiscardHandler),
				OnSignature: c.Observe,
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)
			counters[i], urls[i] = c, srv.URL+"/webhooks/shop"
		}
		seq := 0
		post := func(instance int, valid bool, n int) {
			t.Helper()
			for range n {
				seq++
				id := fmt.Sprintf("evt_%d", seq)
				b := fmt.Appendf(nil, `{"id":%q,"type":"checkout.completed","created_at":%q,"environment":"test","data":{}}`, id, clk.now().Format(time.RFC3339))
				key := secret
				if !valid {
					key = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the secret before rotation"))
				}
				h, err := standard.Sign(key, id, clk.now(), b)
				if err != nil {
					t.Fatal(err)
				}
				req, _ := http.NewRequest(http.MethodPost, urls[instance], bytes.NewReader(b))
				req.Header = h
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := map[bool]int{true: 200, false: 400}[valid]; resp.StatusCode != want {
					t.Fatalf("delivery (valid %v) = %d %s; want %d", valid, resp.StatusCode, answer, want)
				}
			}
		}
		flush := func() {
			t.Helper()
			for _, c := range counters {
				if err := c.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		check := func(source string, want bool) {
			t.Helper()
			flush()
			if burst, err := reconcile.CheckSignatures(ctx, db, source, 20, 5*time.Minute, clk.now()); burst != want || err != nil {
				t.Fatalf("CheckSignatures(%s) at %s = %v, %v; want %v", source, clk.now().Format(time.TimeOnly), burst, err, want)
			}
		}
		alert := func(source string, wantCount int, wantOpen bool) {
			t.Helper()
			var n int
			var acked bool
			db.SQL.QueryRow(`SELECT count, acknowledged FROM payhook_alerts WHERE kind = $1 AND subject = $2`,
				reconcile.AlertSignatureFailures, source).Scan(&n, &acked)
			if n != wantCount || (n > 0 && acked == wantOpen) {
				t.Fatalf("%s alert count %d, acknowledged %v; want count %d, open %v", source, n, acked, wantCount, wantOpen)
			}
		}
		at := func(d time.Duration) { clk.set(t0.Add(d)) }

		post(0, true, 1)
		check("shop", false)
		at(time.Minute)
		post(0, false, 10)
		post(1, false, 9)
		check("shop", false) // 19 of 20
		alert("shop", 0, false)
		at(time.Minute + 10*time.Second)
		post(1, false, 1)
		check("shop", true)
		alert("shop", 1, true)
		st, err := db.SignatureStats(ctx, "", clk.now().Add(-5*time.Minute))
		if err != nil || len(st) != 1 || st[0].Failures != 20 || st[0].Verified != 1 || st[0].FailuresSinceVerified != 20 ||
			!st[0].LastVerified.Equal(t0) || !st[0].LastFailure.Equal(clk.now()) {
			t.Fatalf("SignatureStats = %+v, %v; want 20 failures and 1 match in the window, the last at t0", st, err)
		}
		at(2 * time.Minute)
		post(0, false, 5)
		check("shop", true)
		check("shop", true)
		alert("shop", 1, true) // more failures, more checks: still the one
		at(3 * time.Minute)
		post(1, true, 1)
		check("shop", false)
		alert("shop", 1, false) // cleared by a valid signature
		check("shop", false)
		at(4 * time.Minute)
		post(0, false, 20)
		check("shop", true)
		alert("shop", 2, true) // a new burst

		// Wider than the window, or broken by a valid signature: no burst.
		for _, o := range []struct {
			at    time.Duration
			valid bool
			n     int
		}{{0, false, 15}, {6 * time.Minute, false, 15}, {7 * time.Minute, false, 15}, {7*time.Minute + 30*time.Second, true, 1}, {8 * time.Minute, false, 15}} {
			for range o.n {
				counters[1].Observe("spread", o.valid, t0.Add(o.at))
			}
		}
		at(8 * time.Minute)
		check("spread", false)
		alert("spread", 0, false)

		// A flush that fails keeps its counts for the next.
		counters[0].Observe("kept", false, clk.now())
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := counters[0].Flush(cancelled); err == nil {
			t.Fatal("Flush(cancelled context) = nil; want an error")
		}
		flush()
		if st, err := db.SignatureStats(ctx, "kept", t0); err != nil || len(st) != 1 || st[0].Failures != 1 {
			t.Fatalf("SignatureStats(kept) = %+v, %v; want the failure the failed flush kept", st, err)
		}

		// A day on, nothing came: the counts are pruned, the alert stays
		// open until a valid signature comes.
		at(30 * time.Hour)
		check("shop", false)
		alert("shop", 2, true)
		var rows int
		db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_signature_counts WHERE source = 'shop'`).Scan(&rows)
		if rows != 2 {
			t.Fatalf("%d rows of counts kept for shop; want 2 (its latest match and latest failure)", rows)
		}
		post(0, true, 1)
		check("shop", false)
		alert("shop", 2, false)

		if _, err := reconcile.CheckSignatures(ctx, db, "shop", 0, time.Minute, clk.now()); !errors.Is(err, payhook.ErrInvalid) {
			t.Fatalf("CheckSignatures(limit 0) = %v; want ErrInvalid", err)
		}
	})
}

// inboxOf returns a job queue over db that stores events but does not
// process them.
func inboxOf(t *testing.T, db *store.DB) payhook.Inbox {
	t.Helper()
	q, err := jobs.New(db, jobs.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestSignatureCounterHoldsMatches: Run's flush writes failures at once,
// and the matches of a source without a recent failure at most once a
// minute; those of a source that just failed at once; Flush writes all.
func TestSignatureCounterHoldsMatches(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		c := reconcile.NewSignatureCounter(db, 10*time.Second)
		stats := func(wantFailures, wantVerified int64) {
			t.Helper()
			st, err := db.SignatureStats(ctx, "shop", t0.Add(-time.Hour))
			var f, v int64
			if len(st) == 1 {
				f, v = st[0].Failures, st[0].Verified
			}
			if err != nil || f != wantFailures || v != wantVerified {
				t.Fatalf("SignatureStats = %+v, %v; want %d failures, %d matches written", st, err, wantFailures, wantVerified)
			}
		}
		at := func(observe time.Duration, ok bool, flush time.Duration) {
			t.Helper()
			c.Observe("shop", ok, t0.Add(observe))
			if err := c.FlushAt(ctx, t0.Add(flush)); err != nil {
				t.Fatal(err)
			}
		}
		at(0, true, time.Second)
		stats(0, 1) // the first matches: written
		at(20*time.Second, true, 21*time.Second)
		stats(0, 1) // held: a minute after the last written
		at(40*time.Second, false, 41*time.Second)
		stats(1, 2) // a failure: written at once, and the matches held
		at(50*time.Second, true, 51*time.Second)
		stats(1, 3) // a match after a recent failure: at once
		at(10*time.Minute, true, 10*time.Minute+time.Second)
		stats(1, 4) // no recent failure, a minute since: written
		at(10*time.Minute+10*time.Second, true, 10*time.Minute+11*time.Second)
		stats(1, 4) // held
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		stats(1, 5) // Flush writes all
	})
}
