package outbox

import (
	"context"
	"errors"
	"log/slog"
)

// Sink sends one fact somewhere outside the database. Send is called after
// the fact's transaction committed, in a job of its own, and again (with
// backoff) until it returns nil: it must tolerate sending the same fact
// twice (receivers deduplicate by Fact.ID). The Receipt, kept in the
// delivery log, says what the other side answered.
type Sink interface {
	Send(ctx context.Context, f Fact) (Receipt, error)
}

// Receipt is what the other side answered one attempt.
type Receipt struct {
	// Status is the HTTP status (or SMTP reply code); 0 if none.
	Status int
	// Response is (the start of) the answer's body.
	Response string
}

// ErrGone is returned by a sink whose receiver is gone for good (an HTTP
// 410): the sink is paused instead of retried.
var ErrGone = errors.New("receiver gone")

// Func adapts a function to Sink: an application's after-commit effect.
type Func func(ctx context.Context, f Fact) error

// Send calls f.
func (f Func) Send(ctx context.Context, fact Fact) (Receipt, error) { return Receipt{}, f(ctx, fact) }

// Log is a sink that writes one structured line per fact: payhook serve's
// sink when none is configured.
type Log struct {
	// Logger receives the lines. If nil, slog.Default().
	Logger *slog.Logger
}

// Send logs f at level info.
func (l Log) Send(ctx context.Context, f Fact) (Receipt, error) {
	lg := l.Logger
	if lg == nil {
		lg = slog.Default()
	}
	lg.LogAttrs(ctx, slog.LevelInfo, "fact", slog.String("id", f.ID), slog.String("type", f.Type),
		slog.String("source", f.Source), slog.String("subject", f.Subject), slog.Time("timestamp", f.Timestamp),
		slog.String("data", string(f.Data)))
	return Receipt{}, nil
}
