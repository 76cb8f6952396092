package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
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
	return m.subcommand(ctx, args, eventsHelp, subs{"list": m.eventsList, "show": m.eventsShow, "replay": m.eventsReplay})
}

func (m *Main) eventsList(ctx context.Context, args []string) error {
	fs := m.flags("events list", eventsHelp)
	source := fs.String("source", "", "only events of this source")
	status := fs.String("status", "", "only events with this status: received, processed, ignored or failed")
	limit := fs.Int("limit", 50, "at most this many events, newest first")
	return m.runView(ctx, fs, args, view{
		anyArgs: true,
		check: func() error {
			if *status != "" && !payhook.Status(*status).Valid() {
				return fmt.Errorf("%w: --status %q: want received, processed, ignored or failed", errUsage, *status)
			}
			return nil
		},
		load: func(db *store.DB, _ string) (any, error) {
			evs, err := db.ListEvents(ctx, store.Filter{Source: *source, Status: payhook.Status(*status), Limit: *limit})
			return billing.EventViews(evs, false), err
		},
		print: table("(no events)", "ID\tSOURCE\tEVENT_ID\tTYPE\tSTATUS\tATTEMPTS\tRECEIVED_AT",
			func(tw io.Writer, ev billing.EventView) {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", ev.ID, ev.Source, ev.EventID, ev.Type, ev.Status,
					ev.Attempts, ev.ReceivedAt.Format(time.RFC3339))
			}),
	})
}

func (m *Main) eventsShow(ctx context.Context, args []string) error {
	var evs []*payhook.Event
	return m.runView(ctx, m.flags("events show", eventsHelp), args, view{
		arg: "ID|EVENT_ID",
		// In JSON one event is an object, several (an EVENT_ID in
		// several sources) an array.
		load: func(db *store.DB, key string) (any, error) {
			var err error
			if evs, err = findEvents(ctx, db, key); err != nil {
				return nil, err
			}
			if len(evs) == 1 {
				return billing.EventViews(evs, true)[0], nil
			}
			return billing.EventViews(evs, true), nil
		},
		print: func(w io.Writer, _ any) error {
			for i, ev := range evs {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fields(w,
					"id", ev.ID,
					"source", ev.Source,
					"event_id", ev.EventID,
					"type", ev.Type,
					"environment", ev.Environment,
					"status", ev.Status,
					"attempts", ev.Attempts,
					"last_error", ev.LastError,
					"occurred_at", formatTime(ev.OccurredAt),
					"received_at", formatTime(ev.ReceivedAt),
					"processed_at", formatTime(ev.ProcessedAt),
					"secret_id", ev.SecretID)
				fmt.Fprintf(w, "payload:\n%s\n", ev.Payload)
			}
			return nil
		},
	})
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
