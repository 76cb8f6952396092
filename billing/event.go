package billing

import (
	"encoding/json"

	"github.com/payhook/payhook"
)

// EventView is a stored event as the API, the CLI and the console show it:
// its payload inline as JSON (stored events always are JSON; a payload
// that is not is left out).
type EventView struct {
	*payhook.Event
	Payload json.RawMessage `json:"payload,omitempty"`
}

// EventViews returns the views of evs, never nil. withPayload false leaves
// every payload out, for lists that only name the events.
func EventViews(evs []*payhook.Event, withPayload bool) []EventView {
	out := make([]EventView, len(evs))
	for i, ev := range evs {
		out[i] = EventView{Event: ev}
		if withPayload && json.Valid(ev.Payload) {
			out[i].Payload = ev.Payload
		}
	}
	return out
}
