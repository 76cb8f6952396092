// Package jobsui serves River's own web UI (riverui) over a jobs.Queue,
// as payhook serve mounts it under /console/jobs. It is a package of its
// own so that a program that imports jobs without it does not link
// riverui and its bundled frontend: about 8.6 MB of the README's library
// example, a quarter of its binary.
package jobsui

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"riverqueue.com/riverui"

	"github.com/payhook/payhook/jobs"
)

// Handler returns River's web UI over q's River client, serving under
// prefix (such as "/console/jobs"), and starts its background services,
// which stop when ctx ends. It logs warnings and errors to logger
// (slog.Default() if nil). It has no authentication and no CSRF
// protection of its own: the caller must put both in front of it.
func Handler(ctx context.Context, q *jobs.Queue, prefix string, logger *slog.Logger) (http.Handler, error) {
	if logger == nil {
		logger = slog.Default()
	}
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(q.River(), nil),
		Logger:    slog.New(warnings{logger.Handler()}),
		Prefix:    prefix,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs UI: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("start jobs UI: %w", err)
	}
	return h, nil
}

// warnings passes on the records of level Warn and above: riverui logs
// every request it serves at Info.
type warnings struct{ slog.Handler }

func (h warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
