package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

const deliveriesHelp = `Usage: payhook deliveries list|resend [flags]

  payhook deliveries list   [--sink S] [--status S] [--limit N] [--json]
  payhook deliveries resend ID

A delivery is one fact (docs/facts.md) sent to one sink of the config's
sinks:, retried with backoff on its own. list shows the deliveries, newest
first, with the last attempt of each (LAST: the status its sink answered,
or ok or error from a sink without statuses such as log, and how long it
took); --json adds every attempt (status, response excerpt, latency).
Statuses: pending, delivered, failed (every attempt failed), paused (its
sink answered 410 Gone). resend sends one again whatever its status, and
resumes its sink if paused (clearing its sink_paused alert); a running
payhook serve on this database sends it. Every subcommand takes --db URL (env PAYHOOK_DB) like serve.

Examples:
  payhook deliveries list --status failed
  payhook deliveries list --sink app --json
  payhook deliveries resend 42`

func (m *Main) deliveries(ctx context.Context, args []string) error {
	return m.subcommand(ctx, args, deliveriesHelp, subs{"list": m.deliveriesList, "resend": m.deliveriesResend})
}

func (m *Main) deliveriesList(ctx context.Context, args []string) error {
	fs := m.flags("deliveries list", deliveriesHelp)
	var f outbox.DeliveryFilter
	fs.StringVar(&f.Sink, "sink", "", "only deliveries to this sink")
	fs.StringVar(&f.Status, "status", "", "only deliveries with this status: pending, delivered, failed or paused")
	limitVar(fs, &f.Limit, "deliveries, newest first")
	return m.runView(ctx, fs, args, view{
		check: func() error {
			if err := checkOneOf("status", f.Status, outbox.DeliveryStatuses); err != nil {
				return err
			}
			return checkLimit(f.Limit)
		},
		load: func(db *store.DB, _ string) (any, error) { return outbox.ListDeliveries(ctx, db, f) },
		print: table("(no deliveries)", "ID\tSINK\tSTATUS\tATTEMPTS\tLAST\tTYPE\tSUBJECT\tFACT_ID\tUPDATED_AT",
			func(tw io.Writer, d outbox.DeliveryView) {
				last := "-"
				if n := len(d.Log); n > 0 {
					last = lastAttempt(d.Log[n-1])
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Sink, d.Status, d.Attempts, last,
					d.Type, d.Subject, d.FactID, formatTime(d.UpdatedAt))
			}),
	})
}

// lastAttempt says what an attempt's sink answered (a sink that answers
// no status, such as log, "ok" or "error") and how long it took.
func lastAttempt(a outbox.AttemptView) string {
	answer := strconv.Itoa(a.Status)
	switch {
	case a.Status != 0:
	case a.Error != "":
		answer = "error"
	default:
		answer = "ok"
	}
	if a.LatencyMS < 10 {
		return fmt.Sprintf("%s %.1fms", answer, a.LatencyMS)
	}
	return fmt.Sprintf("%s %.0fms", answer, a.LatencyMS)
}

func (m *Main) deliveriesResend(ctx context.Context, args []string) error {
	fs := m.flags("deliveries resend", deliveriesHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	id, err := idArg(fs, args, "delivery", "deliveries list")
	if err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := jobs.New(db, jobs.Config{Logger: m.logger(), Now: m.Now})
	if err != nil {
		return err
	}
	if err := resendDelivery(ctx, db, q, id, m.Now()); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "delivery %d queued again; a running payhook serve on this database sends it\n", id)
	return nil
}
