package dst

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// errInjected is a statement or commit the simulation failed on purpose.
var errInjected = errors.New("dst: injected store failure")

// errCrashed is what every statement gets once the process has crashed.
var errCrashed = errors.New("dst: the process crashed")

// faults decides, statement by statement, what the store does: run it,
// fail it (the statement, or a commit, is not applied and the process goes
// on), or crash (neither it nor anything after it is applied, until the
// harness reopens the database). Its draws come from the run's seed and
// the statements come in an order the harness chose, so a seed replays
// them exactly.
type faults struct {
	mu      sync.Mutex
	armed   bool
	n       int          // statements and commits seen while armed
	crashAt map[int]bool // statement numbers at which the process dies
	// afterCommit holds commit numbers right after which the process
	// dies: at the next statement, before anything else is written (the
	// end of the job that committed, the answer to the delivery).
	afterCommit map[int]bool
	commits     int
	dying       bool
	crashed     bool
	fail        float64 // probability that a statement or commit fails
	rng         *rand.Rand
	// outside holds the statements written outside the open transaction
	// (outbox-outside-tx): SQLite's one writer runs them as soon as that
	// transaction ends, whatever its end, as if on a connection of their
	// own that committed at once.
	outside []outsideStmt
	// portable: the faults fall on points both engines pass in the same
	// order (see unitStatements), so a seed plays the same faults on
	// SQLite and PostgreSQL. Otherwise every statement is a point.
	portable bool
	// late: how long the server takes over each statement besides its
	// own time (opener.late).
	late time.Duration
}

type outsideStmt struct {
	query string
	args  []any
}

// writeOutside queues a statement written outside the open transaction.
func (f *faults) writeOutside(_ context.Context, query string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outside = append(f.outside, outsideStmt{query, args})
	return nil
}

// flushOutside runs the statements written outside the transaction that
// just ended on c, with no faults: they committed on their own.
func (c *faultConn) flushOutside() {
	c.f.mu.Lock()
	stmts := c.f.outside
	c.f.outside = nil
	c.f.mu.Unlock()
	for _, s := range stmts {
		nv := make([]driver.NamedValue, len(s.args))
		for i, a := range s.args {
			nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		}
		if _, err := c.Conn.(driver.ExecerContext).ExecContext(context.Background(), s.query, nv); err != nil {
			panic(fmt.Sprintf("dst: a statement outside the transaction: %v", err))
		}
	}
}

// In the portable model the points are payhook's units of work: the
// commit of a transaction that ran one of payhook's statements, and each
// of payhook's statements outside a transaction. River's statements (its
// drivers' sqlc queries) and River's own transactions are no points: its
// SQLite and PostgreSQL drivers differ in them (SQLite wraps a schedule in
// a transaction, PostgreSQL does it in one statement), and so do
// payhook's statements inside a transaction (billing skips a lock and a
// sum on PostgreSQL for a payment just inserted). A unit holds ~8
// statements, so the plan's statement numbers and failure rate are
// scaled by unitStatements, and its commit numbers by unitCommits (every
// other commit on SQLite is River's own).
const (
	unitStatements = 8
	unitCommits    = 2
)

// riverStatement reports whether query is one of River's (sqlc names
// each of them).
func riverStatement(query string) bool { return strings.HasPrefix(query, "-- name:") }

// next returns the fate of the next statement or commit: a point, or
// (portable) one that only a crash stops.
func (f *faults) next(point bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return errCrashed
	}
	if !f.armed {
		return nil
	}
	if !point {
		if f.dying {
			f.dying = false
			f.crashed = true
			return errCrashed
		}
		return nil
	}
	stride, fail := 1, f.fail
	if f.portable {
		stride, fail = unitStatements, f.fail*unitStatements
	}
	crash := false
	for range stride {
		f.n++
		crash = crash || f.crashAt[f.n]
	}
	if crash || f.dying {
		f.dying = false
		f.crashed = true
		return errCrashed
	}
	if fail > 0 && f.rng.Float64() < fail {
		return errInjected
	}
	return nil
}

// statement returns the fate of query, run inside tx (nil: outside one).
func (f *faults) statement(tx *faultTx, query string) error {
	if !f.portable {
		return f.next(true)
	}
	if riverStatement(query) {
		return f.next(false)
	}
	if tx != nil {
		tx.payhook = true
		return f.next(false)
	}
	return f.next(true)
}

func (f *faults) isCrashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// running is the faults of the run going on, for the bugs put back
// (bugs_test.go), whose runs are never parallel.
var running atomic.Pointer[faults]

// faultDriver is a database/sql driver (modernc's SQLite, pgx's) with
// faults in front of every statement and commit.
type faultDriver struct {
	inner  driver.Driver
	faults *faults
}

var driverSeq struct {
	sync.Mutex
	n int
}

// sqliteDriver is modernc's.
var sqliteDriver sqlite.Driver

// openFaulty opens dsn with inner, the faults of f in front of it.
func openFaulty(inner driver.Driver, dsn string, f *faults) *sql.DB {
	driverSeq.Lock()
	driverSeq.n++
	name := fmt.Sprintf("dst-sqlite-%d", driverSeq.n)
	driverSeq.Unlock()
	sql.Register(name, &faultDriver{inner: inner, faults: f})
	db, err := sql.Open(name, dsn)
	if err != nil {
		panic(err) // sql.Open fails only for an unknown driver
	}
	return db
}

func (d *faultDriver) Open(dsn string) (driver.Conn, error) {
	c, err := d.inner.Open(dsn)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, f: d.faults}, nil
}

type faultConn struct {
	driver.Conn
	f  *faults
	tx *faultTx // the open transaction, if any
}

// park parks an actor's statement outside a transaction, or its begin,
// until the harness lets it go (concurrent_test.go).
func (c *faultConn) park(ctx context.Context) error {
	if c.tx != nil {
		return nil
	}
	return gate(ctx)
}

func (c *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.park(ctx); err != nil {
		return nil, err
	}
	if err := c.f.next(!c.f.portable); err != nil {
		return nil, err
	}
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.tx = &faultTx{Tx: tx, c: c, f: c.f}
	return c.tx, nil
}

func (c *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.park(ctx); err != nil {
		return nil, err
	}
	time.Sleep(c.f.late)
	if err := c.f.statement(c.tx, query); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.park(ctx); err != nil {
		return nil, err
	}
	time.Sleep(c.f.late)
	if err := c.f.statement(c.tx, query); err != nil {
		return nil, err
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *faultConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.park(ctx); err != nil {
		return nil, err
	}
	if err := c.f.statement(c.tx, query); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *faultConn) CheckNamedValue(nv *driver.NamedValue) error {
	if nvc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nvc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *faultConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

type faultTx struct {
	driver.Tx
	c *faultConn
	f *faults
	// payhook: one of payhook's statements ran in it (portable model).
	payhook bool
}

// Commit fails or crashes like a statement; either way the transaction
// is rolled back, so nothing of it is applied. In the portable model only
// a transaction of payhook's is a point.
func (t *faultTx) Commit() error {
	t.c.tx = nil
	defer t.c.flushOutside()
	point := !t.f.portable || t.payhook
	if err := t.f.next(point); err != nil {
		t.Tx.Rollback()
		return err
	}
	if err := t.Tx.Commit(); err != nil {
		return err
	}
	if point {
		t.f.committed()
	}
	return nil
}

func (t *faultTx) Rollback() error {
	t.c.tx = nil
	defer t.c.flushOutside()
	return t.Tx.Rollback()
}

func (f *faults) committed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return
	}
	stride := 1
	if f.portable {
		stride = unitCommits
	}
	for range stride {
		f.commits++
		f.dying = f.dying || f.afterCommit[f.commits]
	}
}

// die makes the process die at the next statement: right after a side
// effect outside the database (the sink's), before it is recorded.
func (f *faults) die() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed {
		f.dying = true
	}
}
