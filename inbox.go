package payhook

import "errors"

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
