package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// processing returns the job queue's part of the server: every event goes
// through its provider's mapping to billing facts, applied in the
// transaction that marks it processed; events that carry no fact are
// ignored; sources with API credentials fetch the resource first; an
// event that failed its last attempt raises an alert.
func processing(db *store.DB, sources []payhook.Source, now func() time.Time, log *slog.Logger) jobs.Config {
	bySource := make(map[string]payhook.Source, len(sources))
	for _, s := range sources {
		bySource[s.Name] = s
	}
	handlers := &payhook.Mux{}
	handlers.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
		facts, err := mapping.Facts(bySource[ev.Source].Provider, current(ev))
		if err != nil {
			return err
		}
		if len(facts) == 0 {
			return fmt.Errorf("%w: %s events change no billing state", payhook.ErrIgnored, ev.Type)
		}
		out, err := billing.ApplyOutcome(ctx, db, tx, ev.Source, facts, now())
		if err != nil {
			return err
		}
		for _, ref := range out.EndedClaimed {
			log.Info("subscription ended", "source", ev.Source, "subscription", ref, "event", ev.EventID)
		}
		return nil
	})
	return jobs.Config{
		Handlers: handlers,
		Logger:   log,
		Now:      now,
		Fetch: func(ctx context.Context, ev *payhook.Event) ([]byte, error) {
			if f := bySource[ev.Source].Fetch; f != nil {
				return f(ctx, ev)
			}
			return nil, nil
		},
		OnFailed: func(ctx context.Context, ev *payhook.Event, cause error) {
			err := billing.RaiseAlert(ctx, db, db.SQL, billing.AlertEventFailed, ev.Source+"/"+ev.EventID,
				fmt.Sprintf("%s event failed after %d attempts: %v", ev.Type, ev.Attempts, cause), now())
			if err != nil {
				log.Error("raise alert", "event", ev.ID, "err", err)
			}
		},
	}
}

// current returns ev with the resource's current state in place of the
// state the event carried, where the fetched resource is the event's
// subject as a whole (subscriptions): the event tells, the resource
// decides. Movements (payments, refunds) keep the event's own data, which
// says which movement it was.
func current(ev *payhook.Event) *payhook.Event {
	if ev.Resource == nil || !strings.HasPrefix(ev.Type, "subscription.") {
		return ev
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(ev.Payload, &body) != nil {
		return ev
	}
	body["data"] = ev.Resource
	payload, err := json.Marshal(body)
	if err != nil {
		return ev
	}
	cp := *ev
	cp.Payload = payload
	return &cp
}
