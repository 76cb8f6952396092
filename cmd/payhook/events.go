package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/api"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

const eventsHelp = `Usage: payhook events list|show|replay [flags]

  payhook events list   [--source S] [--status S] [--limit N] [--json]
  payhook events show   ID|EVENT_ID [--source S] [--json]
  payhook events replay ID|EVENT_ID [--source S]
  payhook events replay --status failed --source S --since 24h [--type T] [--dry-run] [--rate N/s] [--json]

ID is payhook's row id; EVENT_ID the provider's id (evt_...). When an
EVENT_ID exists in several sources, give --source; with --source, a
number is that source's EVENT_ID first, else its ID. Without it, a number
that is one event's ID and another's EVENT_ID is refused, saying how to
name each. An ignored event was ignored for a reason (events show says
which) and is not replayed: refused, as a usage error (exit status 2),
like a replay by --status ignored. Every subcommand takes --db URL (env
PAYHOOK_DB) like serve.

Without an id, replay takes every event of the source with that status
(failed, or processed to run fixed handlers again) received since that
long ago, optionally of one type: it shows how many and which, and with
--dry-run stops there; else it re-enqueues them, oldest first, at most
--rate a second (default 20/s), with a progress bar on a terminal. Each
replayed attempt is marked as a replay. An event whose status changed
meanwhile is skipped and reported.

Examples:
  payhook events list --status failed
  payhook events show evt_01JBILLETE0001 --json
  payhook events replay evt_01JBILLETE0001 --source billete-test
  payhook events replay 42
  payhook events replay --status failed --source stripe --since 24h --dry-run
  payhook events replay --status failed --source stripe --since 6h --type charge.refunded --rate 50/s`

func (m *Main) events(ctx context.Context, args []string) error {
	return m.subcommand(ctx, args, eventsHelp, subs{"list": m.eventsList, "show": m.eventsShow, "replay": m.eventsReplay})
}

func (m *Main) eventsList(ctx context.Context, args []string) error {
	fs := m.flags("events list", eventsHelp)
	source := fs.String("source", "", "only events of this source")
	status := fs.String("status", "", "only events with this status: received, processed, ignored or failed")
	var limit int
	limitVar(fs, &limit, "events, newest first")
	return m.runView(ctx, fs, args, view{
		anyArgs: true,
		check: func() error {
			if *status != "" && !payhook.Status(*status).Valid() {
				return fmt.Errorf("%w: --status %q: want received, processed, ignored or failed", errUsage, *status)
			}
			return checkLimit(limit)
		},
		load: func(db *store.DB, _ string) (any, error) {
			evs, err := db.ListEvents(ctx, store.Filter{Source: *source, Status: payhook.Status(*status), Limit: limit})
			return billing.EventViews(evs, false), err
		},
		print: func(w io.Writer, v any) error {
			evs := v.([]billing.EventView)
			if err := printEvents(w, evs); err != nil {
				return err
			}
			if len(evs) == limit { // on stderr: the table stays the whole of stdout
				fmt.Fprintf(m.Stderr, "the newest %d shown; there may be more (--limit up to %d, --status, --source)\n", limit, api.MaxLimit)
			}
			return nil
		},
	})
}

func (m *Main) eventsShow(ctx context.Context, args []string) error {
	fs := m.flags("events show", eventsHelp)
	source := fs.String("source", "", "the event's source (needed when EVENT_ID exists in several)")
	return m.runView(ctx, fs, args, view{
		arg: "ID|EVENT_ID",
		load: func(db *store.DB, key string) (any, error) {
			ev, err := findEvent(ctx, db, key, *source)
			if err != nil {
				return nil, err
			}
			return billing.EventViews([]*payhook.Event{ev}, true)[0], nil
		},
		print: func(w io.Writer, v any) error {
			ev := v.(billing.EventView)
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
				"secret_id", ev.SecretID,
				"received_via", ev.ReceivedVia)
			_, err := fmt.Fprintf(w, "payload:\n%s\n", ev.Event.Payload)
			return err
		},
	})
}

func (m *Main) eventsReplay(ctx context.Context, args []string) error {
	fs := m.flags("events replay", eventsHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB)")
	source := fs.String("source", "", "the event's source (needed when EVENT_ID exists in several); of a bulk replay, required")
	status := fs.String("status", "", "bulk replay: the events with this status, failed or processed")
	since := fs.Duration("since", 0, "bulk replay, required: the events received this long ago or later, such as 24h")
	typ := fs.String("type", "", "bulk replay: only events of this type")
	dryRun := fs.Bool("dry-run", false, "bulk replay: show what would be replayed, replay nothing")
	rate := fs.String("rate", "", fmt.Sprintf("bulk replay: at most this many events a second (N/s; default %d/s)", jobs.DefaultReplayRate))
	asJSON := fs.Bool("json", false, "bulk replay: print JSON")
	pos, err := positional(fs, args)
	if err != nil {
		return err
	}
	if err := storableArgs(fs, strings.Join(pos, " ")); err != nil {
		return err
	}
	bulk := *status != "" || *since != 0 || *typ != "" || *dryRun || *rate != "" || *asJSON
	switch {
	case len(pos) > 1:
		return fmt.Errorf("%w: events replay takes one ID|EVENT_ID, or the filter flags of a bulk replay", errUsage)
	case len(pos) == 1 && bulk:
		return fmt.Errorf("%w: events replay takes one ID|EVENT_ID or the filter flags (--status, --since, --type, --dry-run, --rate, --json), not both", errUsage)
	case len(pos) == 0 && !bulk:
		return fmt.Errorf("%w: events replay takes one ID|EVENT_ID, or --status, --source and --since to replay by filter", errUsage)
	case len(pos) == 0:
		return m.eventsReplayBulk(ctx, *dbURL, *source, *status, *typ, *since, *rate, *dryRun, *asJSON)
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	ev, err := findEvent(ctx, db, pos[0], *source)
	if err != nil {
		return ambiguous(err)
	}
	q, err := jobs.New(db, jobs.Config{Logger: m.logger(), Now: m.Now})
	if err != nil {
		return err
	}
	if err := q.Replay(ctx, ev.ID); err != nil {
		// An ignored event: refused as a bulk replay of ignored events is,
		// a usage error (the console answers 400).
		if errors.Is(err, payhook.ErrInvalid) {
			return fmt.Errorf("%w: events replay: %w", errUsage, err)
		}
		return err
	}
	fmt.Fprintf(m.Stdout, "event %d (%s %s) re-enqueued; a running payhook serve on this database processes it again\n",
		ev.ID, ev.Source, ev.EventID)
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
	pos, err := positional(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("%w: %s takes one %s", errUsage, fs.Name(), what)
	}
	return pos[0], nil
}

// positional parses flags that may come before, between or after the
// positional args, and returns those.
func positional(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// idArg is oneArg for a row's numeric id; list names the command that
// shows the ids.
func idArg(fs *flag.FlagSet, args []string, thing, list string) (int64, error) {
	key, err := oneArg(fs, args, "ID")
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(key, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: %s takes the %s's numeric id, got %q (see payhook %s)", errUsage, fs.Name(), thing, key, list)
	}
	return id, nil
}

// findEvent finds one event by row id, or else by provider event id;
// with source (not ""), by that source's event id first (one at most:
// the unique index), or else by a row id of that source. An event id that
// exists in several sources is a *billing.AmbiguousError naming them;
// without source, a number that is one event's row id and another's
// provider event id, a usage error naming how to give each (EVENT_ID
// --source, which names one event whatever its id looks like); none, an
// error wrapping payhook.ErrNotFound.
func findEvent(ctx context.Context, db *store.DB, key, source string) (*payhook.Event, error) {
	if source != "" {
		if evs, err := db.ListEvents(ctx, store.Filter{EventID: key, Source: source, Limit: 1}); err != nil || len(evs) == 1 {
			if err != nil {
				return nil, err
			}
			return evs[0], nil
		}
	}
	if id, err := strconv.ParseInt(key, 10, 64); err == nil {
		ev, err := db.Event(ctx, id)
		switch {
		case err == nil && source != "" && ev.Source == source:
			return ev, nil // the source has no event of that id (above)
		case err == nil && source == "":
			// A provider that numbers its events (an hmac source's id
			// header) may have given another event this number.
			same, err := db.ListEvents(ctx, store.Filter{EventID: key, Limit: 2})
			if err != nil {
				return nil, err
			}
			for _, other := range same {
				if other.ID != ev.ID {
					return nil, fmt.Errorf("%w: %s is both the row id of event %s of source %s and the event id of row %d of source %s: "+
						"give %s --source %s for the first, %s --source %s for the second", errUsage, key, ev.EventID, ev.Source,
						other.ID, other.Source, ev.EventID, ev.Source, key, other.Source)
				}
			}
			return ev, nil
		case err != nil && !errors.Is(err, payhook.ErrNotFound):
			return nil, err
		}
	}
	evs, err := db.ListEvents(ctx, store.Filter{EventID: key, Source: source, Limit: api.MaxLimit})
	if err != nil {
		return nil, err
	}
	switch len(evs) {
	case 0:
		if source != "" {
			return nil, fmt.Errorf("event %q in source %q: %w", key, source, payhook.ErrNotFound)
		}
		return nil, fmt.Errorf("event %q: %w", key, payhook.ErrNotFound)
	case 1:
		return evs[0], nil
	}
	sources := make([]string, len(evs))
	for i, ev := range evs {
		sources[i] = ev.Source
	}
	slices.Sort(sources)
	return nil, &billing.AmbiguousError{What: "event", Ref: key, Sources: slices.Compact(sources)}
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
