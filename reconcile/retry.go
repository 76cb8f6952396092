package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider/adapter"
)

// retrier retries the request of one page of a provider's list, or of
// one object's retrieve: a timeout, a 5xx or a 429 is retried after a
// backoff, or after the Retry-After the API asked (up to maxRetryAfter),
// maxAttempts times in all; any other error fails at once. Backfill and
// Reconcile share it.
type retrier struct {
	maxAttempts   int
	backoff       func(attempt int) time.Duration
	maxRetryAfter time.Duration
	sleep         func(ctx context.Context, d time.Duration) error
	logger        *slog.Logger
}

// page runs get until it succeeds or is not worth retrying. what names
// the run in errors and logs ("backfill shop"); page and cursor say which
// page it asked.
func (r retrier) page(ctx context.Context, what string, page int, cursor string, get func() error) error {
	return r.do(ctx, what, fmt.Sprintf("page %d (cursor %q)", page, cursor), "a page", []any{"page", page}, get)
}

// object runs get, the retrieve of one object (kind ref), until it
// succeeds or is not worth retrying, as page does. A 404 is not worth
// it: its error wraps payhook.ErrNotFound for the caller to read.
func (r retrier) object(ctx context.Context, what, kind, ref string, get func() error) error {
	return r.do(ctx, what, "retrieve "+kind+" "+ref, "a retrieve", []any{"kind", kind, "ref", ref}, get)
}

// do runs get until it succeeds or is not worth retrying: where says
// what get asks, in errors; one its log lines, with the attributes attrs.
func (r retrier) do(ctx context.Context, what, where, one string, attrs []any, get func() error) error {
	for attempt := 1; ; attempt++ {
		err := get()
		if err == nil {
			return nil
		}
		fail := func(why string) error {
			return fmt.Errorf("%s: %s: %s: %w", what, where, why, err)
		}
		if ctx.Err() != nil {
			return fail("interrupted")
		}
		if !temporary(err) {
			return fail("the provider's answer cannot be used")
		}
		if attempt >= r.maxAttempts {
			return fail(fmt.Sprintf("gave up after %d attempts", attempt))
		}
		wait := r.backoff(attempt)
		var ae *adapter.APIError
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			if ae.RetryAfter > r.maxRetryAfter {
				return fail(fmt.Sprintf("the API asks to wait %s, more than the %s a run waits", ae.RetryAfter, r.maxRetryAfter))
			}
			wait = ae.RetryAfter
		}
		r.logger.Warn(what+" retries "+one, append(attrs, "attempt", attempt, "wait", wait, "err", err)...)
		if err := r.sleep(ctx, wait); err != nil {
			return fail("interrupted while waiting to retry")
		}
	}
}

// temporary reports whether a lister's error is worth a retry: a 429 or a
// 5xx, or failing to reach the API (a timeout, a refused connection);
// not an answer that says the request or the page is wrong.
func temporary(err error) bool {
	var ae *adapter.APIError
	switch {
	case errors.As(err, &ae):
		return ae.Temporary()
	case errors.Is(err, payhook.ErrMalformed), errors.Is(err, payhook.ErrInvalid), errors.Is(err, payhook.ErrConfig):
		return false
	}
	return true
}
