package store

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// SQLite parses every statement it is given: through database/sql each
// Exec or Query of the driver prepares its SQL, runs it and finalizes it.
// Parsing took a quarter of payhook's CPU while it acknowledged and
// processed 1,000 events/s (the billing statements, the job queue's and
// River's, the same few dozen over and over). So each SQLite connection
// keeps its prepared statements (the driver resets a statement after use
// for exactly this) and database/sql reaches them through Prepare: the
// connection below implements neither ExecerContext nor QueryerContext.

// stmtCacheSize bounds the statements a connection keeps: the least
// recently used one not in use goes first.
const stmtCacheSize = 256

// cachingConnector opens SQLite connections that keep their statements.
type cachingConnector struct{ driver.Connector }

func newSQLiteConnector(dsn string) (driver.Connector, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return cachingConnector{c}, nil
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("sqlite connection %T lacks the methods database/sql needs", conn)
	}
	return &cachingConn{conn: sc, byQuery: map[string]*list.Element{}, lru: list.New()}, nil
}

// sqliteConn is what the SQLite driver's connection provides and
// database/sql uses, but for ExecerContext and QueryerContext.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is one SQLite connection with its statements. database/sql
// uses a connection from one goroutine at a time, so it needs no lock.
type cachingConn struct {
	conn    sqliteConn
	byQuery map[string]*list.Element // of lru, each a *cachedStmt
	lru     *list.List               // front: the most recently used
}

// cachedStmt is a statement of the cache, lent to one use at a time.
type cachedStmt struct {
	query string
	stmt  driver.Stmt
	inUse bool
}

func (c *cachingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext lends the connection's statement of query, prepared
// once; while that one is in use (a query's rows still open), a statement
// of its own that closes with its use.
func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if e, ok := c.byQuery[query]; ok {
		cs := e.Value.(*cachedStmt)
		if !cs.inUse {
			cs.inUse = true
			c.lru.MoveToFront(e)
			return &lentStmt{c: c, cs: cs}, nil
		}
		s, err := c.conn.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		return &lentStmt{c: c, own: s}, nil
	}
	s, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cs := &cachedStmt{query: query, stmt: s, inUse: true}
	c.byQuery[query] = c.lru.PushFront(cs)
	c.evict()
	return &lentStmt{c: c, cs: cs}, nil
}

// evict closes the least recently used statements not in use past
// stmtCacheSize.
func (c *cachingConn) evict() {
	for e := c.lru.Back(); e != nil && c.lru.Len() > stmtCacheSize; {
		prev := e.Prev()
		if cs := e.Value.(*cachedStmt); !cs.inUse {
			c.lru.Remove(e)
			delete(c.byQuery, cs.query)
			cs.stmt.Close()
		}
		e = prev
	}
}

// drop closes cs, which is not in use, and removes it from the cache.
func (c *cachingConn) drop(cs *cachedStmt) {
	if e, ok := c.byQuery[cs.query]; ok && e.Value.(*cachedStmt) == cs {
		c.lru.Remove(e)
		delete(c.byQuery, cs.query)
	}
	cs.stmt.Close()
}

// Close closes the statements and the connection.
func (c *cachingConn) Close() error {
	var errs []error
	for e := c.lru.Front(); e != nil; e = e.Next() {
		errs = append(errs, e.Value.(*cachedStmt).stmt.Close())
	}
	c.lru.Init()
	clear(c.byQuery)
	return errors.Join(append(errs, c.conn.Close())...)
}

func (c *cachingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.conn.BeginTx(ctx, opts)
}

func (c *cachingConn) Ping(ctx context.Context) error { return c.conn.Ping(ctx) }

func (c *cachingConn) ResetSession(ctx context.Context) error { return c.conn.ResetSession(ctx) }

func (c *cachingConn) IsValid() bool { return c.conn.IsValid() }

// lentStmt is a statement lent for one use: a cached one (cs), given back
// by Close, or one of its own (own), closed by Close.
type lentStmt struct {
	c      *cachingConn
	cs     *cachedStmt
	own    driver.Stmt
	failed bool // an Exec or Query of it returned an error
}

func (s *lentStmt) stmt() driver.Stmt {
	if s.cs != nil {
		return s.cs.stmt
	}
	return s.own
}

// Close gives a cached statement back, or closes one of its own. A
// cached statement whose use failed is closed and leaves the cache: the
// next use prepares it again, so that no statement an error (a full disk,
// an interrupt) left in some state of SQLite's is ever run again.
func (s *lentStmt) Close() error {
	if s.cs == nil {
		return s.own.Close()
	}
	s.cs.inUse = false
	if s.failed {
		s.c.drop(s.cs)
		return nil
	}
	s.c.evict()
	return nil
}

// NumInput is -1: the driver binds the arguments by position and name,
// as it does without a prepared statement, and database/sql checks none.
func (s *lentStmt) NumInput() int { return -1 }

func (s *lentStmt) Exec(args []driver.Value) (driver.Result, error) {
	r, err := s.stmt().Exec(args) //nolint:staticcheck // database/sql calls ExecContext
	s.failed = s.failed || err != nil
	return r, err
}

func (s *lentStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.stmt().Query(args) //nolint:staticcheck // database/sql calls QueryContext
	s.failed = s.failed || err != nil
	return r, err
}

func (s *lentStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.stmt().(driver.StmtExecContext).ExecContext(ctx, args)
	s.failed = s.failed || err != nil
	return r, err
}

func (s *lentStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.stmt().(driver.StmtQueryContext).QueryContext(ctx, args)
	s.failed = s.failed || err != nil
	return r, err
}
