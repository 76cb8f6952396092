package payhook

import (
	"bytes"
	"encoding/json"
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
	if n, ok := src.Verifier.(DeliveryNamer); ok {
		ev.DeliveryFields = n.DeliveryFields()
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

// SameBody reports whether b, a body delivered again for an event stored
// with body a, tells the same event: the same bytes or, when the provider
// names its delivery in the body (deliveryFields, see DeliveryNamer), the
// same JSON object but for those top-level members. A redelivery that
// BTCPay numbers anew, or a notification Paddle sends again, is then no
// conflicting body.
func SameBody(a, b []byte, deliveryFields []string) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if len(deliveryFields) == 0 {
		return false
	}
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil || ma == nil || mb == nil {
		return false
	}
	for _, f := range deliveryFields {
		delete(ma, f)
		delete(mb, f)
	}
	if len(ma) != len(mb) {
		return false
	}
	for k, va := range ma {
		if vb, ok := mb[k]; !ok || !bytes.Equal(va, vb) {
			return false
		}
	}
	return true
}
