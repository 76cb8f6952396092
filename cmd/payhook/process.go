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
// ignored with the mapping's reason; sources with API credentials fetch the resource first; an
// event that failed its last attempt raises an alert.
func processing(db *store.DB, sources []payhook.Source, now func() time.Time, log *slog.Logger) jobs.Config {
	bySource := make(map[string]payhook.Source, len(sources))
	for _, s := range sources {
		bySource[s.Name] = s
	}
	handlers := &payhook.Mux{}
	handlers.HandleFunc("*", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
		provider := bySource[ev.Source].Provider
		read, err := mapping.Read(provider, current(provider, ev))
		if err != nil {
			return err
		}
		if len(read.Facts) == 0 {
			return fmt.Errorf("%w: %s", payhook.ErrIgnored, read.Ignored)
		}
		out, err := billing.ApplyOutcome(ctx, db, tx, ev.Source, read.Facts, now())
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
		// The alert commits with the failure, in the transaction that
		// marks the event failed.
		OnFailed: func(ctx context.Context, tx *sql.Tx, ev *payhook.Event, cause error) error {
			return billing.RaiseAlert(ctx, db, tx, billing.AlertEventFailed, ev.Source+"/"+ev.EventID,
				payhook.Storable(fmt.Sprintf("%s event failed after %d attempts: %v", ev.Type, ev.Attempts, cause)), now())
		},
	}
}

// fetchedSubjects says, per provider, which events are about a resource
// whose fetched state stands for the subject as a whole, and where in the
// payload that subject is.
var fetchedSubjects = map[string]struct {
	typePrefix string
	path       []string
}{
	"billete": {"subscription.", []string{"data"}},
	"stripe":  {"customer.subscription.", []string{"data", "object"}},
}

// current returns ev with the resource's current state in place of the
// state the event carried, where the fetched resource is the event's
// subject as a whole (subscriptions): the event tells, the resource
// decides. Movements (payments, refunds) keep the event's own data, which
// says which movement it was.
func current(provider string, ev *payhook.Event) *payhook.Event {
	subject, ok := fetchedSubjects[provider]
	if ev.Resource == nil || !ok || !strings.HasPrefix(ev.Type, subject.typePrefix) {
		return ev
	}
	payload, err := replaceAt(ev.Payload, subject.path, ev.Resource)
	if err != nil {
		return ev
	}
	cp := *ev
	cp.Payload = payload
	return &cp
}

// replaceAt returns the JSON object doc with the value at path (object
// keys, created when missing) replaced by value.
func replaceAt(doc json.RawMessage, path []string, value json.RawMessage) (json.RawMessage, error) {
	if len(path) == 0 {
		return value, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		obj = map[string]json.RawMessage{}
	}
	inner := obj[path[0]]
	if inner == nil {
		inner = json.RawMessage("{}")
	}
	v, err := replaceAt(inner, path[1:], value)
	if err != nil {
		return nil, err
	}
	obj[path[0]] = v
	return json.Marshal(obj)
}
