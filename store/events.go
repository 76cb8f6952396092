package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/payhook/payhook"
)

const eventColumns = `id, source, event_id, type, environment, occurred_at, received_at,
	payload, secret_id, status, attempts, last_error, processed_at, received_via`

func scanEvent(row interface{ Scan(...any) error }) (*payhook.Event, error) {
	var ev payhook.Event
	var status, via string
	err := row.Scan(&ev.ID, &ev.Source, &ev.EventID, &ev.Type, &ev.Environment,
		nullTime{&ev.OccurredAt}, nullTime{&ev.ReceivedAt}, &ev.Payload, &ev.SecretID,
		&status, &ev.Attempts, &ev.LastError, nullTime{&ev.ProcessedAt}, &via)
	if err != nil {
		return nil, err
	}
	ev.Status, ev.ReceivedVia = payhook.Status(status), payhook.Via(via)
	return &ev, nil
}

// AlertEventBodyConflict is the kind of the alert raised when an event is
// delivered again with a body other than the one stored.
const AlertEventBodyConflict = "event_body_conflict"

// AlertEnvironmentMismatch is the kind of the alert raised when an event
// is stored as ignored at ingest: of another environment than its
// source's, or saying none (payhook.NewEvent). Subject is the source; each
// such event stored counts one more and reopens it. Without it, a source
// given the other environment's secret would drop every event quietly,
// and an ignored event cannot be replayed once the source is fixed.
const AlertEnvironmentMismatch = "environment_mismatch"

// InsertEventsTx inserts each event unless an event with the same
// (Source, EventID) exists, and reports which ones it inserted. The unique
// index decides, so concurrent deliveries of one event insert one row. For
// each inserted event it sets ID. An event not inserted whose payload
// differs from the stored one keeps the first, and raises, in tx and once
// per (Source, EventID), an alert of kind AlertEventBodyConflict (subject
// "source/event_id") naming both bodies' SHA-256 digests, unless it or
// the stored one is listed (ViaBackfill): an API renders an event its own
// way, and a delivery may come after the backfill that listed it. ReceivedAt must be set; Status defaults to
// received, ReceivedVia to webhook. An event stored as ignored keeps
// LastError as the reason, made storable (payhook.Storable), and raises
// AlertEnvironmentMismatch for its source in tx.
//
// All events go into one statement, one round trip however many there
// are, and the stored bodies of those not inserted are read with one
// more; an error then fails them all without naming one (see jobs'
// Ingest, which retries them one by one to find it), and on SQLite may
// leave some of them in tx: roll it back. An event whose key comes twice
// in evs is inserted at its first place.
func (db *DB) InsertEventsTx(ctx context.Context, tx *sql.Tx, evs []*payhook.Event) ([]bool, error) {
	return db.InsertEventsWithTx(ctx, tx, evs, With{})
}

// With is a data-modifying statement that InsertEventsWithTx runs, on
// PostgreSQL, in the same statement as the insert of the events (a WITH
// query), so that what must commit with each stored event (its job) costs
// no round trip of its own. It reads the events the insert stored from
// the table "inserted" (id, status); rows of events not stored are not
// there.
type With struct {
	// SQL returns the statement with its placeholders numbered from first.
	// Nil: nothing runs with the insert.
	SQL func(first int) string
	// Args are the statement's arguments.
	Args []any
}

// InsertEventsWithTx is InsertEventsTx, running with in the same statement
// as the insert on PostgreSQL. SQLite has no data-modifying WITH: there a
// With with SQL is refused, and the caller runs its statement after, on
// the IDs of the events inserted.
func (db *DB) InsertEventsWithTx(ctx context.Context, tx *sql.Tx, evs []*payhook.Event, with With) ([]bool, error) {
	for _, ev := range evs {
		if ev.Status == "" {
			ev.Status = payhook.StatusReceived
		}
		if ev.ReceivedVia == "" {
			ev.ReceivedVia = payhook.ViaWebhook
		}
	}
	var ids map[eventKey]int64
	var err error
	if db.Engine == Postgres {
		ids, err = db.insertEventsPostgres(ctx, tx, evs, with)
	} else {
		if with.SQL != nil {
			return nil, fmt.Errorf("insert events: a statement with the insert needs PostgreSQL")
		}
		ids, err = db.insertEventsSQLite(ctx, tx, evs)
	}
	if err != nil {
		if len(evs) == 1 {
			return nil, fmt.Errorf("insert event %s/%s: %w", evs[0].Source, evs[0].EventID, err)
		}
		return nil, fmt.Errorf("insert %d events: %w", len(evs), err)
	}
	inserted, first, dups := matchInserted(evs, ids, func(int) bool { return false })
	if err := db.noteConflictsTx(ctx, tx, dups, first); err != nil {
		return nil, err
	}
	if err := db.noteIgnoredTx(ctx, tx, evs, inserted); err != nil {
		return nil, err
	}
	return inserted, nil
}

// matchInserted reads which of evs the insert stored (ids, by key: an
// event whose key comes twice is inserted at its first place): it sets
// their IDs and returns which were inserted, the first place of each
// inserted key, and the redeliveries whose body may conflict with the
// stored one. A backfilled event is never one (the API renders a listed
// event its own way), nor is one for which same(i) says the stored body
// is the same.
func matchInserted(evs []*payhook.Event, ids map[eventKey]int64, same func(i int) bool) ([]bool, map[eventKey]*payhook.Event, []*payhook.Event) {
	inserted := make([]bool, len(evs))
	first := make(map[eventKey]*payhook.Event, len(ids))
	var dups []*payhook.Event
	for i, ev := range evs {
		k := eventKey{ev.Source, ev.EventID}
		if id, ok := ids[k]; ok {
			ev.ID, inserted[i] = id, true
			first[k] = ev
			delete(ids, k) // a later place of the same key was not inserted
			continue
		}
		if ev.ReceivedVia == payhook.ViaBackfill || same(i) {
			continue
		}
		dups = append(dups, ev)
	}
	return inserted, first, dups
}

// maxInsertRows bounds the rows of one INSERT on SQLite, which takes
// eventInsertArgs arguments per row, and allows 32,766 arguments.
const maxInsertRows = 1000

// eventInsertArgs is the number of arguments of one event's row on SQLite.
const eventInsertArgs = 12

// insertEventsSQLite inserts evs, at most maxInsertRows a statement, and
// returns the ids of those inserted by key. A constraint a row breaks
// fails its statement as it is (OR FAIL), the rows before it left in
// the transaction: SQLite then keeps no journal of the statement's own
// to undo it with, a copy of every page it changes (2.5% of
// BenchmarkIngest's CPU, docs/benchmarks.md). Its callers roll back on
// an error, as InsertEventsTx says.
func (db *DB) insertEventsSQLite(ctx context.Context, tx *sql.Tx, evs []*payhook.Event) (map[eventKey]int64, error) {
	ids := make(map[eventKey]int64, len(evs))
	for chunk := range slices.Chunk(evs, maxInsertRows) {
		var q strings.Builder
		q.WriteString(`INSERT OR FAIL INTO payhook_events
		(source, event_id, type, environment, occurred_at, received_at, payload, secret_id, status, last_error,
		 enqueued_at, received_via)
		VALUES `)
		args := make([]any, 0, len(chunk)*eventInsertArgs)
		for i, ev := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(db.Row(len(args)+1, eventInsertArgs))
			received := db.TimeValue(ev.ReceivedAt)
			args = append(args, ev.Source, ev.EventID, ev.Type, ev.Environment, db.TimeValue(ev.OccurredAt), received,
				ev.Payload, ev.SecretID, string(ev.Status), payhook.Storable(ev.LastError), received, string(ev.ReceivedVia))
		}
		q.WriteString(" ON CONFLICT (source, event_id) DO NOTHING RETURNING id, source, event_id")
		if err := scanIDs(ctx, tx, q.String(), args, ids); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// insertEventsPostgres inserts evs in one statement whose text does not
// depend on their number (the events go as one array per column), so that
// it is prepared once per connection, and runs with in it.
func (db *DB) insertEventsPostgres(ctx context.Context, tx *sql.Tx, evs []*payhook.Event, with With) (map[eventKey]int64, error) {
	q, args := postgresInsert(evs, with)
	ids := make(map[eventKey]int64, len(evs))
	if err := scanIDs(ctx, tx, q+` SELECT id, source, event_id FROM inserted`, args, ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// postgresInsert returns insertEventsPostgres's WITH query, without the
// SELECT that ends it: the table expressions "input" (the events, with
// their place ord) and "inserted" (id, source, event_id, status), and with.
func postgresInsert(evs []*payhook.Event, with With) (string, []any) {
	n := len(evs)
	var (
		source, eventID, typ, env = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		occurred, received        = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		payload                   = make([][]byte, n)
		secret, status, lastError = make([]string, n), make([]string, n), make([]string, n)
		via                       = make([]string, n)
	)
	ts := func(t time.Time) pgtype.Timestamptz {
		if t.IsZero() {
			return pgtype.Timestamptz{}
		}
		return pgtype.Timestamptz{Time: t.UTC().Truncate(time.Microsecond), Valid: true}
	}
	for i, ev := range evs {
		source[i], eventID[i], typ[i], env[i] = ev.Source, ev.EventID, ev.Type, ev.Environment
		occurred[i], received[i] = ts(ev.OccurredAt), ts(ev.ReceivedAt)
		payload[i] = ev.Payload
		secret[i], status[i], lastError[i], via[i] = ev.SecretID, string(ev.Status), payhook.Storable(ev.LastError), string(ev.ReceivedVia)
	}
	args := []any{source, eventID, typ, env, occurred, received, payload, secret, status, lastError, via}
	q := `WITH input AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[],
			$7::bytea[], $8::text[], $9::text[], $10::text[], $11::text[]) WITH ORDINALITY
			AS t(source, event_id, type, environment, occurred_at, received_at, payload, secret_id, status, last_error, received_via, ord)
	), inserted AS (
		INSERT INTO payhook_events
			(source, event_id, type, environment, occurred_at, received_at, payload, secret_id, status, last_error,
			 enqueued_at, received_via)
		SELECT source, event_id, type, environment, occurred_at, received_at, payload, secret_id, status, last_error,
			received_at, received_via
		FROM input ORDER BY ord
		ON CONFLICT (source, event_id) DO NOTHING
		RETURNING id, source, event_id, status
	)`
	if with.SQL != nil {
		q += `, follow AS (` + with.SQL(len(args)+1) + `)`
		args = append(args, with.Args...)
	}
	return q, args
}

// StoreEvents is InsertEventsWithTx in a transaction of its own made of
// one statement on the Ingest pool (PostgreSQL): one round trip stores
// the events, runs with and commits, durably (synchronous_commit is on),
// before StoreEvents returns. A key another transaction holds for longer
// than IngestLockWait fails the statement, and nothing of it is stored,
// with an error IsLockTimeout reports. The alerts of events delivered
// again with another body, and of events stored as ignored, are raised
// just after, in a transaction of their own, before StoreEvents returns (a stored body never changes and
// the alerts' unique index decides, so that is no race); when that fails,
// the events are stored and the error says so.
func (db *DB) StoreEvents(ctx context.Context, evs []*payhook.Event, with With) ([]bool, error) {
	if db.Ingest == nil {
		return nil, fmt.Errorf("store events: no ingest pool (PostgreSQL, opened by Open)")
	}
	for _, ev := range evs {
		if ev.Status == "" {
			ev.Status = payhook.StatusReceived
		}
		if ev.ReceivedVia == "" {
			ev.ReceivedVia = payhook.ViaWebhook
		}
	}
	// The rows inserted, and for each other one whether the stored body
	// differs: NULL when the statement's snapshot does not show the row
	// (inserted by this statement at an earlier place, or by a transaction
	// that committed while the insert waited for it).
	q, args := postgresInsert(evs, with)
	q += ` SELECT id, source, event_id, 0::bigint, NULL::boolean FROM inserted
		UNION ALL
		SELECT NULL, i.source, i.event_id, i.ord, e.payload <> i.payload AND e.received_via <> 'backfill'
		FROM input i LEFT JOIN payhook_events e ON e.source = i.source AND e.event_id = i.event_id
		WHERE NOT EXISTS (SELECT FROM inserted n WHERE n.source = i.source AND n.event_id = i.event_id)`
	ids := make(map[eventKey]int64, len(evs))
	differs := make(map[int]sql.NullBool) // by place in evs
	err := func() error {
		rows, err := db.Ingest.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id sql.NullInt64
			var k eventKey
			var ord int
			var d sql.NullBool
			if err := rows.Scan(&id, &k.source, &k.eventID, &ord, &d); err != nil {
				return err
			}
			if id.Valid {
				ids[k] = id.Int64
			} else {
				differs[ord-1] = d // ord counts from 1
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// The commit's outcome comes with the end of the results.
		return rows.Close()
	}()
	if err != nil {
		if len(evs) == 1 {
			return nil, fmt.Errorf("store event %s/%s: %w", evs[0].Source, evs[0].EventID, err)
		}
		return nil, fmt.Errorf("store %d events: %w", len(evs), err)
	}
	inserted, first, dups := matchInserted(evs, ids, func(i int) bool {
		d := differs[i]
		return d.Valid && !d.Bool // the same body as stored
	})
	if len(dups) == 0 && !anyIgnored(evs, inserted) {
		return inserted, nil
	}
	if err := db.noteAlerts(ctx, dups, first, evs, inserted); err != nil {
		return nil, fmt.Errorf("%d events stored; then: %w", len(first), err)
	}
	return inserted, nil
}

// noteAlerts is noteConflictsTx and noteIgnoredTx in a transaction of
// their own.
func (db *DB) noteAlerts(ctx context.Context, dups []*payhook.Event, first map[eventKey]*payhook.Event, evs []*payhook.Event, inserted []bool) error {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("compare events with the stored ones: %w", err)
	}
	defer tx.Rollback()
	if err := db.noteConflictsTx(ctx, tx, dups, first); err != nil {
		return err
	}
	if err := db.noteIgnoredTx(ctx, tx, evs, inserted); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("compare events with the stored ones: commit: %w", err)
	}
	return nil
}

// anyIgnored reports whether one of evs was inserted as ignored.
func anyIgnored(evs []*payhook.Event, inserted []bool) bool {
	for i, ev := range evs {
		if inserted[i] && ev.Status == payhook.StatusIgnored {
			return true
		}
	}
	return false
}

// noteIgnoredTx raises AlertEnvironmentMismatch, in tx, for the events of
// evs that were inserted as ignored: one upsert per source, counting its
// events and naming the last one and its reason, in the order of the
// sources' names, so that concurrent committers take the alerts' row
// locks in one order (PostgreSQL) and never deadlock; duplicates, not
// inserted, raise nothing.
func (db *DB) noteIgnoredTx(ctx context.Context, tx *sql.Tx, evs []*payhook.Event, inserted []bool) error {
	type ignored struct {
		last *payhook.Event
		n    int
		seen time.Time
	}
	bySource := map[string]*ignored{}
	for i, ev := range evs {
		if !inserted[i] || ev.Status != payhook.StatusIgnored {
			continue
		}
		g := bySource[ev.Source]
		if g == nil {
			g = &ignored{}
			bySource[ev.Source] = g
		}
		g.last, g.n = ev, g.n+1
		if ev.ReceivedAt.After(g.seen) {
			g.seen = ev.ReceivedAt
		}
	}
	for _, source := range slices.Sorted(maps.Keys(bySource)) {
		g := bySource[source]
		ev := g.last
		msg := fmt.Sprintf("source %s: event %s (%s) stored as ignored, not processed: %s", ev.Source, ev.EventID, ev.Type, ev.LastError)
		_, err := tx.ExecContext(ctx, `INSERT INTO payhook_alerts
			(kind, subject, message, first_seen, last_seen, count, acknowledged)
			VALUES ($1, $2, $3, $4, $4, $5, FALSE)
			ON CONFLICT (kind, subject) DO UPDATE SET
				count = payhook_alerts.count + excluded.count,
				last_seen = excluded.last_seen,
				message = excluded.message,
				acknowledged = FALSE`,
			AlertEnvironmentMismatch, payhook.Storable(source), payhook.Storable(msg), db.TimeValue(g.seen), g.n)
		if err != nil {
			return fmt.Errorf("raise %s for %s/%s: %w", AlertEnvironmentMismatch, ev.Source, ev.EventID, err)
		}
	}
	return nil
}

type eventKey struct{ source, eventID string }

// scanIDs runs an INSERT ... RETURNING id, source, event_id and adds the
// ids to ids by key; the order of the returned rows is not relied on
// (SQLite does not promise it).
func scanIDs(ctx context.Context, tx *sql.Tx, query string, args []any, ids map[eventKey]int64) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var k eventKey
		if err := rows.Scan(&id, &k.source, &k.eventID); err != nil {
			return err
		}
		ids[k] = id
	}
	return rows.Err()
}

// noteConflictsTx raises AlertEventBodyConflict for each event of dups,
// not inserted, whose body is not the stored one (payhook.SameBody: the
// same bytes, or the same but for the members that name a delivery,
// Event.DeliveryFields): the one of first when its key was inserted by
// this very batch, else the one in the database, read for all of them
// with one query. A stored payload never
// changes, so reading it is no race; the alerts' unique (kind, subject)
// index decides that the alert is raised once, whatever delivery brings a
// conflicting body first.
func (db *DB) noteConflictsTx(ctx context.Context, tx *sql.Tx, dups []*payhook.Event, first map[eventKey]*payhook.Event) error {
	type conflict struct {
		ev     *payhook.Event
		stored []byte
	}
	var conflicts []conflict
	var read []*payhook.Event
	for _, ev := range dups {
		if f, ok := first[eventKey{ev.Source, ev.EventID}]; ok {
			if f.ReceivedVia != payhook.ViaBackfill && !payhook.SameBody(f.Payload, ev.Payload, ev.DeliveryFields) {
				conflicts = append(conflicts, conflict{ev, f.Payload})
			}
			continue
		}
		read = append(read, ev)
	}
	for chunk := range slices.Chunk(read, maxInsertRows) {
		stored, err := db.storedPayloadsTx(ctx, tx, chunk)
		if err != nil {
			return err
		}
		for _, ev := range chunk {
			p, ok := stored[eventKey{ev.Source, ev.EventID}]
			if !ok {
				return fmt.Errorf("compare event %s/%s with the stored one: %w", ev.Source, ev.EventID, sql.ErrNoRows)
			}
			if p != nil && !payhook.SameBody(p, ev.Payload, ev.DeliveryFields) {
				conflicts = append(conflicts, conflict{ev, p})
			}
		}
	}
	// Raised in the order of their alerts' keys, as noteIgnoredTx raises
	// its own: two committers whose batches bring the same conflicting
	// events in opposite orders would otherwise deadlock on PostgreSQL.
	slices.SortStableFunc(conflicts, func(a, b conflict) int {
		return cmp.Or(strings.Compare(a.ev.Source, b.ev.Source), strings.Compare(a.ev.EventID, b.ev.EventID))
	})
	for _, c := range conflicts {
		if err := db.raiseConflictTx(ctx, tx, c.ev, c.stored); err != nil {
			return err
		}
	}
	return nil
}

// storedPayloadsTx returns the stored payloads of the events with evs'
// keys, by key: nil for an event stored as listed (ViaBackfill), which
// the API rendered its own way, so that a delivery coming after it (the
// provider still retrying) conflicts with nothing.
func (db *DB) storedPayloadsTx(ctx context.Context, tx *sql.Tx, evs []*payhook.Event) (map[eventKey][]byte, error) {
	var q strings.Builder
	// A join, not (source, event_id) IN (VALUES ...): SQLite scans the
	// whole table for that one.
	q.WriteString(`SELECT e.source, e.event_id, e.payload, e.received_via FROM (VALUES `)
	args := make([]any, 0, 2*len(evs))
	for i, ev := range evs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(db.Row(len(args)+1, 2))
		args = append(args, ev.Source, ev.EventID)
	}
	q.WriteString(`) AS k JOIN payhook_events e ON e.source = k.column1 AND e.event_id = k.column2`)
	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("compare %d events with the stored ones: %w", len(evs), err)
	}
	defer rows.Close()
	stored := make(map[eventKey][]byte, len(evs))
	for rows.Next() {
		var k eventKey
		var p []byte
		var via string
		if err := rows.Scan(&k.source, &k.eventID, &p, &via); err != nil {
			return nil, fmt.Errorf("compare %d events with the stored ones: %w", len(evs), err)
		}
		if payhook.Via(via) == payhook.ViaBackfill {
			// Listed, not delivered: no body a delivery can conflict with.
			p = nil
		}
		stored[k] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("compare %d events with the stored ones: %w", len(evs), err)
	}
	return stored, nil
}

// raiseConflictTx raises AlertEventBodyConflict for ev, delivered again
// with another body than stored.
func (db *DB) raiseConflictTx(ctx context.Context, tx *sql.Tx, ev *payhook.Event, stored []byte) error {
	subject := ev.Source + "/" + ev.EventID
	msg := fmt.Sprintf("event %s delivered again with another body: the first is kept (sha256 %x), the new one was not stored (sha256 %x)",
		subject, sha256.Sum256(stored), sha256.Sum256(ev.Payload))
	_, err := tx.ExecContext(ctx, `INSERT INTO payhook_alerts
		(kind, subject, message, first_seen, last_seen, count, acknowledged)
		VALUES ($1, $2, $3, $4, $4, 1, FALSE)
		ON CONFLICT (kind, subject) DO NOTHING`,
		AlertEventBodyConflict, payhook.Storable(subject), payhook.Storable(msg), db.TimeValue(ev.ReceivedAt))
	if err != nil {
		return fmt.Errorf("raise %s for %s: %w", AlertEventBodyConflict, subject, err)
	}
	return nil
}

// ClaimEventTx claims the event for processing: if it is still received it
// counts one more attempt and returns it, locked until tx ends (a row lock
// on PostgreSQL, the write lock on SQLite). It returns nil and no error when
// the event is no longer waiting (processed, ignored or failed), so a job
// that runs twice does nothing the second time.
func (db *DB) ClaimEventTx(ctx context.Context, tx *sql.Tx, id int64) (*payhook.Event, error) {
	query := `UPDATE payhook_events
		SET attempts = attempts + 1
		WHERE id = $1 AND status = 'received'
		RETURNING ` + eventColumns
	if dstBug("claim-without-condition") {
		query = withoutCondition(query)
	}
	ev, err := scanEvent(tx.QueryRowContext(ctx, query, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim event %d: %w", id, err)
	}
	return ev, nil
}

// LockEventsTx returns, in the order of ids and each once, those of the
// events that are still received, locked until tx ends (FOR UPDATE on
// PostgreSQL; SQLite's one writer already serialises): what ClaimEventTx
// does for one event, without counting the attempt, which FinishEventsTx
// counts with the outcome, so that an event whose handlers fail under a
// savepoint is left as it was. With skipLocked, PostgreSQL skips those
// another transaction holds (SKIP LOCKED) instead of waiting for them, as
// if they were no longer received. A maxBytes above 0 bounds the payloads
// returned: in the order of their row ids, each event whose payload would
// take the total past it is left out, as if no longer received (on
// PostgreSQL still locked until tx ends); one large event does not keep
// out the smaller ones after it.
func (db *DB) LockEventsTx(ctx context.Context, tx *sql.Tx, ids []int64, skipLocked bool, maxBytes int64) ([]*payhook.Event, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	lock := " FOR UPDATE"
	switch {
	case db.Engine == SQLite:
		lock = ""
	case skipLocked:
		lock = db.SkipLocked()
	}
	in, arg := db.InIDs("id", 1, ids)
	rows, err := tx.QueryContext(ctx, `SELECT `+eventColumns+` FROM payhook_events
		WHERE `+in+` AND status = 'received'
		ORDER BY id`+lock, arg)
	if err != nil {
		return nil, fmt.Errorf("lock %d events: %w", len(ids), err)
	}
	defer rows.Close()
	byID := make(map[int64]*payhook.Event, len(ids))
	var total int64
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("lock %d events: %w", len(ids), err)
		}
		n := int64(len(ev.Payload))
		if maxBytes > 0 && total+n > maxBytes {
			continue
		}
		total += n
		byID[ev.ID] = ev
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock %d events: %w", len(ids), err)
	}
	evs := make([]*payhook.Event, 0, len(byID))
	for _, id := range ids {
		if ev := byID[id]; ev != nil {
			evs = append(evs, ev)
			delete(byID, id) // an id given twice comes once
		}
	}
	return evs, nil
}

// FinishEventsTx counts one more attempt of each of the events locked
// by LockEventsTx and moves them to status, as FinishEventTx does for a
// claimed one, in one statement: all must still be received.
func (db *DB) FinishEventsTx(ctx context.Context, tx *sql.Tx, ids []int64, status payhook.Status, at time.Time, note string) error {
	if len(ids) == 0 {
		return nil
	}
	var processedAt any
	if status == payhook.StatusProcessed {
		processedAt = db.TimeValue(at)
	}
	in, arg := db.InIDs("id", 4, ids)
	res, err := tx.ExecContext(ctx, `UPDATE payhook_events
		SET attempts = attempts + 1, status = $1, processed_at = $2, last_error = $3
		WHERE `+in+` AND status = 'received'`, string(status), processedAt, payhook.Storable(note), arg)
	if err != nil {
		return fmt.Errorf("mark %d events %s: %w", len(ids), status, err)
	}
	if n, _ := res.RowsAffected(); n != int64(len(ids)) {
		return fmt.Errorf("mark %d events %s: %d of them are not waiting to be processed", len(ids), status, int64(len(ids))-n)
	}
	return nil
}

// FinishEventTx moves a claimed event to its final status: processed (with
// processed_at = at) or ignored, with note as the reason kept in last_error
// (made storable, see payhook.Storable).
func (db *DB) FinishEventTx(ctx context.Context, tx *sql.Tx, id int64, status payhook.Status, at time.Time, note string) error {
	var processedAt any
	if status == payhook.StatusProcessed {
		processedAt = db.TimeValue(at)
	}
	query := `UPDATE payhook_events
		SET status = $2, processed_at = $3, last_error = $4
		WHERE id = $1 AND status = 'received'`
	if dstBug("claim-without-condition") {
		query = withoutCondition(query)
	}
	res, err := tx.ExecContext(ctx, query, id, string(status), processedAt, payhook.Storable(note))
	if err != nil {
		return fmt.Errorf("mark event %d %s: %w", id, status, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("mark event %d %s: event is not waiting to be processed", id, status)
	}
	return nil
}

// RecordFailure counts a failed attempt of a waiting event and keeps its
// error (made storable, see payhook.Storable, so that recording cannot fail
// on the text), outside the rolled-back processing transaction. When final
// is true the event becomes failed. An event no longer waiting is left
// alone.
func (db *DB) RecordFailure(ctx context.Context, id int64, cause string, final bool) error {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record failure of event %d: %w", id, err)
	}
	defer tx.Rollback()
	if _, err := db.RecordFailureTx(ctx, tx, id, cause, final); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record failure of event %d: %w", id, err)
	}
	return nil
}

// RecordFailureTx is RecordFailure inside tx, so that what follows from
// the failure (an alert) commits with it. It returns the event as updated,
// or nil and no error if the event is no longer waiting.
func (db *DB) RecordFailureTx(ctx context.Context, tx *sql.Tx, id int64, cause string, final bool) (*payhook.Event, error) {
	status := payhook.StatusReceived
	if final {
		status = payhook.StatusFailed
	}
	ev, err := scanEvent(tx.QueryRowContext(ctx, `UPDATE payhook_events
		SET attempts = attempts + 1, last_error = $2, status = $3
		WHERE id = $1 AND status = 'received'
		RETURNING `+eventColumns, id, payhook.Storable(cause), string(status)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("record failure of event %d: %w", id, err)
	}
	return ev, nil
}

// ResetEventTx puts an event back to received so that it is processed again
// (a replay), enqueued at time at. Ignored events stay ignored. It returns
// an error wrapping payhook.ErrNotFound if there is no such event that is
// not ignored.
func (db *DB) ResetEventTx(ctx context.Context, tx *sql.Tx, id int64, at time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE payhook_events
		SET status = 'received', processed_at = NULL, last_error = '', enqueued_at = $2
		WHERE id = $1 AND status <> 'ignored'`, id, db.TimeValue(at))
	if err != nil {
		return fmt.Errorf("reset event %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("reset event %d: no such event that is not ignored: %w", id, payhook.ErrNotFound)
	}
	return nil
}

// Event returns the event with payhook's row id, or an error wrapping
// payhook.ErrNotFound.
func (db *DB) Event(ctx context.Context, id int64) (*payhook.Event, error) {
	ev, err := scanEvent(db.SQL.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM payhook_events WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("event %d: %w", id, payhook.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get event %d: %w", id, err)
	}
	return ev, nil
}

// Filter selects events for ListEvents. Zero fields match everything.
type Filter struct {
	Source  string
	Status  payhook.Status
	EventID string
	// Type and Via, if set, select one event type and one way in.
	Type string
	Via  payhook.Via
	// Since and Until, if set, bound received_at: Since <= received_at <
	// Until.
	Since, Until time.Time
	// Before, if set, returns only events with a smaller row id (paging).
	Before int64
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListEvents returns matching events, newest first.
func (db *DB) ListEvents(ctx context.Context, f Filter) ([]*payhook.Event, error) {
	where, args := db.eventWhere(f)
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q := `SELECT ` + eventColumns + ` FROM payhook_events` + where
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, f.Limit)
	rows, err := db.SQL.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var evs []*payhook.Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return evs, nil
}

// RequeueStaleTx picks, oldest first, at most limit events still received
// whose job was last enqueued before the given time, marks them enqueued
// at now and returns their ids, for the caller to enqueue in tx. Moving
// enqueued_at forward keeps events whose job is merely waiting out a retry
// from being picked again and again, so the sweep gets through them all.
// On PostgreSQL it skips events another transaction holds (a batch applying
// them): waiting on them could deadlock with it, and they are not lost.
func (db *DB) RequeueStaleTx(ctx context.Context, tx *sql.Tx, before, now time.Time, limit int) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, db.requeueStale(), db.TimeValue(before), db.TimeValue(now), limit)
	if err != nil {
		return nil, fmt.Errorf("requeue stale events: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("requeue stale events: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("requeue stale events: %w", err)
	}
	return ids, nil
}

// requeueStale is RequeueStaleTx's statement: before, now and limit are
// $1, $2 and $3.
func (db *DB) requeueStale() string {
	return `WITH picked AS MATERIALIZED (SELECT id FROM payhook_events
			WHERE status = 'received' AND enqueued_at < $1
			ORDER BY enqueued_at LIMIT $3` + db.SkipLocked() + `)
		UPDATE payhook_events SET enqueued_at = $2
		WHERE id IN (SELECT id FROM picked) AND status = 'received'
		RETURNING id`
}

// PostponeSweepTx sets when the event with row id id was last enqueued to
// at, for the sweep to look at it again SweepAge after at, if the event is
// still received.
func (db *DB) PostponeSweepTx(ctx context.Context, tx *sql.Tx, id int64, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE payhook_events SET enqueued_at = $2
		WHERE id = $1 AND status = 'received'`, id, db.TimeValue(at)); err != nil {
		return fmt.Errorf("postpone the sweep of event %d: %w", id, err)
	}
	return nil
}

// CountByStatus returns how many events each status holds.
func (db *DB) CountByStatus(ctx context.Context) (map[payhook.Status]int, error) {
	// Processed events are the rest of all: only the others have an index
	// holding their status, and one statement reads them all at once.
	rows, err := db.SQL.QueryContext(ctx, `SELECT '', COUNT(*) FROM payhook_events
		UNION ALL
		SELECT status, COUNT(*) FROM payhook_events
		WHERE status = 'received' OR status = 'failed' OR status = 'ignored'
		GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count events: %w", err)
	}
	defer rows.Close()
	counts := map[payhook.Status]int{}
	processed := 0
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count events: %w", err)
		}
		if s == "" {
			processed += n
		} else {
			counts[payhook.Status(s)], processed = n, processed-n
		}
	}
	if processed > 0 {
		counts[payhook.StatusProcessed] = processed
	}
	return counts, rows.Err()
}
