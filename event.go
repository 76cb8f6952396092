package payhook

import (
	"fmt"
	"time"
)

// NewEvent returns the event to store for an envelope read from body,
// received through src at time at, as every way in stores it (the
// receiver, a backfill): received, or ignored with the reason when src
// takes one environment and the event says another one, or none. It fails
// closed: on a source of one environment, an event that does not say it
// belongs there is not processed. env must have passed the envelope
// checks (an id, and an id, type, environment and time payhook can store).
func NewEvent(src Source, env Envelope, body []byte, at time.Time) *Event {
	ev := &Event{
		Source: src.Name, EventID: env.EventID, Type: env.Type, Environment: env.Environment,
		OccurredAt: env.OccurredAt, ReceivedAt: at, Payload: body, SecretID: env.SecretID,
		Status: StatusReceived,
	}
	if src.Environment != "" && env.Environment != src.Environment {
		ev.Status = StatusIgnored
		ev.LastError = fmt.Sprintf("event of environment %q on a source of environment %q", env.Environment, src.Environment)
		if env.Environment == "" {
			ev.LastError = fmt.Sprintf("event does not say its environment, on a source of environment %q", src.Environment)
		}
	}
	return ev
}
