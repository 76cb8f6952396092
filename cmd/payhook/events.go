package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

const eventsHelp = `Usage: payhook events list|show|replay [flags]

  payhook events list   [--source S] [--status S] [--limit N] [--json]
  payhook events show   ID|EVENT_ID [--json]
  payhook events replay ID

ID is payhook's row id; EVENT_ID the provider's id (evt_...). Every
subcommand takes --db URL (env PAYHOOK_DB) like serve.

Examples:
  payhook events list --status failed
  payhook events show evt_01JBILLETE0001 --json
  payhook events replay 42`

func (m *Main) events(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: events needs a subcommand: list, show or replay", errUsage)
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "list":
		return m.eventsList(ctx, rest)
	case "show":
		return m.eventsShow(ctx, rest)
	case "replay":
		return m.eventsReplay(ctx, rest)
	case "-h", "--help", "help":
		fmt.Fprintln(m.Stdout, eventsHelp)
		return nil
	default:
		return fmt.Errorf("%w: unknown events subcommand %q (want list, show or replay)", errUsage, sub)
	}
}

func (m *Main) eventsList(ctx context.Context, args []string) error {
	fs := m.flags("events list", eventsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "only events of this source")
	status := fs.String("status", "", "only events with this status: received, processed, ignored or failed")
	limit := fs.Int("limit", 50, "at most this many events, newest first")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *status != "" && !payhook.Status(*status).Valid() {
		return fmt.Errorf("%w: --status %q: want received, processed, ignored or failed", errUsage, *status)
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	evs, err := db.ListEvents(ctx, store.Filter{Source: *source, Status: payhook.Status(*status), Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(views(evs, false))
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tEVENT_ID\tTYPE\tSTATUS\tATTEMPTS\tRECEIVED_AT")
	for _, ev := range evs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", ev.ID, ev.Source, ev.EventID, ev.Type, ev.Status,
			ev.Attempts, ev.ReceivedAt.Format(time.RFC3339))
	}
	if len(evs) == 0 {
		fmt.Fprintln(tw, "(no events)")
	}
	return tw.Flush()
}

func (m *Main) eventsShow(ctx context.Context, args []string) error {
	fs := m.flags("events show", eventsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	asJSON := fs.Bool("json", false, "print JSON")
	key, err := oneArg(fs, args, "ID|EVENT_ID")
	if err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	evs, err := findEvents(ctx, db, key)
	if err != nil {
		return err
	}
	if *asJSON {
		if len(evs) == 1 {
			return m.printJSON(views(evs, true)[0])
		}
		return m.printJSON(views(evs, true))
	}
	for i, ev := range evs {
		if i > 0 {
			fmt.Fprintln(m.Stdout)
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', 0)
		row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
		row("id", ev.ID)
		row("source", ev.Source)
		row("event_id", ev.EventID)
		row("type", ev.Type)
		row("environment", ev.Environment)
		row("status", ev.Status)
		row("attempts", ev.Attempts)
		row("last_error", ev.LastError)
		row("occurred_at", formatTime(ev.OccurredAt))
		row("received_at", formatTime(ev.ReceivedAt))
		row("processed_at", formatTime(ev.ProcessedAt))
		row("secret_id", ev.SecretID)
		tw.Flush()
		fmt.Fprintf(m.Stdout, "payload:\n%s\n", ev.Payload)
	}
	return nil
}

func (m *Main) eventsReplay(ctx context.Context, args []string) error {
	fs := m.flags("events replay", eventsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	key, err := oneArg(fs, args, "ID")
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(key, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: replay takes payhook's numeric event id, got %q (see payhook events show)", errUsage, key)
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
	if err := q.Replay(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "event %d re-enqueued; a running payhook serve on this database processes it again\n", id)
	return nil
}

// openExisting opens the database named by the flag or PAYHOOK_DB for
// the events commands. Unlike serve and migrate it creates and migrates
// nothing: a mistyped URL or a database payhook never migrated is an
// error, not a fresh empty database answering "(no events)".
func (m *Main) openExisting(ctx context.Context, flagURL string) (*store.DB, error) {
	return store.OpenExisting(ctx, m.env(flagURL, "PAYHOOK_DB", store.DefaultURL))
}

// oneArg parses flags that may come before or after one positional arg.
func oneArg(fs *flag.FlagSet, args []string, what string) (string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("%w: %s takes one %s", errUsage, fs.Name(), what)
	}
	return pos[0], nil
}

// findEvents finds events by row id, or else by provider event id (which
// may exist in several sources).
func findEvents(ctx context.Context, db *store.DB, key string) ([]*payhook.Event, error) {
	if id, err := strconv.ParseInt(key, 10, 64); err == nil {
		ev, err := db.Event(ctx, id)
		if err == nil {
			return []*payhook.Event{ev}, nil
		}
		if !errors.Is(err, payhook.ErrNotFound) {
			return nil, err
		}
	}
	evs, err := db.ListEvents(ctx, store.Filter{EventID: key})
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("event %q: %w", key, payhook.ErrNotFound)
	}
	return evs, nil
}

// eventView is an event as the CLI prints it in JSON: the payload inline
// when it is JSON (it always is for stored events).
type eventView struct {
	*payhook.Event
	Payload json.RawMessage `json:"payload,omitempty"`
}

func views(evs []*payhook.Event, withPayload bool) []eventView {
	out := make([]eventView, len(evs))
	for i, ev := range evs {
		out[i] = eventView{Event: ev}
		if withPayload && json.Valid(ev.Payload) {
			out[i].Payload = ev.Payload
		}
	}
	return out
}

func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}
