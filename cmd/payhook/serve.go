package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/process"
	"github.com/payhook/payhook/console"
	"github.com/payhook/payhook/groupcommit"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/metrics"
	"github.com/payhook/payhook/receiver"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

const serveHelp = `Usage: payhook serve [--config FILE] [--db URL] [--addr HOST:PORT] [--admin-addr HOST:PORT]
                     [--unsafe-durability]

Receives webhooks on POST /webhooks/{source}, stores each event once and
processes it in the background. Migrates the database first.

A 2xx says the event is on disk, so serve refuses to start on a database
that could lose a commit it returned from: PostgreSQL with fsync=off or
synchronous_commit=off on its connections (a pooler may drop the "on"
payhook asks for), SQLite with synchronous below FULL. --unsafe-durability
(env PAYHOOK_UNSAFE_DURABILITY=1) starts it anyway, for throwaway test
and benchmark databases, with a warning at every start.

With an admin token (PAYHOOK_ADMIN_TOKEN or admin.token, at least 32
bytes) or admin.users in the config, it also serves the web console at
/console (log in with the token or a user's password), River's jobs UI at
/console/jobs and the read API at /api/v1 (bearer token or console
session); --admin-addr moves them to a listener of their own.

/metrics (Prometheus) is open on --admin-addr, which is meant to be
private; on the public listener it needs the console's login (the admin
token as a bearer token) when there is a console, and is open otherwise,
with a warning at start. PAYHOOK_METRICS_TOKEN (or admin.metrics_token,
at least 32 bytes) makes it take that bearer token (or a login) on
either listener.

Without a config file it serves one demo source, "demo" (provider billete,
environment test), and prints how to send it a signed event; it refuses a
database holding events of other sources (an inbox whose config was left
out), whose processing it would fail. Its secret is
made at the first start and kept (mode 0600) beside the SQLite database
(payhook.db.demo-secret), or for PostgreSQL in payhook-demo.secret in the
working directory (env PAYHOOK_DEMO_SECRET_FILE names another file), so a
restart keeps it.

Examples:
  payhook serve
  payhook serve --config payhook.yaml --db postgres://payhook@127.0.0.1/payhook
  PAYHOOK_DB=sqlite:///var/lib/payhook/payhook.db payhook serve --addr 0.0.0.0:8080
  PAYHOOK_ADMIN_TOKEN=$(openssl rand -hex 32) payhook serve --admin-addr 127.0.0.1:9090`

// Server timeouts: a provider waits about 10 s for an answer.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 20 * time.Second
	idleTimeout       = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers: webhook signatures need
	// a few hundred bytes; beyond it the server answers 431.
	maxHeaderBytes  = 64 << 10
	shutdownTimeout = 30 * time.Second
)

// walCheckEvery is how often serve looks at a SQLite database's WAL
// (store.WatchWAL).
const walCheckEvery = 10 * time.Second

// postgresCommits is how many group commits may be under way at once on
// PostgreSQL (groupcommit.Config.Commits).
const postgresCommits = 3

func (m *Main) serve(ctx context.Context, args []string) error {
	fs := m.flags("serve", serveHelp)
	configPath := fs.String("config", "", "YAML file listing the sources (env PAYHOOK_CONFIG)")
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB; default "+store.DefaultURL+")")
	addr := fs.String("addr", "", "listen address (env PAYHOOK_ADDR; default 127.0.0.1:8080)")
	adminAddr := fs.String("admin-addr", "", "serve the console and /api/v1 on this address only, not on --addr (env PAYHOOK_ADMIN_ADDR)")
	unsafeDurability := fs.Bool("unsafe-durability", false,
		"start even when the database could lose an acknowledged event in a crash (env PAYHOOK_UNSAFE_DURABILITY=1); tests and benchmarks only")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	log := m.logger()
	// What can be refused before anything is written (the database, the
	// demo secret's file) is: the tokens in the environment, the
	// addresses (taken now, so that one in use stops the start here).
	for _, env := range []string{"PAYHOOK_ADMIN_TOKEN", "PAYHOOK_METRICS_TOKEN"} {
		if err := console.CheckToken(env, m.Getenv(env)); err != nil {
			return err
		}
	}
	at := m.env(*addr, "PAYHOOK_ADDR", "127.0.0.1:8080")
	if a := m.env(*adminAddr, "PAYHOOK_ADMIN_ADDR", ""); a == at && !strings.HasSuffix(a, ":0") { // port 0: each its own
		return fmt.Errorf("--admin-addr (PAYHOOK_ADMIN_ADDR) %s is --addr's: give it another address, or leave it out to serve the console on --addr", a)
	}
	ln, err := listen(at, "--addr (PAYHOOK_ADDR)")
	if err != nil {
		return err
	}
	defer ln.Close() // closed by the server's Shutdown if it served
	var adminLn net.Listener
	if a := m.env(*adminAddr, "PAYHOOK_ADMIN_ADDR", ""); a != "" {
		if adminLn, err = listen(a, "--admin-addr (PAYHOOK_ADMIN_ADDR)"); err != nil {
			return err
		}
		defer adminLn.Close()
	}

	// The database is opened, and its durability checked, before anything
	// is written (River's and payhook's migrations, the demo's secret);
	// with a config file, once that file has been read and checked.
	var db *store.DB
	open := func() error {
		var err error
		if db, err = m.openDB(ctx, *dbURL); err != nil {
			return err
		}
		return m.checkDurable(ctx, db, *unsafeDurability, log)
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	if m.env(*configPath, "PAYHOOK_CONFIG", "") == "" {
		if err := open(); err != nil {
			return err
		}
		// The demo source alone on an inbox's database (PAYHOOK_CONFIG
		// lost in a restart, one instance of several started without
		// it): its workers would take the inbox's jobs and fail each
		// attempt for want of the events' sources.
		if other, err := otherEventsIn(ctx, db, "demo"); err != nil {
			return err
		} else if other != "" {
			return fmt.Errorf("no --config (or PAYHOOK_CONFIG), yet %s holds events of source %q: without the config "+
				"that names it, serve would fail their processing; give --config, or another --db for the demo source",
				db.URL, other)
		}
	}
	cfg, demoSecret, secretFile, err := m.serveConfig(m.env(*configPath, "PAYHOOK_CONFIG", ""),
		m.env(*dbURL, "PAYHOOK_DB", store.DefaultURL))
	if err != nil {
		return err
	}
	sources, err := cfg.sources()
	if err != nil {
		return err
	}
	backoff, err := cfg.Processing.backoff()
	if err != nil {
		return err
	}
	pauseLag, maxLag, err := cfg.Processing.lags()
	if err != nil {
		return err
	}
	batch, err := cfg.Processing.batch()
	if err != nil {
		return err
	}
	if db == nil {
		if err := open(); err != nil {
			return err
		}
	}
	applied, newer, err := migrateAll(ctx, db, func(name string, err error) {
		log.Warn(migrationWaits, "migration", name, "err", err.Error())
	})
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		log.Info("migrated", "applied", strings.Join(applied, " "))
	}
	if len(newer) > 0 {
		log.Warn(newerSchema, "newer", strings.Join(newer, " "))
	}

	box, err := cfg.outbox(db, log, m.Now)
	if err != nil {
		return err
	}
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name
	}
	met, err := metrics.New(metrics.Config{DB: db, Outbox: box, Now: m.Now, Sources: names, AlertKinds: billing.AlertKinds})
	if err != nil {
		return err
	}
	qcfg, err := process.New(process.Config{DB: db, Sources: sources, Now: m.Now, Logger: log, Outbox: box,
		OnRateLimited: met.RateLimited})
	if err != nil {
		return err
	}
	qcfg.Workers, qcfg.MaxAttempts, qcfg.Backoff = cfg.Processing.Workers, cfg.Processing.MaxAttempts, backoff
	qcfg.DeliveryWorkers = cfg.Processing.DeliveryWorkers
	qcfg.PauseLag, qcfg.BusyMaxLag, qcfg.Batch = pauseLag, maxLag, batch
	qcfg.DeliveryBackoff = withJitter(backoff) // sinks.go
	// The scheduled backfills store through the queue made next, counted
	// as received (they bypass the group committer, which counts).
	var queue *jobs.Queue
	if qcfg.Periodic, err = m.schedules(cfg, db, log, func() payhook.Inbox { return met.Backfill(queue) }); err != nil {
		return err
	}
	qcfg.OnDone = met.Done
	queue, err = jobs.New(db, qcfg)
	if err != nil {
		return err
	}
	// Deliveries that arrive together share one durable commit; on
	// PostgreSQL several such commits overlap (SQLite takes one at a time).
	// A committer waits a little after a burst's commit for the
	// deliveries on their way, so that the next one holds as many.
	gcfg := groupcommit.Config{OnCommit: met.Committed, OnCommitTime: met.CommitTook, Gather: true}
	if db.Engine == store.Postgres {
		gcfg.Commits = postgresCommits
	}
	committer := groupcommit.New(queue, gcfg)
	defer committer.Close()
	// Signature checks are counted in memory and flushed every second
	// (reconcile.SignatureCounter says why), the last flush after the
	// listeners shut down.
	sigs := reconcile.NewSignatureCounter(db, cfg.signatureBucket())
	flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
	flushed := make(chan error, 1)
	go func() { flushed <- sigs.Run(flushCtx, time.Second, log.Warn) }()
	defer func() { stopFlush(); <-flushed }()
	// On SQLite, a read held open elsewhere lets the WAL grow without
	// bound and unseen (store.WALWatch): say so while it grows.
	walCtx, stopWAL := context.WithCancel(ctx)
	walDone := make(chan struct{})
	go func() { defer close(walDone); store.WatchWAL(walCtx, db, walCheckEvery, log.Warn) }()
	defer func() { stopWAL(); <-walDone }()
	recv, err := receiver.New(receiver.Config{Sources: sources, Inbox: committer, Logger: log, Now: m.Now,
		OnAnswer: func(source string, o receiver.Outcome, status int, took time.Duration) {
			met.Answered(source, string(o), status, took)
		}, OnSignature: sigs.Observe})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/webhooks/{source}", recv)
	// The console, /api/v1 and /metrics go on adminMux: the main
	// listener's mux, or that of --admin-addr.
	adminMux := mux
	if m.env(*adminAddr, "PAYHOOK_ADMIN_ADDR", "") != "" {
		adminMux = http.NewServeMux()
	}
	uiCtx, stopUI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopUI()
	con, err := m.newConsole(uiCtx, cfg, db, queue, log)
	if err != nil {
		return err
	}
	if con != nil {
		con.Mount(adminMux)
	}
	metricsToken := m.Getenv("PAYHOOK_METRICS_TOKEN")
	if metricsToken == "" {
		metricsToken = cfg.Admin.MetricsToken
	}
	metricsAt := m.env(*adminAddr, "PAYHOOK_ADMIN_ADDR", "")
	if metricsAt == "" {
		metricsAt = m.env(*addr, "PAYHOOK_ADDR", "127.0.0.1:8080")
	}
	metricsH, err := metricsAccess(met.Handler(), metricsToken, con, adminMux != mux, metricsAt, log)
	if err != nil {
		return err
	}
	adminMux.Handle("/metrics", metricsH)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /readyz", &readiness{db: db, now: m.Now, log: log, timeout: readyTimeout, fresh: readyFresh, start: time.Now()})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
	var adminSrv *http.Server
	if adminLn != nil {
		adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		adminSrv = adminServer(adminMux)
	}
	// Jobs must outlive the signal: shutdown drains them with Stop.
	unhold, err := m.startQueue(ctx, queue, log)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	log.Info("payhook serving", "addr", ln.Addr().String(), "db", db.URL, "sources", len(sources))
	for _, s := range sources {
		log.Info("source", "url", base+"/webhooks/"+s.Name, "provider", s.Provider, "environment", s.Environment)
	}
	if con != nil {
		at := base
		if adminLn != nil {
			at = "http://" + adminLn.Addr().String()
		}
		log.Info("console", "url", at+"/console")
	}
	if demoSecret != "" {
		kept := ""
		if secretFile != "" {
			kept = " Its secret is kept in " + secretFile + " for the next start."
		}
		// The command is pasted as printed: quoted for the shell, and
		// saying where its password went.
		list := shellWord(db.URL)
		if raw := m.env(*dbURL, "PAYHOOK_DB", store.DefaultURL); store.Redact(raw) != raw {
			list += "   # with the database's password in place of xxxxx"
		}
		fmt.Fprintf(m.Stdout, "\nNo --config: serving the demo source %q (provider billete, environment test).%s\n"+
			"Send it a signed test event from another terminal:\n\n"+
			"  payhook send --url %s/webhooks/demo --secret %s\n\n"+
			"then list what was stored:\n\n"+
			"  payhook events list --db %s\n\n",
			"demo", kept, base, demoSecret, list)
	}
	if m.OnListen != nil {
		m.OnListen(ln.Addr().String())
	}

	served := make(chan error, 2)
	go func() { served <- srv.Serve(ln) }()
	if adminSrv != nil {
		log.Info("console and API on the admin address", "addr", adminLn.Addr().String())
		if m.OnAdminListen != nil {
			m.OnAdminListen(adminLn.Addr().String())
		}
		go func() { served <- adminSrv.Serve(adminLn) }()
	}
	select {
	case err := <-served:
		srv.Close()
		recv.FlushLogs()
		if adminSrv != nil {
			adminSrv.Close()
		}
		if con != nil {
			con.Close()
		}
		unhold()
		queue.Stop(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Stop accepting, let in-flight deliveries commit and answer, then let
	// running jobs finish.
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	recv.FlushLogs() // the deliveries' log lines held back, told before the process ends
	if adminSrv != nil {
		if aerr := adminSrv.Shutdown(sctx); err == nil {
			err = aerr
		}
	}
	if con != nil {
		con.Close() // its bulk replay, before the database closes
	}
	unhold()
	if qerr := queue.Stop(sctx); err == nil {
		err = qerr
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// serveConfig loads the config file, or makes the demo config (one
// billete source of environment test) when no file is given, with the
// secret kept beside the database dbURL (see loadDemoSecret). It returns
// the demo secret and its file, "" with a config.
func (m *Main) serveConfig(path, dbURL string) (cfg *fileConfig, secret, secretFile string, err error) {
	if path != "" {
		cfg, err := loadConfig(path, m.Getenv)
		return cfg, "", "", err
	}
	secret = m.demoSecret // payhook demo's own, kept nowhere
	if secret == "" {
		if secretFile = m.demoSecretPath(dbURL); secretFile == "" {
			return nil, "", "", fmt.Errorf("database url %q: unsupported scheme (want sqlite:// or postgres://)", dbURL)
		}
		if secret, err = loadDemoSecret(secretFile); err != nil {
			return nil, "", "", err
		}
	}
	return &fileConfig{Sources: []sourceConfig{{Name: "demo", Provider: "billete", Environment: "test",
		Secrets: []string{secret}}}}, secret, secretFile, nil
}

// openDB opens the database named by the flag or PAYHOOK_DB; serve and
// migrate migrate it (migrateAll) once it is checked.
func (m *Main) openDB(ctx context.Context, flagURL string) (*store.DB, error) {
	return store.Open(ctx, m.env(flagURL, "PAYHOOK_DB", store.DefaultURL))
}

// checkDurable refuses a database on which an acknowledged event could
// be lost (store.CheckDurable), unless unsafe (--unsafe-durability or
// PAYHOOK_UNSAFE_DURABILITY=1), which is logged at every start.
func (m *Main) checkDurable(ctx context.Context, db *store.DB, unsafe bool, log *slog.Logger) error {
	unsafe = unsafe || m.Getenv("PAYHOOK_UNSAFE_DURABILITY") == "1"
	err := db.CheckDurable(ctx)
	switch {
	case err != nil && !errors.Is(err, store.ErrNotDurable):
		return err
	case err != nil && !unsafe:
		return fmt.Errorf("%w\nfix the database's settings, or start with --unsafe-durability for a throwaway test or benchmark database", err)
	case err != nil:
		log.Warn("started with --unsafe-durability: a crash can lose events already answered 2xx", "why", err.Error())
	case unsafe:
		log.Warn("started with --unsafe-durability; the database's settings are durable all the same")
	}
	return nil
}

// migrationWaits says why a migration takes long (store.MigrationLockWait).
const migrationWaits = "the migration waits for a lock another transaction holds on its table (a backup such as pg_dump, a long query, an idle transaction): it gives up every second and tries again until it gets it, so that other sessions' statements are not held behind it"

// newerSchema says that the database has migrations of a newer payhook.
const newerSchema = "the database also has migrations of a newer payhook, which this one leaves alone and runs on (an older instance during a rolling upgrade, or a rollback of the binary: docs/deploy.md, Upgrades)"

// migrateAll applies payhook's migrations (calling waiting, if not nil,
// when one waits for a table's lock: store.DB.MigrateWaiting) and the
// job queue's, and returns the names of payhook's it applied and of
// those of a newer payhook the database has (store.DB.NewerMigrations).
func migrateAll(ctx context.Context, db *store.DB, waiting func(migration string, err error)) (applied, newer []string, err error) {
	if applied, err = db.MigrateWaiting(ctx, waiting); err != nil {
		return applied, nil, err
	}
	if err := jobs.Migrate(ctx, db); err != nil {
		return applied, nil, err
	}
	newer, err = db.NewerMigrations(ctx)
	return applied, newer, err
}

const migrateHelp = `Usage: payhook migrate [--db URL]

Creates or updates payhook's schema and the job queue's tables. Safe to run
again and from several instances at once. serve migrates by itself.

On PostgreSQL a migration that waits for a lock another transaction holds
on its table (a pg_dump, a long query) gives up after a second and tries
again a second later until it gets it, saying so on stderr once, so that
the other instances' acks are not queued behind it. Migrations of a newer
payhook found in the database are named, and left alone.

Examples:
  payhook migrate
  payhook migrate --db postgres://payhook:secret@127.0.0.1:5432/payhook`

func (m *Main) migrate(ctx context.Context, args []string) error {
	fs := m.flags("migrate", migrateHelp)
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB; default "+store.DefaultURL+")")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	db, err := m.openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, newer, err := migrateAll(ctx, db, func(name string, err error) {
		fmt.Fprintf(m.Stderr, "payhook: migrate: %s: %s (%v)\n", name, migrationWaits, err)
	})
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(m.Stdout, "migrated %s: no payhook migration to apply; job queue up to date\n", db.URL)
	} else {
		fmt.Fprintf(m.Stdout, "migrated %s: %d payhook migrations applied %v; job queue up to date\n", db.URL, len(applied), applied)
	}
	if len(newer) > 0 {
		fmt.Fprintf(m.Stdout, "%s: %v\n", newerSchema, newer)
	}
	return nil
}

// startQueue starts queue's processing; with holdProcessing set, only
// once that is closed, in the background. unhold gives up a start still
// held and returns once the queue has started or never will, so that a
// Stop after it follows any start.
func (m *Main) startQueue(ctx context.Context, queue *jobs.Queue, log *slog.Logger) (unhold func(), err error) {
	start := func() error { return queue.Start(context.WithoutCancel(ctx)) }
	if m.holdProcessing == nil {
		return func() {}, start()
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-m.holdProcessing:
			if err := start(); err != nil {
				log.Error("processing held, then not started", "err", err)
			}
		case <-quit:
		}
	}()
	return sync.OnceFunc(func() { close(quit); <-done }), nil
}

// listen takes addr (what names the flag that gave it), saying how to
// pick another when it is taken.
func listen(addr, what string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s: the address is in use (another payhook serve?); give %s another: %w", addr, what, err)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s, host:port): %w", addr, what, err)
	}
	return ln, nil
}

// shellWord is s as one word of a POSIX shell: as it is when it holds
// nothing the shell reads (a SQLite path), else single-quoted (a
// PostgreSQL URL's ? and &).
func shellWord(s string) string {
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("@%+=:,./-_", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
