package outbox

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// The types of the facts billing emits (see the package doc for each one's
// data).
const (
	OrderPaid            = "order.paid"
	PaymentSucceeded     = "payment.succeeded"
	PaymentRefunded      = "payment.refunded"
	PaymentRefundFailed  = "payment.refund_failed"
	PaymentChargedBack   = "payment.charged_back"
	PaymentChargebackWon = "payment.chargeback_won"
	CryptoSettled        = "crypto.settled"
	SubscriptionCreated  = "subscription.created"
	SubscriptionUpdated  = "subscription.updated"
	SubscriptionEnded    = "subscription.ended"
	AlertRaised          = "alert.raised"
)

// Types lists every fact type billing emits.
var Types = []string{OrderPaid, PaymentSucceeded, PaymentRefunded, PaymentRefundFailed, PaymentChargedBack,
	PaymentChargebackWon, CryptoSettled, SubscriptionCreated, SubscriptionUpdated, SubscriptionEnded, AlertRaised}

// Fact is one thing that happened to payhook's billing state, told once to
// the application: its JSON is the body every sink sends.
type Fact struct {
	// ID is derived from the business fact (its type, source and key),
	// never from the delivery that told it: the same refund reported by
	// two events, a replay or a backfill has one ID. It is the
	// webhook-id of an HTTP sink, by which the application deduplicates.
	ID string `json:"id"`
	// Type is one of Types (or an application's own).
	Type string `json:"type"`
	// Timestamp is when the fact happened, by the provider's clock when it
	// says, else when payhook applied it.
	Timestamp time.Time `json:"timestamp"`
	// Source is the configured source whose event told it.
	Source string `json:"source"`
	// Subject is the id of what the fact is about: the order id, the
	// payment, refund or dispute reference, the invoice, the subscription,
	// the alert's subject.
	Subject string `json:"subject"`
	// Data is the type's own fields (see the package doc).
	Data json.RawMessage `json:"data"`
}

// NewFact returns the fact of type typ about subject, of source, whose
// business identity is key (what makes it one fact: the refund's
// reference for payment.refunded, the snapshot for subscription.updated),
// with data marshalled as its Data. It returns an error when data does not
// marshal to a JSON object.
func NewFact(typ, source, subject, key string, at time.Time, data any) (Fact, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Fact{}, fmt.Errorf("fact %s %s: data: %w", typ, subject, err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return Fact{}, fmt.Errorf("fact %s %s: data is %s, not a JSON object", typ, subject, raw)
	}
	return Fact{ID: ID(typ, source, key), Type: typ, Timestamp: at.UTC(), Source: source, Subject: subject, Data: raw}, nil
}

// ID returns the stable id of the fact of type typ, of source, whose
// business identity is key: "fct_" and 32 hex digits of a SHA-256 of the
// three, safe in any header.
func ID(typ, source, key string) string {
	h := sha256.New()
	for _, s := range []string{typ, source, key} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "fct_" + hex.EncodeToString(h.Sum(nil))[:32]
}

// Emitted is what Emit wrote.
type Emitted struct {
	// Written reports whether the fact is new (its id was not there yet).
	Written bool
	// Deliveries are the ids of its pending deliveries, for the caller to
	// enqueue in the transaction (jobs.EnqueueDeliveries).
	Deliveries []int64
	// Untold, when set, is a fact routed to Unrecorded sinks only, which
	// got no delivery row: the caller tells it once the transaction has
	// committed (Outbox.Tell).
	Untold *Untold
}

// Emit writes f to the outbox in tx, the transaction of the billing change
// that made it, unless a fact with its ID is there already: the unique
// index on the id decides. With o non-nil the fact is routed at once: one
// pending delivery per sink of o whose patterns match its type, whose ids
// it returns for the caller to enqueue in tx (jobs.EnqueueDeliveries);
// when each of those sinks is Unrecorded, no delivery row but an Untold,
// for the caller to tell after the commit (Outbox.Tell). With o nil it is
// left for the sweep to route (Outbox.Sweep). db is tx's database.
func Emit(ctx context.Context, db *store.DB, tx *sql.Tx, o *Outbox, f Fact, now time.Time) (Emitted, error) {
	if f.ID == "" || f.Type == "" {
		return Emitted{}, errors.New("emit fact: no id or type (make it with outbox.NewFact)")
	}
	body, err := json.Marshal(f)
	if err != nil {
		return Emitted{}, fmt.Errorf("emit fact %s: %w", f.ID, err)
	}
	if dstBug("outbox-outside-tx") {
		return emitOutside(ctx, db, f, string(body), now)
	}
	var sinks []string
	if o != nil {
		sinks = o.sinksFor(f.Type)
	}
	switch {
	case len(sinks) > 0 && o.allUnrecorded(sinks):
		return emitUntold(ctx, db, tx, f, string(body), now)
	case len(sinks) > 0 && db.Engine == store.Postgres:
		return emitRouted(ctx, db, tx, f, string(body), sinks, now)
	}
	id, err := insertFact(ctx, tx, db, f, string(body), o != nil, now)
	if err != nil || id == 0 || o == nil {
		return Emitted{Written: id != 0}, err
	}
	ids, err := o.route(ctx, tx, id, f.Type, now)
	if err != nil {
		return Emitted{}, err
	}
	return Emitted{Written: true, Deliveries: ids}, nil
}

// EmitMany is Emit of each of facts, in their order, with what each wrote.
// The facts routed to sinks are written together, before the others:
// those for Unrecorded sinks only with the one row that holds them all
// untold, the others with their deliveries, so that a batch of events
// pays two statements for each kind of its facts, not one or two per
// fact.
func EmitMany(ctx context.Context, db *store.DB, tx *sql.Tx, o *Outbox, facts []Fact, now time.Time) ([]Emitted, error) {
	out := make([]Emitted, len(facts))
	untold, routed := make([]bool, len(facts)), make([]bool, len(facts))
	var nu, nr int
	if o != nil && !dstBug("outbox-outside-tx") {
		for i, f := range facts {
			switch sinks := o.sinksFor(f.Type); {
			case len(sinks) == 0:
			case o.allUnrecorded(sinks):
				untold[i], nu = true, nu+1
			default:
				routed[i], nr = true, nr+1
			}
		}
	}
	// One fact of a kind goes as Emit writes it.
	if nu > 1 {
		if err := emitUntoldMany(ctx, db, tx, facts, untold, out, now); err != nil {
			return nil, err
		}
	}
	if nr > 1 {
		if err := emitRoutedMany(ctx, db, tx, o, facts, routed, out, now); err != nil {
			return nil, err
		}
	}
	for i, f := range facts {
		if (nu > 1 && untold[i]) || (nr > 1 && routed[i]) {
			continue
		}
		e, err := Emit(ctx, db, tx, o, f, now)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// emitRoutedMany is EmitMany of the facts routed to sinks not all
// Unrecorded (those marked together): the facts, in their order, then a
// pending delivery per fact written and sink, a statement each for them
// all, as route writes them; it sets what each wrote in out. Of two facts
// with one id, the first is written.
func emitRoutedMany(ctx context.Context, db *store.DB, tx *sql.Tx, o *Outbox, facts []Fact, together []bool, out []Emitted, now time.Time) error {
	written, _, err := insertFacts(ctx, db, tx, facts, together, now)
	if err != nil {
		return err
	}
	var rows [][]any
	for i, id := range written {
		if id != 0 {
			for _, sink := range o.sinksFor(facts[i].Type) {
				rows = append(rows, []any{id, sink})
			}
		}
	}
	deliveries := make(map[int64][]int64, len(rows))
	err = store.QueryRows(ctx, tx, rows, `INSERT INTO payhook_deliveries (fact, sink, status, created_at, updated_at, enqueued_at)
		SELECT CAST(j.value->>0 AS BIGINT), j.value->>1, 'pending', $2, $2, $2
		FROM `+db.JSONRows()+`
		WHERE TRUE
		ORDER BY j.n
		ON CONFLICT (fact, sink) DO NOTHING
		RETURNING id, fact`, []any{db.TimeValue(now)}, func(r *sql.Rows) error {
		var id, fact int64
		err := r.Scan(&id, &fact)
		deliveries[fact] = append(deliveries[fact], id)
		return err
	})
	if err != nil {
		return fmt.Errorf("emit facts: %d deliveries: %w", len(rows), err)
	}
	for i, id := range written {
		if id != 0 {
			ids := deliveries[id]
			slices.Sort(ids)
			out[i] = Emitted{Written: true, Deliveries: ids}
		}
	}
	return nil
}

// insertFacts inserts, in one statement, the facts marked together, in
// their order and routed, and returns, by place in facts, the row id of
// each written (0 for the others; of two facts with one id, the first is
// written) and its body.
func insertFacts(ctx context.Context, db *store.DB, tx *sql.Tx, facts []Fact, together []bool, now time.Time) ([]int64, []string, error) {
	var rows [][]any
	bodies := make([]string, len(facts))
	for i, f := range facts {
		if !together[i] {
			continue
		}
		if f.ID == "" || f.Type == "" {
			return nil, nil, errors.New("emit fact: no id or type (make it with outbox.NewFact)")
		}
		body, err := json.Marshal(f)
		if err != nil {
			return nil, nil, fmt.Errorf("emit fact %s: %w", f.ID, err)
		}
		bodies[i] = string(body)
		rows = append(rows, []any{f.ID, f.Type, f.Source, payhook.Storable(f.Subject), bodies[i]})
	}
	byID := make(map[string]int64, len(rows))
	err := store.QueryRows(ctx, tx, rows, `INSERT INTO payhook_facts (fact_id, type, source, subject, body, routed, created_at)
		SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, j.value->>4, TRUE, $2
		FROM `+db.JSONRows()+`
		WHERE TRUE
		ORDER BY j.n
		ON CONFLICT (fact_id) DO NOTHING
		RETURNING id, fact_id`, []any{db.TimeValue(now)}, func(r *sql.Rows) error {
		var id int64
		var factID string
		err := r.Scan(&id, &factID)
		byID[factID] = id
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("emit %d facts: %w", len(rows), err)
	}
	written := make([]int64, len(facts))
	for i, f := range facts {
		if id, ok := byID[f.ID]; together[i] && ok {
			written[i] = id
			delete(byID, f.ID) // a second fact of this id was not written
		}
	}
	return written, bodies, nil
}

// insertFact inserts f with its body and routed flag, and returns its row
// id; 0 if a fact with its id is there already.
func insertFact(ctx context.Context, tx *sql.Tx, db *store.DB, f Fact, body string, routed bool, now time.Time) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO payhook_facts (fact_id, type, source, subject, body, routed, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (fact_id) DO NOTHING
		RETURNING id`, f.ID, f.Type, f.Source, payhook.Storable(f.Subject), body, routed, db.TimeValue(now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("emit fact %s (%s %s): %w", f.ID, f.Type, f.Subject, err)
	}
	return id, nil
}

// emitRouted is Emit of a fact routed to sinks, on PostgreSQL: the fact
// and its deliveries in one statement, a round trip less per fact. A new
// fact has a delivery per sink, so it was written exactly when deliveries
// come back.
func emitRouted(ctx context.Context, db *store.DB, tx *sql.Tx, f Fact, body string, sinks []string, now time.Time) (Emitted, error) {
	rows, err := tx.QueryContext(ctx, `WITH f AS (INSERT INTO payhook_facts (fact_id, type, source, subject, body, routed, created_at)
			VALUES ($1, $2, $3, $4, $5, TRUE, $6)
			ON CONFLICT (fact_id) DO NOTHING
			RETURNING id)
		INSERT INTO payhook_deliveries (fact, sink, status, created_at, updated_at, enqueued_at)
		SELECT f.id, s.sink, 'pending', $6, $6, $6 FROM f CROSS JOIN unnest($7::text[]) WITH ORDINALITY AS s(sink, n)
		ORDER BY s.n
		ON CONFLICT (fact, sink) DO NOTHING
		RETURNING id`, f.ID, f.Type, f.Source, payhook.Storable(f.Subject), body, db.TimeValue(now), sinks)
	if err != nil {
		return Emitted{}, fmt.Errorf("emit fact %s (%s %s): %w", f.ID, f.Type, f.Subject, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return Emitted{}, fmt.Errorf("emit fact %s (%s %s): %w", f.ID, f.Type, f.Subject, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return Emitted{}, fmt.Errorf("emit fact %s (%s %s): %w", f.ID, f.Type, f.Subject, err)
	}
	slices.Sort(ids)
	return Emitted{Written: len(ids) > 0, Deliveries: ids}, nil
}

// Filter selects facts for List and ListTx. Zero fields match everything.
type Filter struct {
	Type    string
	Source  string
	Subject string
	// After returns only facts written after the fact of this row id
	// (Row of an earlier result): a cursor.
	After int64
	// Limit caps the result; 0 means 100.
	Limit int
}

// Stored is a fact as the outbox holds it.
type Stored struct {
	Fact
	// Row is the fact's row id, increasing in the order facts were written.
	Row int64 `json:"row"`
	// CreatedAt is when payhook wrote it.
	CreatedAt time.Time `json:"created_at"`
}

// ListTx returns the facts matching f in the order they were written,
// read inside tx: an application's handler sees the facts its transaction
// wrote before they commit.
func ListTx(ctx context.Context, tx *sql.Tx, f Filter) ([]Stored, error) {
	return list(ctx, tx, f)
}

// List is ListTx on db's pool.
func List(ctx context.Context, db *store.DB, f Filter) ([]Stored, error) {
	return list(ctx, db.SQL, f)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func list(ctx context.Context, q querier, f Filter) ([]Stored, error) {
	where, args := "id > $1", []any{f.After}
	add := func(col, v string) {
		if v != "" {
			args = append(args, v)
			where += fmt.Sprintf(" AND %s = $%d", col, len(args))
		}
	}
	add("type", f.Type)
	add("source", f.Source)
	add("subject", f.Subject)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.QueryContext(ctx, `SELECT id, body, created_at FROM payhook_facts WHERE `+where+
		fmt.Sprintf(` ORDER BY id LIMIT %d`, limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list facts: %w", err)
	}
	defer rows.Close()
	out := []Stored{}
	for rows.Next() {
		var s Stored
		var body string
		if err := rows.Scan(&s.Row, &body, store.ScanTime(&s.CreatedAt)); err != nil {
			return nil, fmt.Errorf("list facts: %w", err)
		}
		if err := json.Unmarshal([]byte(body), &s.Fact); err != nil {
			return nil, fmt.Errorf("list facts: fact %d: %w", s.Row, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list facts: %w", err)
	}
	return out, nil
}
