package payhook

import (
	"context"
	"errors"
)

// Inbox stores verified events once and schedules their processing: the
// one call between the receiver and storage. Ingest stores evs in one
// transaction and returns only after its commit, reporting which events
// were new (a duplicate of a stored event is not). An error means none of
// them was stored; when one event of the batch caused it, the error is a
// *EventError naming it, wrapping ErrLocked when the event's key is held
// by another transaction. *jobs.Queue is one; a groupcommit.Committer is
// one that batches concurrent calls.
type Inbox interface {
	Ingest(ctx context.Context, evs []*Event) ([]bool, error)
}

// ErrLocked: an event's key is held by another transaction (another
// instance storing the same event, or processing it, right now). The
// store gave up waiting; the event alone succeeds once that transaction
// ends, and the rest of its batch can be stored without it at once.
var ErrLocked = errors.New("event locked by another transaction")

// EventError is an inbox's error caused by one event of a batch: nothing
// of the batch was stored, and a batch without the event at Index may
// succeed. Err says why (wrapping ErrLocked when the event's key is held
// elsewhere, and ErrUnavailable).
type EventError struct {
	// Index is the event's position in the batch.
	Index int
	// Err is the cause.
	Err error
}

func (e *EventError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *EventError) Unwrap() error { return e.Err }
