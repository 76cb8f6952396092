package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// Config configures an Outbox. Zero fields take the documented defaults.
type Config struct {
	// DB holds the outbox. Required.
	DB *store.DB
	// Logger receives the deliveries' logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// AttemptTimeout bounds one attempt of a sink (an HTTP sink has its own
	// 10-second limit inside it). Default 30 seconds.
	AttemptTimeout time.Duration
	// OnPause, if set, is called inside the transaction that pauses a sink
	// (an HTTP sink answered 410 Gone); what it writes (payhook serve
	// raises an alert) commits with the pause.
	OnPause func(ctx context.Context, tx *sql.Tx, sink, reason string) error
}

// Outbox routes facts to sinks and runs their deliveries: each delivery
// of a fact to a sink is a job of its own (package jobs runs them),
// retried with backoff on its own, whose failure never touches the event
// that made the fact. A Go application registers its own after-commit
// effects with Add, the same way as payhook's sinks.
type Outbox struct {
	cfg    Config
	mu     sync.RWMutex
	routes map[string]*route
}

// route is one registered sink.
type route struct {
	name     string
	patterns []string
	sink     Sink
	counts   counters
}

type counters struct {
	delivered, failed, errors atomic.Int64
}

// New returns an Outbox with no sinks. It returns an error wrapping
// payhook.ErrConfig when cfg.DB is nil.
func New(cfg Config) (*Outbox, error) {
	if cfg.DB == nil {
		return nil, fmt.Errorf("outbox: no database: %w", payhook.ErrConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 30 * time.Second
	}
	return &Outbox{cfg: cfg, routes: map[string]*route{}}, nil
}

// Add registers sink under name for the facts whose type matches one of
// patterns (path.Match syntax: "order.paid", "subscription.*", "*"; none
// means "*"). Facts written from then on get one delivery to it. It
// returns an error wrapping payhook.ErrConfig for an empty or taken name,
// a nil sink or a bad pattern.
func (o *Outbox) Add(name string, patterns []string, sink Sink) error {
	if err := payhook.CheckRef("sink name", name); err != nil || name == "" {
		return fmt.Errorf("outbox: sink name %q: empty or not a plain name: %w", name, payhook.ErrConfig)
	}
	if sink == nil {
		return fmt.Errorf("outbox: sink %s: no sink: %w", name, payhook.ErrConfig)
	}
	if len(patterns) == 0 {
		patterns = []string{"*"}
	}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return fmt.Errorf("outbox: sink %s: fact pattern %q: %w", name, p, payhook.ErrConfig)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.routes[name] != nil {
		return fmt.Errorf("outbox: sink %s registered twice: %w", name, payhook.ErrConfig)
	}
	o.routes[name] = &route{name: name, patterns: append([]string(nil), patterns...), sink: sink}
	return nil
}

// AddFunc registers f as an after-commit effect: run once the transaction
// that wrote a matching fact commits, retried on its own until it returns
// nil (see Add).
func (o *Outbox) AddFunc(name string, patterns []string, f func(ctx context.Context, fact Fact) error) error {
	if f == nil {
		return o.Add(name, patterns, nil)
	}
	return o.Add(name, patterns, Func(f))
}

// Sinks returns the names of the registered sinks, sorted.
func (o *Outbox) Sinks() []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.sinkNamesLocked()
}

func (r *route) matches(typ string) bool {
	for _, p := range r.patterns {
		if ok, _ := path.Match(p, typ); ok {
			return true
		}
	}
	return false
}

// route writes the deliveries of the fact with row id fact to the sinks
// matching typ, and returns their ids.
func (o *Outbox) route(ctx context.Context, tx *sql.Tx, fact int64, typ string, now time.Time) ([]int64, error) {
	names := o.sinksFor(typ)
	var ids []int64
	at := o.cfg.DB.TimeValue(now)
	for _, name := range names {
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO payhook_deliveries (fact, sink, status, created_at, updated_at, enqueued_at)
			VALUES ($1, $2, 'pending', $3, $3, $3)
			ON CONFLICT (fact, sink) DO NOTHING
			RETURNING id`, fact, name, at).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("route fact %d to sink %s: %w", fact, name, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sinksFor returns the names of the sinks that take facts of type typ,
// sorted.
func (o *Outbox) sinksFor(typ string) []string {
	o.mu.RLock()
	var names []string
	for _, r := range o.routes {
		if r.matches(typ) {
			names = append(names, r.name)
		}
	}
	o.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Sweep is the outbox's part of the job queue's sweep, inside tx: it
// routes up to limit facts written without routing (by a transaction
// that had no Outbox) and about as many left untold since before (see
// Tell; a row of a batch's facts whole, past limit if it holds more),
// and returns their deliveries and up to limit pending deliveries last enqueued before before
// (or never), marked enqueued now, for the caller to enqueue in tx. A
// delivery whose job is still live is skipped by the job's uniqueness, so
// sweeping one twice is harmless.
func (o *Outbox) Sweep(ctx context.Context, tx *sql.Tx, now, before time.Time, limit int) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT id, type FROM payhook_facts WHERE NOT routed ORDER BY id LIMIT %d`, limit))
	if err != nil {
		return nil, fmt.Errorf("outbox sweep: unrouted facts: %w", err)
	}
	facts, err := scanFactTypes(rows)
	if err != nil {
		return nil, fmt.Errorf("outbox sweep: unrouted facts: %w", err)
	}
	ids, err := o.sweepUntold(ctx, tx, now, before, limit)
	if err != nil {
		return nil, err
	}
	for _, f := range facts {
		// The conditional UPDATE decides who routes it.
		res, err := tx.ExecContext(ctx, `UPDATE payhook_facts SET routed = TRUE WHERE id = $1 AND NOT routed`, f.id)
		if err != nil {
			return nil, fmt.Errorf("outbox sweep: route fact %d: %w", f.id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			continue
		}
		routed, err := o.route(ctx, tx, f.id, f.typ, now)
		if err != nil {
			return nil, err
		}
		ids = append(ids, routed...)
	}
	at := o.cfg.DB.TimeValue(now)
	rows, err = tx.QueryContext(ctx, fmt.Sprintf(`WITH picked AS MATERIALIZED (SELECT id FROM payhook_deliveries
			WHERE status = 'pending' AND (enqueued_at IS NULL OR enqueued_at < $2)
			ORDER BY enqueued_at NULLS FIRST, id LIMIT %d%s)
		UPDATE payhook_deliveries SET enqueued_at = $1
		WHERE id IN (SELECT id FROM picked)
		RETURNING id`, limit, o.cfg.DB.SkipLocked()), at, o.cfg.DB.TimeValue(before))
	if err != nil {
		return nil, fmt.Errorf("outbox sweep: pending deliveries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("outbox sweep: pending deliveries: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox sweep: pending deliveries: %w", err)
	}
	return ids, nil
}

// PostponeSweepTx marks the delivery with row id id, if still pending,
// enqueued at at, so that Sweep leaves it until SweepAge after at: the
// time its job's retry is due (jobs.Config.DeliveryPostpone).
func (o *Outbox) PostponeSweepTx(ctx context.Context, tx *sql.Tx, id int64, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE payhook_deliveries SET enqueued_at = $2
		WHERE id = $1 AND status = 'pending'`, id, o.cfg.DB.TimeValue(at)); err != nil {
		return fmt.Errorf("postpone the sweep of delivery %d: %w", id, err)
	}
	return nil
}

// delivery is a delivery row with its fact, as an attempt reads it.
type delivery struct {
	id     int64
	sink   string
	status string
	fact   Fact
}

// Deliver runs one attempt of the delivery with row id id: it sends the
// fact to its sink and records the attempt in the delivery log. A
// delivery no longer pending (delivered, failed, paused) is left alone, so
// running its job again changes nothing. It returns the sink's error, for
// the job to be retried with backoff; final marks the last attempt, whose
// failure leaves the delivery failed. A sink that answers gone (ErrGone:
// HTTP 410) is paused: this delivery and its others wait, paused, and
// OnPause is called. A delivery of a sink not registered here is retried
// as a failure (another instance may have it), failed at the last attempt.
func (o *Outbox) Deliver(ctx context.Context, id int64, final bool) error {
	d, err := o.load(ctx, id)
	if err != nil || d == nil || d.status != "pending" {
		return err
	}
	o.mu.RLock()
	r := o.routes[d.sink]
	o.mu.RUnlock()
	if r == nil {
		// Another instance may have it (a sink being added across a
		// rolling deploy): retried like a failure, failed at the last.
		err := fmt.Errorf("sink %s is not configured on this instance", d.sink)
		status := "pending"
		if final {
			status = "failed"
		}
		return errors.Join(err, o.record(ctx, d, status, Receipt{}, err, 0))
	}
	if paused, err := o.paused(ctx, r); err != nil {
		return err
	} else if paused {
		return o.record(ctx, d, "paused", Receipt{}, errors.New("sink paused"), 0)
	}
	actx, cancel := context.WithTimeout(ctx, o.cfg.AttemptTimeout)
	start := time.Now()
	rec, serr := send(actx, r.sink, d.fact)
	latency := time.Since(start)
	cancel()
	switch {
	case serr == nil:
		if err := o.record(ctx, d, StatusDelivered, rec, nil, latency); err != nil {
			return err
		}
		r.counts.delivered.Add(1)
		return nil
	case errors.Is(serr, ErrGone):
		r.counts.errors.Add(1)
		return o.pause(ctx, d, r, rec, serr, latency)
	}
	r.counts.errors.Add(1)
	status := "pending"
	if final {
		status = "failed"
		r.counts.failed.Add(1)
	}
	o.cfg.Logger.Warn("fact delivery failed", "sink", d.sink, "fact", d.fact.ID, "type", d.fact.Type,
		"delivery", d.id, "final", final, "err", serr)
	if err := o.record(ctx, d, status, rec, serr, latency); err != nil {
		return errors.Join(serr, err)
	}
	return serr
}

// send calls the sink; a panic is a failed attempt.
func send(ctx context.Context, s Sink, f Fact) (rec Receipt, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sink panicked: %v", r)
		}
	}()
	return s.Send(ctx, f)
}

func (o *Outbox) load(ctx context.Context, id int64) (*delivery, error) {
	d := &delivery{id: id}
	var body string
	err := o.cfg.DB.SQL.QueryRowContext(ctx, `SELECT d.sink, d.status, f.body
		FROM payhook_deliveries d JOIN payhook_facts f ON f.id = d.fact WHERE d.id = $1`, id).
		Scan(&d.sink, &d.status, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load delivery %d: %w", id, err)
	}
	if err := json.Unmarshal([]byte(body), &d.fact); err != nil {
		return nil, fmt.Errorf("load delivery %d: its fact: %w", id, err)
	}
	return d, nil
}

// target is what a sink is paused for: its URL, when it has one.
func target(s Sink) string {
	if t, ok := s.(interface{ Target() string }); ok {
		return t.Target()
	}
	return ""
}

func (o *Outbox) paused(ctx context.Context, r *route) (bool, error) {
	var n int
	err := o.cfg.DB.SQL.QueryRowContext(ctx, `SELECT count(*) FROM payhook_sinks_paused WHERE sink = $1 AND url = $2`,
		r.name, target(r.sink)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("sink %s paused: %w", r.name, err)
	}
	return n > 0, nil
}

// record writes the attempt to the delivery log and the delivery's new
// status, if it is still pending, in one transaction.
func (o *Outbox) record(ctx context.Context, d *delivery, status string, rec Receipt, cause error, latency time.Duration) error {
	ctx = context.WithoutCancel(ctx)
	tx, err := o.cfg.DB.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record delivery %d: %w", d.id, err)
	}
	defer tx.Rollback()
	if err := o.recordTx(ctx, tx, d, status, rec, cause, latency); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record delivery %d: commit: %w", d.id, err)
	}
	return nil
}

// recordTx is record in tx. A delivery of an Unrecorded sink delivered
// at its first attempt is deleted instead (forget).
func (o *Outbox) recordTx(ctx context.Context, tx *sql.Tx, d *delivery, status string, rec Receipt, cause error, latency time.Duration) error {
	if status == StatusDelivered {
		o.mu.RLock()
		r := o.routes[d.sink]
		o.mu.RUnlock()
		if r != nil && unrecorded(r.sink) {
			if gone, err := o.forget(ctx, tx, []int64{d.id}); err != nil || gone[d.id] {
				return err
			}
		}
	}
	now := o.cfg.DB.TimeValue(o.cfg.Now())
	msg := ""
	if cause != nil {
		msg = payhook.Storable(cause.Error())
	}
	var delivered any
	if status == "delivered" {
		delivered = now
	}
	var attempt int
	// A delivery is paused only while its sink is: one resumed since the
	// attempt saw it paused stays pending (the sweep gives it a job), or it
	// would wait for a resume that has come and gone. The pause's row is
	// locked (under SQLite's one writer, read): a resume (ResendTx)
	// deleting it is waited for and then seen, or waits for this record
	// and resumes the delivery with the others. Read without a lock, a
	// resume not committed yet still showed the row on PostgreSQL.
	if status == "paused" {
		lock := ""
		if o.cfg.DB.Engine == store.Postgres {
			lock = " FOR SHARE"
		}
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM payhook_sinks_paused WHERE sink = $1`+lock, d.sink).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // resumed: the delivery stays pending
		}
		if err != nil {
			return fmt.Errorf("record delivery %d: the pause of sink %s: %w", d.id, d.sink, err)
		}
	}
	err := tx.QueryRowContext(ctx, `UPDATE payhook_deliveries
		SET status = $2, attempts = attempts + 1, last_error = $3, updated_at = $4, delivered_at = $5
		WHERE id = $1 AND status = 'pending'
		RETURNING attempts`, d.id, status, msg, now, delivered).Scan(&attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // resent, or finished by another attempt meanwhile
	}
	if err != nil {
		return fmt.Errorf("record delivery %d: %w", d.id, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO payhook_delivery_attempts
		(delivery, attempt, at, status_code, response, error, latency_us) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		d.id, attempt, now, rec.Status, excerpt(rec.Response), msg, latency.Microseconds()); err != nil {
		return fmt.Errorf("record attempt %d of delivery %d: %w", attempt, d.id, err)
	}
	return nil
}

// pause pauses r's sink for its target, records the attempt, and calls
// OnPause, all in one transaction. The pause is no error for the job: the
// delivery waits, paused, for a resend.
func (o *Outbox) pause(ctx context.Context, d *delivery, r *route, rec Receipt, cause error, latency time.Duration) error {
	ctx = context.WithoutCancel(ctx)
	tx, err := o.cfg.DB.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pause sink %s: %w", r.name, err)
	}
	defer tx.Rollback()
	reason, err := o.pauseTx(ctx, tx, d, r, rec, cause, latency)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("pause sink %s: commit: %w", r.name, err)
	}
	o.cfg.Logger.Error("sink paused", "sink", r.name, "reason", reason)
	return nil
}

// pauseTx is pause in tx; it returns the pause's reason.
func (o *Outbox) pauseTx(ctx context.Context, tx *sql.Tx, d *delivery, r *route, rec Receipt, cause error, latency time.Duration) (string, error) {
	// The sink first: a delivery is recorded paused only while its sink
	// is (recordTx).
	reason := payhook.Storable(fmt.Sprintf("sink %s paused: %v (fact %s)", r.name, cause, d.fact.ID))
	res, err := tx.ExecContext(ctx, `INSERT INTO payhook_sinks_paused (sink, url, reason, paused_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (sink) DO UPDATE SET url = excluded.url, reason = excluded.reason, paused_at = excluded.paused_at
		WHERE payhook_sinks_paused.url <> excluded.url`, r.name, target(r.sink), reason, o.cfg.DB.TimeValue(o.cfg.Now()))
	if err != nil {
		return "", fmt.Errorf("pause sink %s: %w", r.name, err)
	}
	if err := o.recordTx(ctx, tx, d, "paused", rec, cause, latency); err != nil {
		return "", err
	}
	if n, _ := res.RowsAffected(); n == 1 && o.cfg.OnPause != nil {
		if err := o.cfg.OnPause(ctx, tx, r.name, reason); err != nil {
			return "", fmt.Errorf("pause sink %s: %w", r.name, err)
		}
	}
	return reason, nil
}

// maxExcerpt bounds the response kept per attempt.
const maxExcerpt = 512

func excerpt(s string) string {
	if len(s) > maxExcerpt {
		s = s[:maxExcerpt]
	}
	return payhook.Storable(s)
}

// SinkStats is what one sink did: metrics-ready counters.
type SinkStats struct {
	Sink string `json:"sink"`
	// Backlog counts its deliveries pending now (in the database, every
	// instance's), and, for an Unrecorded sink, the facts of its types
	// not told yet (Untold).
	Backlog int64 `json:"backlog"`
	// Paused counts its deliveries waiting for the sink to resume.
	Paused int64 `json:"paused"`
	// Delivered and Failed count the deliveries this process delivered
	// and gave up (after the last attempt) since it started; Errors its
	// failed attempts.
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Errors    int64 `json:"errors"`
}

// Stats returns the counters of every registered sink, sorted by name.
func (o *Outbox) Stats(ctx context.Context) ([]SinkStats, error) {
	rows, err := o.cfg.DB.SQL.QueryContext(ctx, `SELECT sink, status, count(*) FROM payhook_deliveries
		WHERE status IN ('pending', 'paused') GROUP BY sink, status`)
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	defer rows.Close()
	backlog, paused := map[string]int64{}, map[string]int64{}
	for rows.Next() {
		var sink, status string
		var n int64
		if err := rows.Scan(&sink, &status, &n); err != nil {
			return nil, fmt.Errorf("outbox stats: %w", err)
		}
		if status == "pending" {
			backlog[sink] = n
		} else {
			paused[sink] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	untold, err := o.untoldByType(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	var out []SinkStats
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, name := range o.sinkNamesLocked() {
		r := o.routes[name]
		if unrecorded(r.sink) {
			for typ, n := range untold {
				if r.matches(typ) {
					backlog[name] += n
				}
			}
		}
		out = append(out, SinkStats{Sink: name, Backlog: backlog[name], Paused: paused[name],
			Delivered: r.counts.delivered.Load(), Failed: r.counts.failed.Load(), Errors: r.counts.errors.Load()})
	}
	return out, nil
}

func (o *Outbox) sinkNamesLocked() []string {
	names := make([]string, 0, len(o.routes))
	for n := range o.routes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AlertSinkPaused is the alert kind payhook serve raises when a sink is
// paused (Config.OnPause); its subject is the sink.
const AlertSinkPaused = "sink_paused"

// Delivery statuses.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
	StatusPaused    = "paused"
)

// DeliveryStatuses lists the statuses a delivery can have.
var DeliveryStatuses = []string{StatusPending, StatusDelivered, StatusFailed, StatusPaused}

// DeliveryView is one delivery of a fact to a sink, with its log.
type DeliveryView struct {
	ID          int64     `json:"id"`
	Sink        string    `json:"sink"`
	FactID      string    `json:"fact_id"`
	Type        string    `json:"type"`
	Subject     string    `json:"subject"`
	Status      string    `json:"status"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	// Log is its attempts, oldest first.
	Log []AttemptView `json:"log"`
}

// AttemptView is one attempt of a delivery: the delivery log's line.
type AttemptView struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	// Status is the HTTP status (or SMTP code) answered; 0 if none.
	Status   int    `json:"status,omitempty"`
	Response string `json:"response,omitempty"`
	Error    string `json:"error,omitempty"`
	// LatencyMS is how long the attempt took, in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
}

// DeliveryFilter selects deliveries for ListDeliveries. Zero fields match
// everything.
type DeliveryFilter struct {
	Sink   string
	Status string
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListDeliveries returns the matching deliveries, newest first, each with
// its log. It returns an error wrapping payhook.ErrInvalid for an unknown
// status.
func ListDeliveries(ctx context.Context, db *store.DB, f DeliveryFilter) ([]DeliveryView, error) {
	where, args := "1 = 1", []any{}
	if f.Sink != "" {
		args = append(args, f.Sink)
		where += fmt.Sprintf(" AND d.sink = $%d", len(args))
	}
	if f.Status != "" {
		if !slices.Contains(DeliveryStatuses, f.Status) {
			return nil, fmt.Errorf("delivery status %q is none of %s: %w", f.Status,
				strings.Join(DeliveryStatuses, ", "), payhook.ErrInvalid)
		}
		args = append(args, f.Status)
		where += fmt.Sprintf(" AND d.status = $%d", len(args))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT d.id, d.sink, f.fact_id, f.type, f.subject, d.status, d.attempts,
		d.last_error, d.created_at, d.updated_at, d.delivered_at
		FROM payhook_deliveries d JOIN payhook_facts f ON f.id = d.fact
		WHERE `+where+fmt.Sprintf(` ORDER BY d.id DESC LIMIT %d`, limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	out := []DeliveryView{}
	for rows.Next() {
		var v DeliveryView
		if err := rows.Scan(&v.ID, &v.Sink, &v.FactID, &v.Type, &v.Subject, &v.Status, &v.Attempts, &v.LastError,
			store.ScanTime(&v.CreatedAt), store.ScanTime(&v.UpdatedAt), store.ScanTime(&v.DeliveredAt)); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list deliveries: %w", err)
		}
		v.Log = []AttemptView{}
		out = append(out, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	for i := range out {
		if out[i].Log, err = attempts(ctx, db, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func attempts(ctx context.Context, db *store.DB, delivery int64) ([]AttemptView, error) {
	rows, err := db.SQL.QueryContext(ctx, `SELECT attempt, at, status_code, response, error, latency_us
		FROM payhook_delivery_attempts WHERE delivery = $1 ORDER BY id`, delivery)
	if err != nil {
		return nil, fmt.Errorf("delivery %d log: %w", delivery, err)
	}
	defer rows.Close()
	out := []AttemptView{}
	for rows.Next() {
		var a AttemptView
		var us int64
		if err := rows.Scan(&a.Attempt, store.ScanTime(&a.At), &a.Status, &a.Response, &a.Error, &us); err != nil {
			return nil, fmt.Errorf("delivery %d log: %w", delivery, err)
		}
		a.LatencyMS = float64(us) / 1000
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("delivery %d log: %w", delivery, err)
	}
	return out, nil
}

// ResendTx makes the delivery with row id id pending again, whatever its
// status, and resumes its sink if it was paused (clearing its
// AlertSinkPaused alert); the caller enqueues its
// job in tx (jobs.Queue.EnqueueDeliveriesTx with resend). It returns an
// error wrapping payhook.ErrNotFound for an unknown id.
func ResendTx(ctx context.Context, db *store.DB, tx *sql.Tx, id int64, now time.Time) error {
	var sink string
	err := tx.QueryRowContext(ctx, `UPDATE payhook_deliveries SET status = 'pending', updated_at = $2, enqueued_at = $2
		WHERE id = $1 RETURNING sink`, id, db.TimeValue(now)).Scan(&sink)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("delivery %d: %w", id, payhook.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("resend delivery %d: %w", id, err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM payhook_sinks_paused WHERE sink = $1`, sink)
	if err != nil {
		return fmt.Errorf("resend delivery %d: resume sink %s: %w", id, sink, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("resend delivery %d: resume sink %s: %w", id, sink, err)
	} else if n > 0 {
		// The sink_paused alert (Config.OnPause) said what no longer
		// holds: cleared, as a pause raises it again.
		if _, err := tx.ExecContext(ctx, `UPDATE payhook_alerts SET acknowledged = TRUE
			WHERE kind = $1 AND subject = $2 AND acknowledged = FALSE`, AlertSinkPaused, sink); err != nil {
			return fmt.Errorf("resend delivery %d: resume sink %s: clear its alert: %w", id, sink, err)
		}
	}
	// The sink's other paused deliveries go back to pending with it.
	if _, err := tx.ExecContext(ctx, `UPDATE payhook_deliveries SET status = 'pending', updated_at = $2, enqueued_at = NULL
		WHERE sink = $1 AND status = 'paused'`, sink, db.TimeValue(now)); err != nil {
		return fmt.Errorf("resend delivery %d: resume sink %s: %w", id, sink, err)
	}
	return nil
}
