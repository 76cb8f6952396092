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
