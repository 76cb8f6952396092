package console_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// chromiumPath is Debian's chromium, which scripts/test.sh installs when
// PAYHOOK_NEED_CHROMIUM=1 (as .ci/run does).
const chromiumPath = "/usr/bin/chromium"

// browserStep bounds one step in the browser: a page that has not
// answered by then is not going to.
var browserStep = time.Minute

// screenshotsEnv names the directory the browser test writes its
// screenshots to (docs/screenshots from the repository root); unset, it
// takes none.
const screenshotsEnv = "PAYHOOK_SCREENSHOTS"

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
)

// browser returns a context of one headless chromium shared by the
// tests of the package. Without chromium the test fails under CI (or
// PAYHOOK_NEED_CHROMIUM=1) and is skipped elsewhere.
func browser(t *testing.T) context.Context {
	t.Helper()
	browserOnce.Do(func() {
		path := chromiumPath
		if _, err := os.Stat(path); err != nil {
			if path, err = exec.LookPath("chromium"); err != nil {
				browserErr = fmt.Errorf("no chromium at %s or on PATH: run scripts/test.sh with PAYHOOK_NEED_CHROMIUM=1, or apt-get install chromium", chromiumPath)
				return
			}
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 900))
		alloc, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, _ := chromedp.NewContext(alloc)
		// The first Run starts the browser; it lives until the process ends.
		if err := chromedp.Do(ctx); err != nil {
			browserErr = fmt.Errorf("start chromium: %w", err)
			return
		}
		browserCtx = ctx
	})
	if browserErr != nil {
		if os.Getenv("CI") != "" || os.Getenv("PAYHOOK_NEED_CHROMIUM") == "1" {
			t.Fatal(browserErr)
		}
		t.Skip(browserErr)
	}
	// A browser context of its own: cookies are not shared between tests
	// (cookies ignore the port).
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first Run makes the tab, which lives as long as that Run's
	// context: this one, not a step's, which ends with the step.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// tab runs browser steps, each given a minute at most: a page that has
// not answered by then is not going to.
type tab struct {
	t   *testing.T
	ctx context.Context
	url string
}

func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		dctx, dcancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer dcancel()
		page, derr := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		b.t.Fatalf("%s: %v\npage: %s %v", what, err, page, derr)
	}
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *tab) eval(js string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return s
}

// shot saves a screenshot of the page as name.png (quality 100 is PNG) when screenshots are
// asked for.
func (b *tab) shot(name string) {
	b.t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestBrowser drives the console in headless chromium: the login (a
// wrong token refused), the event filter, one event, its replay and the
// new attempt, a bulk replay (dry run, then confirmed), an alert acknowledged, a delivery resent, an action
// without its CSRF token refused, and a payload holding <script> shown as
// text.
func TestBrowser(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := browser(t)
		e := newEnv(t, dbURL)
		xss := "{\"id\":\"evt_xss\",\"note\":\"<script>window.__xss=1</script><img src=x onerror=\\\"window.__xss=2\\\">\"}"
		var evs []*payhook.Event
		for i := range 12 {
			ev := event(fmt.Sprintf("evt_ok_%02d", i), "checkout.completed", fmt.Sprintf(`{"id":"evt_ok_%02d","amount":%d}`, i, 1000+i))
			ev.ReceivedAt = ev.ReceivedAt.Add(-time.Duration(12-i) * 100 * time.Minute) // spread over the chart's day
			evs = append(evs, ev)
		}
		evs = append(evs, event("evt_xss", "checkout.completed", xss), event("evt_flaky", "flaky", `{"id":"evt_flaky","order":"ord_7"}`))
		ids := e.ingest(evs...)
		flaky, xssID := ids[len(ids)-1], ids[len(ids)-2]
		e.wait(xssID, payhook.StatusProcessed)
		e.wait(flaky, payhook.StatusFailed)
		seedBilling(t, e)
		now := time.Now().UTC()
		if err := e.db.AddSignatureCounts(context.Background(), []store.SignatureCount{{Source: "shop", Bucket: now.Add(-time.Hour),
			Failures: 2, Verified: 14, LastFailure: now.Add(-50 * time.Minute), LastVerified: now.Add(-10 * time.Minute)}}); err != nil {
			t.Fatal(err)
		}
		alert := e.alert("event_failed", "shop/evt_flaky")
		b := &tab{t: t, ctx: ctx, url: e.url}
		screens := strings.HasSuffix(t.Name(), "sqlite")
		shot := func(name string) {
			if screens {
				b.shot(name)
			}
		}

		// A wrong token is refused; the right one lands where we were going.
		b.do("open the console", chromedp.Navigate(e.url+"/console/events"), chromedp.WaitVisible(chromedp.CSS("#login")))
		shot("login")
		b.do("log in with a wrong token",
			chromedp.SendKeys(chromedp.CSS(`input[name="secret"]`), "not-the-token"),
			chromedp.Click(chromedp.CSS(`#login button`)), chromedp.WaitVisible(chromedp.CSS("#error")))
		if got := b.text("#error"); !strings.Contains(got, "Wrong token") {
			t.Fatalf("wrong token: %q; want it refused", got)
		}
		b.do("log in", chromedp.SendKeys(chromedp.CSS(`input[name="secret"]`), token),
			chromedp.Click(chromedp.CSS(`#login button`)), chromedp.WaitVisible(chromedp.CSS("#events")))
		shot("events")

		// Filter the failed events: only the flaky one is left.
		b.do("filter failed events", chromedp.SetValue(chromedp.CSS(`select[name="status"]`), "failed"),
			chromedp.Click(chromedp.CSS(`#filter button`)),
			// The old page shows processed events; the filtered one does not.
			chromedp.WaitNotPresent(chromedp.CSS(`#events tbody tr.st-processed`)), chromedp.WaitVisible(chromedp.CSS(`#events tbody tr.st-failed`)))
		if rows := b.eval(`String(document.querySelectorAll("#events tbody tr").length)`); rows != "1" || !strings.Contains(b.text("#events"), "evt_flaky") {
			t.Fatalf("failed events: %s rows, %q; want evt_flaky alone", rows, b.text("#events"))
		}

		// Open it: both attempts failed, with their error.
		b.do("open the event", chromedp.Click(chromedp.CSS(`#events tbody a`)), chromedp.WaitVisible(chromedp.CSS("#attempts")))
		if got := b.text("#attempts"); strings.Count(got, "the application is down (test)") != 2 {
			t.Fatalf("attempts: %q; want two failed with their error", got)
		}
		// Fix the application and replay: a new attempt succeeds.
		e.fixed.Store(true)
		b.do("replay", chromedp.Click(chromedp.CSS(`#replay button`)), chromedp.WaitVisible(chromedp.CSS("#flash")))
		var last string
		moved := time.Now()
		for !strings.Contains(last, "succeeded") {
			b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#attempts")))
			if now := b.text("#attempts"); now != last {
				last, moved = now, time.Now()
			}
			if time.Since(moved) > time.Minute {
				t.Fatalf("no new attempt after the replay: %q", last)
			}
		}
		if got := b.text("#status"); got != "processed" || !strings.Contains(last, "replay") {
			t.Fatalf("after replay: status %q, attempts %q; want processed and a replay attempt", got, last)
		}
		shot("event")

		// Bulk replay: two more events fail; the dry run counts them and
		// replays nothing; the confirmation replays them, marked as replays.
		e.fixed.Store(false)
		more := e.ingest(event("evt_unread_1", "unreadable", `{"id":"evt_unread_1"}`), event("evt_unread_2", "unreadable", `{"id":"evt_unread_2"}`))
		for _, id := range more {
			e.wait(id, payhook.StatusFailed)
		}
		b.do("bulk replay's dry run", chromedp.Navigate(e.url+"/console/events"), chromedp.Click(chromedp.CSS("#bulk summary")),
			chromedp.SetValue(chromedp.CSS(`#bulk-form input[name="since"]`), "1h"),
			chromedp.Click(chromedp.CSS("#bulk-form button")), chromedp.WaitVisible(chromedp.CSS("#plan")))
		if n, rows := b.text("#plan-count"), b.text("#plan-events"); n != "2" || !strings.Contains(rows, "evt_unread_1") ||
			!strings.Contains(rows, "evt_unread_2") || strings.Contains(rows, "evt_flaky") {
			t.Fatalf("dry run: %s events, %q; want evt_unread_1 and evt_unread_2", n, rows)
		}
		shot("replay")
		for _, id := range more {
			if ev, _ := e.db.Event(context.Background(), id); ev.Status != payhook.StatusFailed {
				t.Fatalf("event %d after the dry run: %s; want failed still", id, ev.Status)
			}
		}
		e.fixed.Store(true)
		b.do("confirm the bulk replay", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#flash")))
		for _, id := range more {
			e.wait(id, payhook.StatusProcessed)
		}
		b.do("the bulk replay's status", chromedp.Navigate(e.url+"/console/events"), chromedp.WaitVisible(chromedp.CSS("#bulk-status")))
		if got := b.text("#bulk-status"); !strings.Contains(got, "2 replayed, 0 skipped") {
			t.Fatalf("bulk replay status: %q; want 2 replayed", got)
		}
		last, moved = "", time.Now()
		b.do("open a replayed event", chromedp.Navigate(fmt.Sprintf("%s/console/events/%d", e.url, more[0])), chromedp.WaitVisible(chromedp.CSS("#attempts")))
		for !strings.Contains(last, "succeeded") {
			b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#attempts")))
			if now := b.text("#attempts"); now != last {
				last, moved = now, time.Now()
			}
			if time.Since(moved) > time.Minute {
				t.Fatalf("no replayed attempt after the bulk replay: %q", last)
			}
		}
		if !strings.Contains(last, "replay") {
			t.Fatalf("attempts after the bulk replay: %q; want the new one marked replay", last)
		}

		// The payload's markup is text: no script ran, no element was made.
		b.do("open the payload with markup", chromedp.Navigate(fmt.Sprintf("%s/console/events/%d", e.url, xssID)),
			chromedp.WaitVisible(chromedp.CSS("#payload")))
		if got := b.text("#payload"); !strings.Contains(got, "<script>window.__xss=1</script>") {
			t.Fatalf("payload: %q; want the markup shown as text", got)
		}
		if got := b.eval(`String(window.__xss) + " " + document.querySelectorAll("#payload *, main script, main img").length`); got != "undefined 0" {
			t.Fatalf("payload markup ran or made elements: %s", got)
		}

		// Acknowledge the alert.
		b.do("open the alerts", chromedp.Navigate(e.url+"/console/alerts"), chromedp.WaitVisible(chromedp.CSS("#alerts")))
		shot("alerts")
		b.do("acknowledge", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#alert-%d button`, alert))), chromedp.WaitVisible(chromedp.CSS("#flash")))
		as, err := billing.ListAlerts(context.Background(), e.db, billing.AlertFilter{Unacknowledged: true})
		if err != nil || len(as) != 0 || strings.Contains(b.text("#alerts"), "shop/evt_flaky") {
			t.Fatalf("open alerts after acknowledge: %+v, %v; page %q", as, err, b.text("#alerts"))
		}

		// Resend a failed delivery.
		delivery := e.delivery("ord_7")
		b.do("open the deliveries", chromedp.Navigate(e.url+"/console/deliveries"), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
		shot("deliveries")
		b.do("resend", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#delivery-%d button`, delivery))), chromedp.WaitVisible(chromedp.CSS("#flash")))
		if got := b.text(fmt.Sprintf("#delivery-%d", delivery)); !strings.Contains(got, "pending") {
			t.Fatalf("delivery after resend: %q; want pending", got)
		}

		// An action whose form lost its CSRF token is refused.
		b.do("replay without the CSRF token", chromedp.Navigate(fmt.Sprintf("%s/console/events/%d", e.url, flaky)),
			chromedp.WaitVisible(chromedp.CSS("#replay")), chromedp.RemoveAttribute(chromedp.CSS(`#replay input[name="csrf"]`), "value"),
			chromedp.Click(chromedp.CSS(`#replay button`)), chromedp.WaitNotPresent(chromedp.CSS("#replay")))
		if got := b.eval(`document.body.innerText`); !strings.Contains(got, "CSRF") {
			t.Fatalf("replay without CSRF: %q; want it refused", got)
		}

		if screens {
			for _, p := range []struct{ name, path, sel string }{
				{"overview", "/console", ".chart"},
				{"payments", "/console/payments", "#payments"},
				{"payment", "/console/payments/shop/pay_1", ".postings"},
				{"ledger", "/console/ledger", ".balances"},
				{"sources", "/console/sources", ".secrets"},
			} {
				b.do("open "+p.path, chromedp.Navigate(e.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.sel)))
				b.shot(p.name)
			}
			b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
				chromedp.Navigate(e.url+"/console/events"), chromedp.WaitVisible(chromedp.CSS("#events")))
			b.shot("events-phone")
		}
	})
}

// seedBilling applies a small billing story, for the pages of payments
// and the ledger.
func seedBilling(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	tx, err := billing.Begin(ctx, e.db, t0)
	if err != nil {
		t.Fatal(err)
	}
	err = billing.Apply(ctx, tx, "shop", []billing.Fact{
		billing.Captured{Payment: billing.Payment{Ref: "pay_1", OrderID: "ord_1", Amount: 10000, Currency: "USD", CapturedAt: t0.Add(-time.Hour)}},
		billing.Refunded{PaymentRef: "pay_1", RefundRef: "re_1", Amount: 3000, Currency: "USD", At: t0},
		billing.Captured{Payment: billing.Payment{Ref: "pay_2", OrderID: "ord_2", Amount: 2500, Currency: "EUR", CapturedAt: t0}},
		billing.Subscription{Ref: "sub_1", Customer: "cus_1", Plan: "pro", Status: "active", CurrentPeriodEnd: t0.AddDate(0, 1, 0), UpdatedAt: t0},
	})
	if err != nil {
		t.Fatal(errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
