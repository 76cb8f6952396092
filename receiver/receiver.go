// Package receiver is payhook's webhook endpoint: an http.Handler for
// POST /webhooks/{source} that verifies each delivery over its raw body,
// stores the event once and answers 2xx only after the commit.
//
//	status  case
//	200     new event stored (and its job enqueued), or a duplicate, or an
//	        event of another environment, or of none when the source has
//	        one (stored as ignored, with an environment_mismatch alert)
//	400     missing, malformed, wrong or expired signature, or a signed
//	        timestamp outside 2000–2200; a signed body that is not one
//	        strict JSON object (duplicate names, invalid UTF-8 or lone
//	        surrogates anywhere) or has no event id; an event id or type
//	        over MaxFieldBytes, not UTF-8 or with control or format
//	        characters; an event time outside 2000–2200
//	404     unknown source
//	405     a method other than POST
//	413     body over the limit
//	415     a Content-Encoding other than identity (a compressed body),
//	        before the signature is judged
//	503     the database could not store or commit, or the bodies being
//	        read and stored already hold MaxInFlightBytes (with
//	        Retry-After): the provider retries
//
// Nothing is written for any status but 200. A body is read only after
// the source's verifier, when it is a payhook.HeaderChecker, found the
// signature headers present and well formed: a request that cannot be
// authentic is refused with 400 before it costs its body's memory.
package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/logthrottle"
)

// FloodPeriod is how often the Receiver logs a line of one kind at most
// (Config.Logger).
const FloodPeriod = 10 * time.Second

// DefaultMaxBodyBytes is the body limit when Config leaves it zero: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// DefaultMaxInFlightBytes bounds the body bytes of the deliveries being
// read or stored at once when Config leaves it zero: 64 MiB.
const DefaultMaxInFlightBytes = 64 << 20

// retryAfter is the Retry-After of a delivery refused for lack of memory:
// the bodies in flight are committed within milliseconds.
const retryAfter = "1"

// MaxFieldBytes bounds an event id and an event type: payhook.MaxRefBytes.
// Longer ones are refused as malformed (400) before the store is touched:
// stored, they could exceed an index's row size, fail the insert and turn
// every retry of the provider into a 503.
const MaxFieldBytes = payhook.MaxRefBytes

// Config configures a Receiver.
type Config struct {
	// Sources are the configured sources, by unique Name.
	Sources []payhook.Source
	// Inbox stores the events (required).
	Inbox payhook.Inbox
	// MaxBodyBytes bounds a body. If zero, defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxInFlightBytes bounds the body bytes held at once by the
	// deliveries being read, verified and stored, counted by their
	// Content-Length (or as read, without one); a delivery that would go
	// beyond is answered 503 with Retry-After, so that many slow or large
	// requests cannot exhaust memory. If zero, defaults to 64 MiB, or
	// MaxBodyBytes when that is larger.
	MaxInFlightBytes int64
	// Logger receives a line per delivery rejected, ignored or not stored,
	// at most one a FloodPeriod of each message, source and status: when
	// the period ends, the last line of that kind left out is passed,
	// saying how many others were left out (left_out). A database that is
	// down, or a sender spraying bad signatures, is then a line every 10 s
	// rather than one per request, and the count of an outage that ended
	// is told within 10 s; metrics count every delivery (OnAnswer).
	// Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// StoreTimeout bounds the wait for the store's commit; past it the
	// delivery is answered 503 and the provider retries. Default 5s.
	StoreTimeout time.Duration
	// OnAnswer, if set, is called once per delivery after its answer is
	// written (metrics): source is "" for an unknown source, outcome the
	// Outcome of a 200, SignatureRefused for a delivery refused for its
	// signature, "" otherwise; status the HTTP status, took the time since
	// the request was taken. It must be cheap.
	OnAnswer func(source string, outcome Outcome, status int, took time.Duration)
	// OnSignature, if set, is called once per delivery to a configured
	// source whose signature was judged: ok false when it was refused
	// (payhook.ErrSignature: missing, malformed, wrong or expired), true
	// when it matched; at is the delivery's time. It must be cheap: it
	// runs on the ack path of refused deliveries too (signature health,
	// reconcile.SignatureCounter).
	OnSignature func(source string, ok bool, at time.Time)
}

// Outcome is how an accepted delivery was answered (the "status" of a
// 200), or SignatureRefused.
type Outcome string

// The outcomes of an accepted delivery.
const (
	Stored    Outcome = "stored"
	Duplicate Outcome = "duplicate"
	Ignored   Outcome = "ignored"
)

// SignatureRefused is the outcome OnAnswer is told of a delivery refused
// for its signature (payhook.ErrSignature: missing, malformed, wrong or
// expired), answered 400 as a malformed one is: metrics count the two
// apart.
const SignatureRefused Outcome = "signature"

// Receiver is the webhook http.Handler. It is safe for concurrent use.
type Receiver struct {
	cfg      Config
	sources  map[string]payhook.Source
	budget   budget
	throttle *logthrottle.Handler // cfg.Logger's
}

// FlushLogs tells now the last log line of each flood the Receiver held
// back (FloodPeriod), with how many others it left out: call it once the
// server no longer sends it requests, so that an outage's refusals up to
// the shutdown are counted in the log before the process exits.
func (r *Receiver) FlushLogs() { r.throttle.Flush() }

// New returns a Receiver. It returns an error wrapping payhook.ErrConfig
// when Inbox is nil, or a source has no name, no verifier, a duplicate
// name or an environment other than "", "test" and "live" (which no
// event says, so that every event would be stored as ignored).
func New(cfg Config) (*Receiver, error) {
	if cfg.Inbox == nil {
		return nil, fmt.Errorf("receiver: no inbox: %w", payhook.ErrConfig)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	throttle := logthrottle.New(cfg.Logger.Handler(), FloodPeriod, "source", "status").WithClock(cfg.Now)
	cfg.Logger = slog.New(throttle)
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 5 * time.Second
	}
	if cfg.MaxInFlightBytes <= 0 {
		cfg.MaxInFlightBytes = max(DefaultMaxInFlightBytes, cfg.MaxBodyBytes)
	}
	if cfg.MaxInFlightBytes < cfg.MaxBodyBytes {
		return nil, fmt.Errorf("receiver: MaxInFlightBytes %d is below MaxBodyBytes %d, so a body at the limit could never be read: %w",
			cfg.MaxInFlightBytes, cfg.MaxBodyBytes, payhook.ErrConfig)
	}
	r := &Receiver{cfg: cfg, sources: make(map[string]payhook.Source, len(cfg.Sources)), budget: budget{left: cfg.MaxInFlightBytes},
		throttle: throttle}
	for _, s := range cfg.Sources {
		switch {
		case s.Name == "":
			return nil, fmt.Errorf("receiver: a source has no name: %w", payhook.ErrConfig)
		case s.Verifier == nil:
			return nil, fmt.Errorf("receiver: source %q has no verifier: %w", s.Name, payhook.ErrConfig)
		case s.Environment != "" && s.Environment != "test" && s.Environment != "live":
			// No event says it: every one would be stored as ignored.
			return nil, fmt.Errorf("receiver: source %q: environment %q is neither test nor live: %w",
				s.Name, s.Environment, payhook.ErrConfig)
		}
		if _, dup := r.sources[s.Name]; dup {
			return nil, fmt.Errorf("receiver: source %q configured twice: %w", s.Name, payhook.ErrConfig)
		}
		r.sources[s.Name] = s
	}
	return r, nil
}

// response is the JSON body of every answer.
type response struct {
	Status  Outcome `json:"status,omitempty"`
	ID      int64   `json:"id,omitempty"`
	EventID string  `json:"event_id,omitempty"`
	Reason  string  `json:"reason,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// ServeHTTP receives one delivery. The source is the {source} path value
// when the handler is mounted on a pattern with it, else the last segment
// of the path.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.cfg.OnAnswer != nil {
		start := time.Now()
		w = &answerWriter{ResponseWriter: w}
		defer func() {
			a := w.(*answerWriter)
			r.cfg.OnAnswer(a.source, a.outcome, a.status, time.Since(start))
		}()
	}
	name := req.PathValue("source")
	if name == "" {
		name = path.Base(req.URL.Path)
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.reject(w, name, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; webhooks are POSTed", req.Method))
		return
	}
	src, ok := r.sources[name]
	if !ok {
		r.reject(w, "", http.StatusNotFound, fmt.Sprintf("unknown source %q", name))
		return
	}
	if a, ok := w.(*answerWriter); ok {
		a.source = name // a configured source: a bounded label
	}
	if err := checkEncoding(req.Header); err != nil {
		// Before the signature is judged: compressed bytes would fail it
		// as if the secret were wrong, and count towards its alert.
		w.Header().Set("Accept-Encoding", "identity")
		r.reject(w, name, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	now := r.cfg.Now()
	if hc, ok := src.Verifier.(payhook.HeaderChecker); ok {
		if err := hc.CheckHeader(req.Header, now); err != nil {
			r.signature(w, name, err, now)
			r.reject(w, name, payhook.HTTPStatus(err), err.Error())
			return
		}
	}
	body, held, err := r.readBody(w, req)
	defer r.budget.give(held)
	if err != nil {
		if errors.Is(err, errBusy) {
			w.Header().Set("Retry-After", retryAfter)
		}
		r.reject(w, name, payhook.HTTPStatus(err), err.Error())
		return
	}
	env, err := src.Verifier.Verify(payhook.Delivery{Header: req.Header, Body: body, ReceivedAt: now})
	r.signature(w, name, err, now)
	if err != nil {
		r.reject(w, name, payhook.HTTPStatus(err), err.Error())
		return
	}
	if err := checkEnvelope(env); err != nil {
		r.reject(w, name, payhook.HTTPStatus(err), err.Error())
		return
	}
	// Fail closed: on a source of one environment, an event that does not
	// say it belongs there is stored ignored, not processed.
	ev := payhook.NewEvent(src, env, body, now)
	ctx, cancel := context.WithTimeout(req.Context(), r.cfg.StoreTimeout)
	defer cancel()
	inserted, err := r.cfg.Inbox.Ingest(ctx, []*payhook.Event{ev})
	if err != nil {
		msg := "webhook not stored"
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// The wait ended, not the commit: one under way (a database
			// that answers late) may still store the event, and the
			// provider's retry is then a duplicate.
			msg = "webhook not acknowledged: its commit did not return in time and may still store it"
		}
		r.cfg.Logger.Error(msg, "source", name, "event_id", ev.EventID, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, response{Error: "could not store the event; retry later"})
		return
	}
	resp := response{Status: Duplicate, EventID: ev.EventID}
	switch {
	case !inserted[0]:
	case ev.Status == payhook.StatusIgnored:
		resp.Status, resp.ID, resp.Reason = Ignored, ev.ID, ev.LastError
		r.cfg.Logger.Warn("webhook ignored", "source", name, "event_id", ev.EventID, "reason", ev.LastError)
	default:
		resp.Status, resp.ID = Stored, ev.ID
	}
	if a, ok := w.(*answerWriter); ok {
		a.outcome = resp.Status
	}
	writeJSON(w, http.StatusOK, resp)
}

// answerWriter keeps what OnAnswer is told of a delivery.
type answerWriter struct {
	http.ResponseWriter
	source  string
	outcome Outcome
	status  int
}

func (a *answerWriter) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
	a.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// checkEnvelope returns an error wrapping payhook.ErrMalformed when the
// envelope of a verified delivery cannot be stored as it is, whichever
// Verifier read it: no event id; an event id, type or environment that
// payhook.CheckRef refuses (over MaxFieldBytes, not UTF-8, control or
// format characters, U+FFFD); an occurred-at time outside
// payhook.MinTime..MaxTime, which PostgreSQL may not hold and SQLite
// would store only to fail every later read of it.
func checkEnvelope(env payhook.Envelope) error {
	if env.EventID == "" {
		return fmt.Errorf("verified delivery has no event id: %w", payhook.ErrMalformed)
	}
	for _, f := range []struct{ name, value string }{
		{"event id", env.EventID}, {"event type", env.Type}, {"environment", env.Environment},
	} {
		if err := payhook.CheckRef(f.name, f.value); err != nil {
			return err
		}
	}
	return payhook.CheckTime("occurred_at", env.OccurredAt)
}

// checkEncoding returns an error when the body comes with a
// Content-Encoding other than identity (gzip, deflate...): providers sign
// the body they send uncompressed, and payhook verifies the raw bytes as
// they arrive, so it does not undo a compression.
func checkEncoding(h http.Header) error {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return fmt.Errorf("Content-Encoding %.40q is not supported: the signature is verified over the body as sent, so send it uncompressed", c)
			}
		}
	}
	return nil
}

// errBusy refuses a delivery whose body does not fit in the in-flight
// budget.
var errBusy = fmt.Errorf("%w: too many deliveries in flight", payhook.ErrUnavailable)

// firstChunk and readChunk bound how much of a body is taken from the
// budget at a time, as it arrives: the first take is small and each next
// one doubles, up to readChunk, so that a client that claims a large
// Content-Length and sends nothing holds firstChunk, not its claim.
const (
	firstChunk = 4 << 10
	readChunk  = 32 << 10
)

// readBody reads the whole body, bounded while it is read, into memory
// taken from the in-flight budget as the bytes arrive. It returns how
// many bytes it took, to be given back once the delivery is answered,
// also on error.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request) (body []byte, held int64, err error) {
	limit := r.cfg.MaxBodyBytes
	if req.ContentLength > limit {
		return nil, 0, fmt.Errorf("body of %d bytes is over the %d-byte limit: %w", req.ContentLength, limit, payhook.ErrTooLarge)
	}
	src, end := io.Reader(req.Body), req.ContentLength // the server holds the body to its Content-Length
	if end < 0 {
		if a, ok := w.(*answerWriter); ok {
			// MaxBytesReader closes the connection past the limit only
			// when it is handed net/http's own writer.
			w = a.ResponseWriter
		}
		// One byte past the limit is read to tell that it is past.
		src, end = http.MaxBytesReader(w, req.Body, limit), limit+1
	}
	chunk := int64(firstChunk)
	for {
		if int64(len(body)) == held {
			if held == end && req.ContentLength >= 0 {
				return body, held, nil
			}
			take := max(1, min(chunk, end-held))
			if !r.budget.take(take) {
				return nil, held, fmt.Errorf("body of more than %d bytes: %w", held, errBusy)
			}
			held += take
			chunk = min(2*chunk, readChunk)
			body = slices.Grow(body, int(take))
		}
		n, err := src.Read(body[len(body):held])
		body = body[:len(body)+n]
		var tooLarge *http.MaxBytesError
		switch {
		case err == io.EOF && req.ContentLength >= 0 && int64(len(body)) < req.ContentLength:
			return nil, held, fmt.Errorf("read body: %d of %d bytes: %w", len(body), req.ContentLength, payhook.ErrMalformed)
		case err == io.EOF:
			return body, held, nil
		case errors.As(err, &tooLarge):
			return nil, held, fmt.Errorf("body is over the %d-byte limit: %w", limit, payhook.ErrTooLarge)
		case err != nil:
			return nil, held, fmt.Errorf("read body: %v: %w", err, payhook.ErrMalformed)
		}
	}
}

// budget counts the bytes that bodies in flight may still take.
type budget struct {
	mu   sync.Mutex
	left int64
}

// take takes n bytes if they are left.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// give gives back n bytes.
func (b *budget) give(n int64) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// signature tells OnSignature of the signature check of a delivery to
// source that ended with err: refused if it wraps payhook.ErrSignature
// (and OnAnswer, through w, SignatureRefused), matched if nil; nothing
// for other errors (a body that could not be judged).
func (r *Receiver) signature(w http.ResponseWriter, source string, err error, at time.Time) {
	refused := err != nil && errors.Is(err, payhook.ErrSignature)
	if a, ok := w.(*answerWriter); ok && refused {
		a.outcome = SignatureRefused
	}
	switch {
	case r.cfg.OnSignature == nil:
	case err == nil:
		r.cfg.OnSignature(source, true, at)
	case refused:
		r.cfg.OnSignature(source, false, at)
	}
}

func (r *Receiver) reject(w http.ResponseWriter, source string, status int, msg string) {
	r.cfg.Logger.Info("webhook rejected", "source", source, "status", status, "reason", msg)
	writeJSON(w, status, response{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
