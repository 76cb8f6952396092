package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/jobs"
)

// ReplayShown is how many of a bulk replay's events its dry run lists.
const ReplayShown = 20

// bulkRun is the console's bulk replay in progress, or the last one.
type bulkRun struct {
	mu       sync.Mutex
	running  bool
	filter   jobs.BulkFilter
	user     string
	started  time.Time
	finished time.Time
	done     int
	total    int
	result   jobs.BulkResult
	err      error
	closed   bool               // Close was called: no new bulk replay
	cancel   context.CancelFunc // stops the running one
	wg       sync.WaitGroup     // the running one's goroutine
}

// Close stops the bulk replay running in the background, if any, and
// waits for it: the events it re-enqueued stay so (each batch is one
// transaction), the others keep their status. A bulk replay asked for
// after Close is refused. Call it before closing the database.
func (c *Console) Close() {
	b := &c.bulk
	b.mu.Lock()
	b.closed = true
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// BulkStatus is what the events page shows of the bulk replay running, or
// of the last one.
type BulkStatus struct {
	Running           bool
	Source, Status    string
	Type, User        string
	Started, Finished time.Time
	Done, Total       int
	Replayed, Skipped int
	Err               string
}

func (b *bulkRun) status() *BulkStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started.IsZero() {
		return nil
	}
	s := &BulkStatus{Running: b.running, Source: b.filter.Source, Status: string(b.filter.Status), Type: b.filter.Type,
		User: b.user, Started: b.started, Finished: b.finished, Done: b.done, Total: b.total,
		Replayed: b.result.Replayed, Skipped: len(b.result.Skipped)}
	if b.err != nil {
		s.Err = b.err.Error()
	}
	return s
}

// bulkForm is the bulk replay form's filter, as the page shows it.
type bulkForm struct {
	Source, Status, Type, Since string
}

type replayData struct {
	Form    bulkForm
	Filter  jobs.BulkFilter
	Plan    *jobs.BulkPlan
	Since   string
	Before  int64
	More    int
	Rate    float64
	Running *BulkStatus
}

// bulkFilter reads the bulk replay's filter from a query or form: source,
// status, since (a duration ago or a time, as the event filter takes),
// type and, from the confirmation, before.
func (c *Console) bulkFilter(q url.Values) (jobs.BulkFilter, bulkForm, error) {
	form := bulkForm{Source: q.Get("source"), Status: q.Get("status"), Type: strings.TrimSpace(q.Get("type")), Since: q.Get("since")}
	f := jobs.BulkFilter{Source: form.Source, Status: payhook.Status(form.Status), Type: form.Type}
	if strings.TrimSpace(form.Since) == "" {
		return f, form, invalid("bulk replay: since is required (24h, or a time)")
	}
	var err error
	if f.Since, err = parseWhen(form.Since, c.cfg.Now()); err != nil {
		return f, form, invalid("bulk replay: since: %v", err)
	}
	if b := q.Get("before"); b != "" {
		if f.Before, err = strconv.ParseInt(b, 10, 64); err != nil || f.Before <= 0 {
			return f, form, invalid("bulk replay: before %q: want an event's numeric id", b)
		}
	}
	return f, form, f.Check()
}

// replayPlan is the bulk replay's dry run: how many events, the newest of
// them, and the confirmation form, which carries the absolute since and
// the newest id so that it replays nothing the dry run did not count.
func (c *Console) replayPlan(w http.ResponseWriter, r *http.Request, v *view) error {
	f, form, err := c.bulkFilter(r.URL.Query())
	if err != nil {
		return err
	}
	plan, err := c.cfg.Queue.PlanReplay(r.Context(), f, ReplayShown)
	if err != nil {
		return err
	}
	d := replayData{Form: form, Filter: f, Plan: plan, Since: f.Since.UTC().Format(time.RFC3339Nano),
		More: len(plan.IDs) - len(plan.First), Rate: c.cfg.ReplayRate, Running: c.bulk.status()}
	if d.Rate == 0 {
		d.Rate = jobs.DefaultReplayRate
	}
	if n := len(plan.IDs); n > 0 {
		d.Before = plan.IDs[n-1] + 1
	}
	v.Title, v.Nav, v.Data = "Bulk replay: dry run", "replay", d
	return nil
}

// replayBulk starts the confirmed bulk replay in the background, at
// Config.ReplayRate, one at a time: it may take longer than a request.
func (c *Console) replayBulk(w http.ResponseWriter, r *http.Request, s *session) (string, error) {
	if err := r.ParseForm(); err != nil {
		return "", invalid("bulk replay: %v", err)
	}
	f, _, err := c.bulkFilter(r.PostForm)
	if err != nil {
		return "", err
	}
	if f.Before == 0 {
		return "", invalid("bulk replay: confirm it from its dry run")
	}
	plan, err := c.cfg.Queue.PlanReplay(r.Context(), f, 0)
	if err != nil {
		return "", err
	}
	b := &c.bulk
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return "", fmt.Errorf("bulk replay: the console is shutting down: %w", payhook.ErrUnavailable)
	}
	if b.running {
		b.mu.Unlock()
		return "", fmt.Errorf("a bulk replay by %s is running (%d of %d): wait for it to finish: %w", b.user, b.done, b.total, payhook.ErrConflict)
	}
	b.running, b.filter, b.user, b.started, b.finished = true, f, s.User, c.cfg.Now(), time.Time{}
	b.done, b.total, b.result, b.err = 0, len(plan.IDs), jobs.BulkResult{}, nil
	// Not the request's context, which ends with the redirect: Close's.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	b.cancel = cancel
	b.wg.Add(1)
	b.mu.Unlock()
	c.log.Info("console bulk replay", "source", f.Source, "status", f.Status, "type", f.Type, "since", f.Since,
		"events", len(plan.IDs), "user", s.User)
	go func() {
		defer b.wg.Done()
		defer cancel()
		res, err := c.cfg.Queue.ReplayBulk(ctx, plan, jobs.BulkOptions{Rate: c.cfg.ReplayRate,
			Progress: func(done, _ int) {
				b.mu.Lock()
				b.done = done
				b.mu.Unlock()
			}})
		if err != nil {
			c.log.Error("console bulk replay", "source", f.Source, "err", err)
		}
		b.mu.Lock()
		b.running, b.finished, b.result, b.err = false, c.cfg.Now(), res, err
		b.mu.Unlock()
	}()
	q := url.Values{"source": {f.Source}, "done": {"bulk-replay"}, "n": {strconv.Itoa(len(plan.IDs))}}
	return "/console/events?" + q.Encode(), nil
}
