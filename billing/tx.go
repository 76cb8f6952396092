package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// Tx is a transaction on a payhook database with what every billing write
// needs besides the *sql.Tx itself: the engine, whose timestamp columns
// take their own format, and the transaction's time, which stamps what it
// writes (posted_at, updated_at, an alert's last_seen...). Billing never
// reads the clock: the caller picks now once per transaction.
//
// The embedded *sql.Tx is the caller's: whoever began it commits or rolls
// it back. On SQLite it holds the only connection, so nothing may use the
// database's pool until it ends.
type Tx struct {
	*sql.Tx
	db  *store.DB
	now time.Time
	// box routes the facts tx writes to the outbox; nil leaves them for
	// the sweep to route. deliveries are those it routed, untold those
	// it routed to Unrecorded sinks only.
	box        *outbox.Outbox
	deliveries []int64
	untold     []outbox.Untold
}

// Wrap returns tx, begun on db, as a billing transaction at time now: the
// way to apply facts inside a transaction someone else holds (the job
// queue's, which marks the event processed).
func Wrap(db *store.DB, tx *sql.Tx, now time.Time) *Tx {
	return &Tx{Tx: tx, db: db, now: now}
}

// Begin begins a transaction on db at time now. The caller commits or
// rolls it back.
func Begin(ctx context.Context, db *store.DB, now time.Time) (*Tx, error) {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin billing transaction: %w", err)
	}
	return Wrap(db, tx, now), nil
}

// WithOutbox makes tx route the facts it writes to o's sinks at once (one
// pending delivery per matching sink, see Deliveries, or, when those
// sinks are all Unrecorded, none: see Untold); without it they
// are written unrouted, and the outbox's sweep routes them. It returns tx.
func (tx *Tx) WithOutbox(o *outbox.Outbox) *Tx {
	tx.box = o
	return tx
}

// Deliveries returns the ids of the outbox deliveries tx wrote so far: the
// caller enqueues their jobs in tx (jobs.EnqueueDeliveries).
func (tx *Tx) Deliveries() []int64 { return tx.deliveries }

// Untold returns the facts tx wrote so far for Unrecorded sinks only,
// which have no delivery: the caller tells them once tx has committed
// (outbox.Outbox.Tell; a Queue's handler hands them to jobs.Defer).
func (tx *Tx) Untold() []outbox.Untold { return tx.untold }

// Now returns the transaction's time.
func (tx *Tx) Now() time.Time { return tx.now }

// timeValue converts t into the engine's value for a timestamp column; the zero
// time is NULL.
func (tx *Tx) timeValue(t time.Time) any { return tx.db.TimeValue(t) }

// check returns an error unless tx can be written through.
func (tx *Tx) check() error {
	if tx == nil || tx.Tx == nil || tx.db == nil {
		return errNoTx
	}
	return nil
}

var errNoTx = errors.New("billing: no transaction (make one with billing.Begin or billing.Wrap)")
