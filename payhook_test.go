package payhook_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/payhook/payhook"
)

func TestHTTPStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 200},
		{fmt.Errorf("event 3: %w", payhook.ErrNotFound), 404},
		{fmt.Errorf("stripe: %w", payhook.ErrSignature), 400},
		{payhook.ErrMalformed, 400},
		{fmt.Errorf("limit %q: %w", "x", payhook.ErrInvalid), 400},
		{fmt.Errorf("payment pay_1 in two sources: %w", payhook.ErrConflict), 409},
		{payhook.ErrTooLarge, 413},
		{fmt.Errorf("%w: commit: disk full", payhook.ErrUnavailable), 503},
		{errors.New("surprise"), 500},
	} {
		if got := payhook.HTTPStatus(tc.err); got != tc.want {
			t.Errorf("HTTPStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestStatusValid(t *testing.T) {
	for _, s := range []payhook.Status{"received", "processed", "ignored", "failed"} {
		if !s.Valid() {
			t.Errorf("%q.Valid() = false", s)
		}
	}
	if payhook.Status("done").Valid() {
		t.Error(`"done".Valid() = true`)
	}
}

func TestMuxDispatchOrderAndError(t *testing.T) {
	var mux payhook.Mux
	var calls []string
	h := func(name string, err error) payhook.HandlerFunc {
		return func(context.Context, *sql.Tx, *payhook.Event) error { calls = append(calls, name); return err }
	}
	mux.Handle("a", h("first", nil))
	mux.Handle("a", h("second", errors.New("boom")))
	mux.Handle("a", h("third", nil))
	err := mux.Dispatch(context.Background(), nil, &payhook.Event{Type: "a", EventID: "evt_1"})
	if fmt.Sprint(calls) != "[first second]" || err == nil || err.Error() != "handle a event evt_1: boom" {
		t.Fatalf("Dispatch ran %v and returned %v", calls, err)
	}
}

// batcher is a payhook.BatchHandler that records what it was given.
type batcher struct{ got [][]string }

func (b *batcher) Handle(context.Context, *sql.Tx, *payhook.Event) error { return nil }

func (b *batcher) HandleBatch(_ context.Context, _ *sql.Tx, evs []*payhook.Event) ([]error, error) {
	var ids []string
	errs := make([]error, len(evs))
	for i, ev := range evs {
		ids = append(ids, ev.EventID)
		if ev.EventID == "evt_ignored" {
			errs[i] = fmt.Errorf("%w: nothing in it", payhook.ErrIgnored)
		}
	}
	b.got = append(b.got, ids)
	return errs, nil
}

// TestMuxDispatchBatch: events whose one handler is the same BatchHandler
// go to it at once, their errors wrapped as Dispatch wraps them; any other
// handler, a second one, or none leaves the batch to be dispatched one by
// one.
func TestMuxDispatchBatch(t *testing.T) {
	plain := payhook.HandlerFunc(func(context.Context, *sql.Tx, *payhook.Event) error { return nil })
	for _, tc := range []struct {
		name  string
		setup func(m *payhook.Mux, b, other *batcher)
		types []string
		batch bool
	}{
		{"one batch handler for all", func(m *payhook.Mux, b, _ *batcher) { m.Handle("*", b) }, []string{"a", "b"}, true},
		{"a second handler", func(m *payhook.Mux, b, _ *batcher) { m.Handle("*", b); m.Handle("*", plain) }, []string{"a", "b"}, false},
		{"another batch handler for a type", func(m *payhook.Mux, b, other *batcher) { m.Handle("*", b); m.Handle("b", other) }, []string{"a", "b"}, false},
		{"a plain handler for a type", func(m *payhook.Mux, b, _ *batcher) { m.Handle("*", b); m.Handle("b", plain) }, []string{"a", "b"}, false},
		{"no handler for a type", func(m *payhook.Mux, b, _ *batcher) { m.Handle("a", b) }, []string{"a", "b"}, false},
		{"a plain handler", func(m *payhook.Mux, _, _ *batcher) { m.Handle("*", plain) }, []string{"a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mux payhook.Mux
			b, other := &batcher{}, &batcher{}
			tc.setup(&mux, b, other)
			evs := []*payhook.Event{{Type: tc.types[0], EventID: "evt_1"}, {Type: tc.types[len(tc.types)-1], EventID: "evt_ignored"}}
			errs, ok, err := mux.DispatchBatch(context.Background(), nil, evs)
			if err != nil || ok != tc.batch {
				t.Fatalf("DispatchBatch = %v, %v; want batched %v", ok, err, tc.batch)
			}
			if !ok {
				if len(b.got)+len(other.got) != 0 {
					t.Fatalf("not batched, but the batch handlers got %v %v", b.got, other.got)
				}
				return
			}
			if fmt.Sprint(b.got) != "[[evt_1 evt_ignored]]" || errs[0] != nil ||
				!errors.Is(errs[1], payhook.ErrIgnored) || errs[1].Error() != "handle b event evt_ignored: ignored: nothing in it" {
				t.Fatalf("the batch handler got %v; errors %v", b.got, errs)
			}
		})
	}
}

// SameBody tells a redelivery from a changed event: bytes first, then,
// for a provider that names the delivery in the body, the object without
// those members.
func TestSameBody(t *testing.T) {
	paddle := []string{"notification_id"}
	first := `{"event_id":"evt_1","notification_id":"ntf_1","data":{"id":"txn_1","total":"100"}}`
	for _, tc := range []struct {
		name   string
		b      string
		fields []string
		want   bool
	}{
		{"the same bytes", first, nil, true},
		{"another notification, no fields named", `{"event_id":"evt_1","notification_id":"ntf_2","data":{"id":"txn_1","total":"100"}}`, nil, false},
		{"another notification", `{"event_id":"evt_1","notification_id":"ntf_2","data":{"id":"txn_1","total":"100"}}`, paddle, true},
		{"members in another order", `{"notification_id":"ntf_2","data":{"id":"txn_1","total":"100"},"event_id":"evt_1"}`, paddle, true},
		{"no notification at all", `{"event_id":"evt_1","data":{"id":"txn_1","total":"100"}}`, paddle, true},
		{"another total", `{"event_id":"evt_1","notification_id":"ntf_2","data":{"id":"txn_1","total":"999"}}`, paddle, false},
		{"a member more", `{"event_id":"evt_1","notification_id":"ntf_1","data":{"id":"txn_1","total":"100"},"x":1}`, paddle, false},
		{"a member less", `{"event_id":"evt_1","notification_id":"ntf_1"}`, paddle, false},
		{"the field named inside data only", `{"event_id":"evt_1","notification_id":"ntf_1","data":{"id":"txn_1","total":"100","notification_id":"x"}}`, paddle, false},
		{"not JSON", `{"event_id":`, paddle, false},
		{"not an object", `["evt_1"]`, paddle, false},
		{"null", `null`, paddle, false},
	} {
		if got := payhook.SameBody([]byte(first), []byte(tc.b), tc.fields); got != tc.want {
			t.Errorf("%s: SameBody = %v, want %v", tc.name, got, tc.want)
		}
	}
}
