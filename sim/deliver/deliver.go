// Package deliver is the delivery engine of payhook's simulated provider:
// at-least-once webhook delivery with the retry schedule, timeouts and
// failure handling of real providers, and faults injected on purpose.
package deliver

import (
	"time"

	"github.com/payhook/payhook/sim/flavour"
)

// Target is a webhook endpoint to deliver to.
type Target struct {
	// ID is the endpoint's id (the delivery log is kept per ID).
	ID string
	// URL receives the POSTs.
	URL string
	// Secrets returns the secrets that sign a delivery now: the current
	// one, plus the previous one during a rotation's grace period.
	Secrets func() []string
	// Flavour renders and signs the deliveries.
	Flavour flavour.Flavour
}

// Outage is a window, measured from the dispatcher's first attempt in provider
// time (divided by Config.TimeScale, like every delay), during which the
// target is down: deliveries fail as if the connection were refused,
// without reaching the target.
type Outage struct {
	From, To time.Duration
}

// Faults are the ways deliveries go wrong on purpose. All draws come from
// one generator seeded with Config.Seed, so a run is reproducible.
type Faults struct {
	// Duplicate is the probability that an event is delivered once more,
	// after its first successful delivery.
	Duplicate float64
	// Burst is the probability that an event's first delivery is sent as
	// BurstSize parallel copies.
	Burst float64
	// BurstSize is the number of parallel copies of a burst. Default 5.
	BurstSize int
	// ReorderWindow, if above 1, holds events per target and releases each
	// window of that many events in a shuffled order.
	ReorderWindow int
	// Delay is the maximum random delay before an event's first attempt
	// (divided by the time scale).
	Delay time.Duration
	// Drop is the probability that an event is never delivered; it is
	// still listed by the events API.
	Drop float64
	// Outages are the windows when the target is down.
	Outages []Outage
}

// Attempt is one entry of an endpoint's delivery log.
type Attempt struct {
	// DeliveryID identifies the delivery (all attempts of one event to one
	// endpoint, plus resends, share it; duplicates and burst copies get
	// their own).
	DeliveryID string `json:"delivery_id"`
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	// N is the attempt number within the delivery, from 1.
	N  int       `json:"attempt"`
	At time.Time `json:"at"`
	// Status is the HTTP status, 0 when there was no answer.
	Status  int           `json:"status"`
	Latency time.Duration `json:"latency_ns"`
	// Response is the start of the response body (at most 256 bytes).
	Response string `json:"response,omitempty"`
	// Error says why there was no 2xx answer (timeout, refused, outage...).
	Error string `json:"error,omitempty"`
	// Fault names the injected fault this attempt comes from, if any:
	// "duplicate", "burst", "resend".
	Fault string `json:"fault,omitempty"`
}

// Stats counts what a dispatcher did.
type Stats struct {
	Events     int `json:"events"`     // events handed to Send
	Attempts   int `json:"attempts"`   // HTTP attempts made (and outage failures)
	Acked      int `json:"acked"`      // attempts answered 2xx
	Failed     int `json:"failed"`     // attempts without a 2xx
	Duplicates int `json:"duplicates"` // extra deliveries injected
	Bursts     int `json:"bursts"`     // events sent as parallel bursts
	Dropped    int `json:"dropped"`    // events never delivered on purpose
	GaveUp     int `json:"gave_up"`    // deliveries that exhausted the schedule
	Outage     int `json:"outage"`     // attempts failed by an outage window
}
