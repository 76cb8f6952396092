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

// Unrecorded is implemented by a sink whose successful deliveries are
// not worth a record of their own. A fact whose sinks are all Unrecorded
// gets no delivery row: Emit holds it by a row in the fact's
// transaction instead (one for all the facts EmitMany writes), so that a
// crash after the commit still sends it (through the sweep), and Tell
// deletes that row once the facts are told (see Untold). A delivery to it that exists all the same (the sweep's, or a
// fact routed to other sinks too) is deleted once its first attempt
// succeeds instead of being marked delivered, and that attempt is not
// logged; one whose first attempt failed keeps its row and its log. Log
// is one: its line is the record.
type Unrecorded interface {
	Sink
	// Unrecorded marks the sink; it is never called.
	Unrecorded()
}

// unrecorded reports whether s is an Unrecorded sink.
func unrecorded(s Sink) bool {
	_, ok := s.(Unrecorded)
	return ok
}

// Log is a sink that writes one structured line per fact: payhook serve's
// sink when none is configured. It is Unrecorded: the facts it tells
// leave no delivery row.
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

// Unrecorded marks Log as an Unrecorded sink.
func (Log) Unrecorded() {}
