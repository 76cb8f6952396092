package receiver

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
)

// TestCheckEnvelope: whatever Verifier a source has, an envelope payhook
// cannot store and deduplicate safely is refused before the store.
func TestCheckEnvelope(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	for _, env := range []payhook.Envelope{
		{EventID: "evt_1", Type: "a.b", Environment: "live", OccurredAt: at},
		{EventID: "7"},
		{EventID: strings.Repeat("e", MaxFieldBytes), Type: strings.Repeat("t", MaxFieldBytes), OccurredAt: payhook.MaxTime},
	} {
		if err := checkEnvelope(env); err != nil {
			t.Errorf("checkEnvelope(%+v) = %v; want nil", env, err)
		}
	}
	for _, env := range []payhook.Envelope{
		{},
		{Type: "a.b"},
		{EventID: "evt\u2028x"}, {EventID: "evt\u2029x"}, {EventID: "evt\u202ex"}, {EventID: "evt\u200bx"},
		{EventID: "evt\ufffdx"}, {EventID: "evt\x00x"}, {EventID: "evt\xffx"}, {EventID: "evt\u0085x"},
		{EventID: strings.Repeat("e", MaxFieldBytes+1)},
		{EventID: "evt_1", Type: "a\u202eb"}, {EventID: "evt_1", Type: "a\nb"},
		{EventID: "evt_1", Environment: "live\u200b"},
		{EventID: "evt_1", OccurredAt: time.Unix(10000000000000, 0)},
		{EventID: "evt_1", OccurredAt: time.Unix(-1, 0)},
		{EventID: "evt_1", OccurredAt: payhook.MaxTime.Add(time.Nanosecond)},
	} {
		if err := checkEnvelope(env); !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("checkEnvelope(%+q) = %v; want ErrMalformed", env, err)
		}
	}
}
