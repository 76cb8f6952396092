package jobs

import (
	"errors"
	"testing"
	"time"

	"github.com/payhook/payhook"
)

// TestPace: up to 10/s a bulk replay goes one event at a time; above, in
// ten batches a second, capped at maxReplayBatch.
func TestPace(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		batch int
		every time.Duration
	}{
		{0, 2, 100 * time.Millisecond}, // the default, 20/s
		{1, 1, time.Second},
		{10, 1, 100 * time.Millisecond},
		{15, 2, 133333333},
		{1000, 100, 100 * time.Millisecond},
		{1e6, maxReplayBatch, 500 * time.Microsecond},
		{0.001, 1, 1000 * time.Second},
	} {
		batch, every, err := pace(tc.rate)
		if err != nil || batch != tc.batch || every != tc.every {
			t.Errorf("pace(%v) = %d, %v, %v; want %d, %v", tc.rate, batch, every, err, tc.batch, tc.every)
		}
	}
}

// TestPaceTooSlow: a rate so small that its interval would overflow a
// time.Duration (which became 1µs, a replay at full speed) or exceed a
// day is refused, not run at full speed.
func TestPaceTooSlow(t *testing.T) {
	for _, rate := range []float64{1e-11, 1e-6, 1.0 / (25 * 3600)} {
		if batch, every, err := pace(rate); !errors.Is(err, payhook.ErrInvalid) {
			t.Errorf("pace(%v) = %d, %v, %v; want an error wrapping ErrInvalid", rate, batch, every, err)
		}
	}
}
