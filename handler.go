package payhook

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// Handler applies one event. It runs inside tx, the transaction that then
// marks the event processed: its writes and the mark commit together or not
// at all. A returned error rolls everything back and the event is retried.
// Handlers must be idempotent, since an event may be replayed on purpose,
// and must not use the database outside tx (on SQLite that deadlocks).
// Keep slow I/O (provider API calls, email) out of the transaction: fetch
// before, or send after commit through an outbox; on SQLite an open
// transaction holds the only connection, and webhooks wait for it.
type Handler interface {
	Handle(ctx context.Context, tx *sql.Tx, ev *Event) error
}

// BatchHandler is a Handler that can also apply several events at once,
// in one transaction, for less than applying each in turn (billing's
// processing: a statement per table for all of them). The job queue
// batches events through Mux.DispatchBatch.
type BatchHandler interface {
	Handler
	// HandleBatch applies evs in tx as Handle would apply each of them,
	// in any order, and returns per event the error Handle would have
	// returned: nil, one wrapping ErrIgnored, or a failure, of an event
	// of which it left nothing in tx (it rolled it back to a savepoint);
	// or an error after which tx is rolled back (the caller may then
	// handle each event alone, to tell which one failed).
	HandleBatch(ctx context.Context, tx *sql.Tx, evs []*Event) ([]error, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx *sql.Tx, ev *Event) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, tx *sql.Tx, ev *Event) error {
	return f(ctx, tx, ev)
}

// Mux routes events to handlers by event type. "*" matches every type that
// has no handler of its own. The zero value is ready to use and safe for
// concurrent use.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string][]Handler
}

// Handle registers h for eventType; several handlers of one type run in
// registration order in the same transaction.
func (m *Mux) Handle(eventType string, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers == nil {
		m.handlers = make(map[string][]Handler)
	}
	m.handlers[eventType] = append(m.handlers[eventType], h)
}

// HandleFunc registers f for eventType.
func (m *Mux) HandleFunc(eventType string, f func(ctx context.Context, tx *sql.Tx, ev *Event) error) {
	m.Handle(eventType, HandlerFunc(f))
}

// Handles reports whether some handler takes events of eventType.
func (m *Mux) Handles(eventType string) bool {
	return len(m.lookup(eventType)) > 0
}

func (m *Mux) lookup(eventType string) []Handler {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if hs := m.handlers[eventType]; len(hs) > 0 {
		return hs
	}
	return m.handlers["*"]
}

// Dispatch runs the handlers for ev.Type in order, stopping at the first
// error, which it returns wrapped with the event's type and id.
func (m *Mux) Dispatch(ctx context.Context, tx *sql.Tx, ev *Event) error {
	for _, h := range m.lookup(ev.Type) {
		if err := h.Handle(ctx, tx, ev); err != nil {
			return fmt.Errorf("handle %s event %s: %w", ev.Type, ev.EventID, err)
		}
	}
	return nil
}

// DispatchBatch handles evs together in tx when the one handler of each
// is the same BatchHandler (the job queue's batches with billing's
// processing), with one HandleBatch call, and returns per event the error
// Dispatch would return for it; or the BatchHandler's error, after which
// tx is to be rolled back. It reports false, handling nothing, when evs
// have other handlers: the caller dispatches them one by one.
func (m *Mux) DispatchBatch(ctx context.Context, tx *sql.Tx, evs []*Event) (errs []error, ok bool, err error) {
	if len(evs) == 0 {
		return nil, false, nil
	}
	first := m.lookup(evs[0].Type)
	bh, ok := only(first).(BatchHandler)
	if !ok {
		return nil, false, nil
	}
	for _, ev := range evs[1:] {
		if hs := m.lookup(ev.Type); len(hs) != 1 || &hs[0] != &first[0] {
			return nil, false, nil
		}
	}
	got, err := bh.HandleBatch(ctx, tx, evs)
	if err == nil && len(got) != len(evs) {
		err = fmt.Errorf("a batch handler returned %d results for %d events", len(got), len(evs))
	}
	if err != nil {
		return nil, true, fmt.Errorf("handle a batch of %d events: %w", len(evs), err)
	}
	errs = make([]error, len(evs))
	for i, ev := range evs {
		if got[i] != nil {
			errs[i] = fmt.Errorf("handle %s event %s: %w", ev.Type, ev.EventID, got[i])
		}
	}
	return errs, true, nil
}

// only returns the handler of hs if it is the only one.
func only(hs []Handler) Handler {
	if len(hs) != 1 {
		return nil
	}
	return hs[0]
}
