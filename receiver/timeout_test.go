package receiver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/stripe"
	"github.com/payhook/payhook/receiver"
)

// lateInbox is a store whose commit does not return before the
// delivery's wait ends (a database frozen or cut off mid-commit), or,
// with fail, one that refuses at once.
type lateInbox struct{ fail bool }

func (l lateInbox) Ingest(ctx context.Context, _ []*payhook.Event) ([]bool, error) {
	if l.fail {
		return nil, fmt.Errorf("%w: connection refused", payhook.ErrUnavailable)
	}
	<-ctx.Done()
	return nil, fmt.Errorf("%w: %w", payhook.ErrUnavailable, ctx.Err())
}

// TestStoreTimeoutLogged: a delivery whose commit did not return within
// StoreTimeout is answered 503 and logged as not acknowledged, its event
// possibly stored by the commit under way; only a store that refused says
// "not stored". Before, both said "webhook not stored": in a drill with
// PostgreSQL frozen 30 s, 313 events so logged were in the database.
func TestStoreTimeoutLogged(t *testing.T) {
	t.Parallel()
	const secret = "whsec_late"
	sv, err := stripe.New(stripe.Config{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		inbox lateInbox
		want  string
		not   string
	}{
		{lateInbox{}, "may still store it", "webhook not stored"},
		{lateInbox{fail: true}, "webhook not stored", "may still"},
	} {
		var logs dbtest.Buffer
		r, err := receiver.New(receiver.Config{
			Sources:      []payhook.Source{{Name: "stripe", Provider: "stripe", Verifier: sv}},
			Inbox:        c.inbox,
			StoreTimeout: 50 * time.Millisecond,
			Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		b, h := stripeEvent("evt_late", 512, secret, time.Now())
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(string(b)))
		req.Header = h
		req.SetPathValue("source", "stripe")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("fail=%v: answered %d; want 503", c.inbox.fail, w.Code)
		}
		if got := logs.String(); !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("fail=%v: log %q; want %q and no %q", c.inbox.fail, got, c.want, c.not)
		}
	}
}

// TestOutageLogsAreBounded: with the store down, every delivery is
// refused, but the log says so once a FloodPeriod per source: the first,
// and when the period ends, the last refused with the count of those
// left out between, so an outage that ends is counted within a period;
// a rejection of another status is a line of its own. Before, a line per
// delivery: 60,000 a minute at 1,000/s; then the count waited for the
// next refusal, which after an outage may never come. On synctest's
// clock, which the period's end (a timer) keeps as the receiver does.
func TestOutageLogsAreBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var logs dbtest.Buffer
		_, send := downReceiver(t, &logs)
		for i := range 50 {
			if code := send(fmt.Sprint("evt_down_", i), ""); code != http.StatusServiceUnavailable {
				t.Fatalf("delivery %d answered %d; want 503", i, code)
			}
		}
		if code := send("evt_forged", "t=1,v1=00"); code == http.StatusServiceUnavailable || code < 400 {
			t.Fatalf("a forged delivery answered %d; want a 4xx", code)
		}
		if got := logs.String(); strings.Count(got, "webhook not stored") != 1 || !strings.Contains(got, "event_id=evt_down_0 ") {
			t.Errorf("during the outage's first period, the log does not name the first refused event alone:\n%s", got)
		}
		time.Sleep(receiver.FloodPeriod) // the outage is over
		synctest.Wait()
		if got := logs.String(); strings.Count(got, "webhook not stored") != 2 ||
			!strings.Contains(got, "event_id=evt_down_49 ") || !strings.Contains(got, "left_out=48") {
			t.Errorf("a period after the outage, the log does not name the last refused event and the 48 left out between:\n%s", got)
		}
		time.Sleep(receiver.FloodPeriod)
		send("evt_down_later", "")
		got := logs.String()
		if n := strings.Count(got, "webhook not stored"); n != 3 || !strings.Contains(got, "event_id=evt_down_later ") {
			t.Errorf("%d lines say the store refused; want 3, the last a refusal after a quiet period, at once:\n%s", n, got)
		}
		if n := strings.Count(got, "webhook rejected"); n != 1 {
			t.Errorf("%d lines say the forged delivery was rejected; want 1:\n%s", n, got)
		}
	})
}

// TestFlushLogsAtShutdown: the refusals of an outage left out of the log
// are told by FlushLogs at once, with their count, not a FloodPeriod
// later, which a process shutting down would not live to see.
func TestFlushLogsAtShutdown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var logs dbtest.Buffer
		r, send := downReceiver(t, &logs)
		for i := range 5 {
			send(fmt.Sprint("evt_down_", i), "")
		}
		r.FlushLogs()
		got := logs.String()
		if strings.Count(got, "webhook not stored") != 2 || !strings.Contains(got, "event_id=evt_down_4 ") || !strings.Contains(got, "left_out=3") {
			t.Errorf("after FlushLogs, the log does not name the last refused event and the 3 left out between:\n%s", got)
		}
		time.Sleep(receiver.FloodPeriod)
		synctest.Wait()
		if logs.String() != got {
			t.Errorf("a period after FlushLogs the log told the outage again:\n%s", logs.String())
		}
	})
}

// downReceiver returns a Receiver of one Stripe source whose store
// refuses every event, logging to logs, and a function that sends it a
// delivery of event id (with signature sig instead of a valid one, if
// not "") and returns the answer's status.
func downReceiver(t *testing.T, logs *dbtest.Buffer) (*receiver.Receiver, func(id, sig string) int) {
	t.Helper()
	const secret = "whsec_down"
	sv, err := stripe.New(stripe.Config{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := receiver.New(receiver.Config{
		Sources: []payhook.Source{{Name: "stripe", Provider: "stripe", Verifier: sv}},
		Inbox:   lateInbox{fail: true},
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, func(id, sig string) int {
		b, h := stripeEvent(id, 256, secret, time.Now())
		if sig != "" {
			h.Set("Stripe-Signature", sig)
		}
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(string(b)))
		req.Header = h
		req.SetPathValue("source", "stripe")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w.Code
	}
}
