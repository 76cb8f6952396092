package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/jobs"
)

// replayShown is how many of a bulk replay's events are listed.
const replayShown = 50

// bulkReplay is what payhook events replay --json prints for a bulk
// replay.
type bulkReplay struct {
	DryRun  bool    `json:"dry_run"`
	Source  string  `json:"source"`
	Status  string  `json:"status"`
	Type    string  `json:"type,omitempty"`
	Since   string  `json:"since"`
	Matched int     `json:"matched"`
	IDs     []int64 `json:"ids"`
	// Events are the newest of them, at most replayShown.
	Events   []billing.EventView `json:"events"`
	Replayed int                 `json:"replayed"`
	Skipped  []int64             `json:"skipped"`
	Error    string              `json:"error,omitempty"`
	// Hint, when nothing matched because the source has no events at
	// all, says so and names the sources that have some.
	Hint string `json:"hint,omitempty"`
}

// eventsReplayBulk is payhook events replay without an id: by filter.
func (m *Main) eventsReplayBulk(ctx context.Context, dbURL, source, status, typ string, since time.Duration,
	rateFlag string, dryRun, asJSON bool) error {
	switch {
	case status == "":
		return fmt.Errorf("%w: events replay by filter needs --status failed or --status processed", errUsage)
	case source == "":
		return fmt.Errorf("%w: events replay by filter needs --source", errUsage)
	case since <= 0:
		return fmt.Errorf("%w: events replay by filter needs --since, a positive duration such as 24h", errUsage)
	}
	rate, err := parseRate(rateFlag)
	if err != nil {
		return err
	}
	f := jobs.BulkFilter{Source: source, Status: payhook.Status(status), Type: typ, Since: m.Now().Add(-since)}
	if err := f.Check(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	db, err := m.openExisting(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := jobs.New(db, jobs.Config{Logger: m.logger(), Now: m.Now})
	if err != nil {
		return err
	}
	plan, err := q.PlanReplay(ctx, f, replayShown)
	if err != nil {
		return err
	}
	out := bulkReplay{DryRun: dryRun, Source: source, Status: status, Type: typ, Since: f.Since.UTC().Format(time.RFC3339),
		Matched: len(plan.IDs), IDs: plan.IDs, Events: billing.EventViews(plan.First, false), Skipped: []int64{}}
	if out.IDs == nil {
		out.IDs = []int64{}
	}
	if plan.NoEvents {
		others := "none"
		if len(plan.Sources) > 0 {
			others = strings.Join(plan.Sources, ", ")
		}
		out.Hint = fmt.Sprintf("no events stored for source %s; sources with events: %s", source, others)
	}
	what := fmt.Sprintf("%d %s %s of source %s", len(plan.IDs), status, plural(len(plan.IDs), "event"), source)
	if typ != "" {
		what += " of type " + typ
	}
	what += " received since " + out.Since
	if !asJSON {
		verb := "replaying"
		if dryRun {
			verb = "dry run: would replay"
		}
		fmt.Fprintf(m.Stdout, "%s %s\n", verb, what)
		if out.Hint != "" {
			fmt.Fprintln(m.Stdout, out.Hint)
		}
		if len(plan.IDs) > 0 {
			printEvents(m.Stdout, out.Events)
			if n := len(plan.IDs) - len(out.Events); n > 0 {
				fmt.Fprintf(m.Stdout, "the newest %d shown, and %d more (--json lists every id); they are replayed oldest first\n", len(out.Events), n)
			}
		}
	}
	if dryRun || len(plan.IDs) == 0 {
		if asJSON {
			return m.printJSON(out)
		}
		return nil
	}
	progress, stop := m.replayProgress(len(plan.IDs))
	res, err := q.ReplayBulk(ctx, plan, jobs.BulkOptions{Rate: rate, Progress: progress})
	stop()
	out.Replayed = res.Replayed
	if res.Skipped != nil {
		out.Skipped = res.Skipped
	}
	if err != nil {
		out.Error = err.Error()
	}
	if asJSON {
		if perr := m.printJSON(out); perr != nil && err == nil {
			err = perr
		}
		return err
	}
	fmt.Fprintf(m.Stdout, "replayed %d of %d; a running payhook serve on this database processes them again, each attempt marked as a replay\n",
		res.Replayed, len(plan.IDs))
	if len(res.Skipped) > 0 {
		ids := make([]string, len(res.Skipped))
		for i, id := range res.Skipped {
			ids[i] = strconv.FormatInt(id, 10)
		}
		fmt.Fprintf(m.Stdout, "skipped %d no longer %s (replayed or retried meanwhile): %s\n", len(ids), status, strings.Join(ids, ", "))
	}
	return err
}

// printEvents writes events as payhook events list does.
func printEvents(w io.Writer, evs []billing.EventView) error {
	return printTable(w, evs, "(no events)", "ID\tSOURCE\tEVENT_ID\tTYPE\tSTATUS\tATTEMPTS\tRECEIVED_AT",
		func(tw io.Writer, ev billing.EventView) {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", ev.ID, ev.Source, ev.EventID, ev.Type, ev.Status,
				ev.Attempts, ev.ReceivedAt.Format(time.RFC3339))
		})
}

// parseRate reads --rate: N/s or N, events a second; "" is the default.
func parseRate(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "/s"), 64)
	if err != nil || !(n >= jobs.MinReplayRate && n <= 1e6) { // NaN too
		return 0, fmt.Errorf("%w: --rate %q: want events a second, such as 20/s (from one a day, %.6f/s, to 1000000/s)", errUsage, s, jobs.MinReplayRate)
	}
	return n, nil
}

// replayProgress returns the Progress of a bulk replay: a progress bar on
// stderr when it is a terminal, else a plain line on stderr at most once a
// second and at the end. The returned stop ends the bar.
func (m *Main) replayProgress(total int) (func(done, total int), func()) {
	f, ok := m.Stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		var last time.Time
		return func(done, total int) {
			if done == total || time.Since(last) >= time.Second {
				last = time.Now()
				fmt.Fprintf(m.Stderr, "replay: %d of %d events\n", done, total)
			}
		}, func() {}
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("replay"),
		progressbar.OptionShowCount(), progressbar.OptionSetItsString("events"), progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	return func(done, _ int) { bar.Set(done) }, func() {
		bar.Finish()
		bar.Exit()
	}
}
