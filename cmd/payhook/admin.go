package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/payhook/payhook/console"
	"github.com/payhook/payhook/internal/signing"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/jobs/jobsui"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// adminConfig is the config file's admin section: who may use the console
// and /api/v1.
type adminConfig struct {
	// Token is the admin token (at least 32 bytes); PAYHOOK_ADMIN_TOKEN
	// sets it too, and wins.
	Token string `yaml:"token"`
	// Users log in with their name and password.
	Users []adminUser `yaml:"users"`
	// TrustProxy trusts X-Forwarded-Proto and X-Forwarded-For from the
	// proxy in front of payhook (default false).
	TrustProxy bool `yaml:"trust_proxy"`
	// MetricsToken, if set (at least 32 bytes), is the bearer token that
	// /metrics takes; PAYHOOK_METRICS_TOKEN sets it too, and wins.
	MetricsToken string `yaml:"metrics_token"`
}

// adminUser is a console user: a name and the bcrypt hash of the password
// (make one with: htpasswd -nbBC 12 NAME PASSWORD, the part after ':').
type adminUser struct {
	Name string `yaml:"name"`
	Hash string `yaml:"hash"`
}

func (a *adminConfig) expand(getenv func(string) string) []error {
	return expandField(expandField(nil, &a.Token, "token", getenv), &a.MetricsToken, "metrics_token", getenv)
}

// newConsole builds the console (and /api/v1 and the jobs UI) when an
// admin token or users are configured; it returns nil when neither is.
// ctx bounds the jobs UI's background work.
func (m *Main) newConsole(ctx context.Context, cfg *fileConfig, db *store.DB, queue *jobs.Queue, log *slog.Logger) (*console.Console, error) {
	token := m.Getenv("PAYHOOK_ADMIN_TOKEN")
	if token == "" {
		token = cfg.Admin.Token
	}
	if token == "" && len(cfg.Admin.Users) == 0 {
		log.Info("console and read API disabled: set PAYHOOK_ADMIN_TOKEN (at least 32 bytes) or admin.users to serve " +
			console.Prefix + " and /api/v1")
		return nil, nil
	}
	var users []console.User
	for _, u := range cfg.Admin.Users {
		users = append(users, console.User{Name: u.Name, Hash: u.Hash})
	}
	var sources []console.Source
	for _, s := range cfg.Sources {
		cs := console.Source{Name: s.Name, Provider: s.Provider, Environment: s.Environment}
		for _, secret := range s.Secrets {
			cs.Fingerprints = append(cs.Fingerprints, signing.Fingerprint(secret))
		}
		sources = append(sources, cs)
	}
	ui, err := jobsui.Handler(ctx, queue, console.JobsPrefix, log)
	if err != nil {
		return nil, err
	}
	c, err := console.New(console.Config{DB: db, Queue: queue, Sources: sources, Token: token, Users: users,
		TrustProxy: cfg.Admin.TrustProxy, Jobs: ui, Logger: log, Now: m.Now,
		Resend: func(ctx context.Context, id int64) error {
			return resendDelivery(ctx, db, queue, id, m.Now())
		}})
	if err != nil {
		return nil, fmt.Errorf("%s%w", cfg.prefix(), err)
	}
	return c, nil
}

// adminServer is the optional second listener of --admin-addr.
func adminServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// resendDelivery makes a delivery pending again and enqueues its job, in
// one transaction.
func resendDelivery(ctx context.Context, db *store.DB, q *jobs.Queue, id int64, now time.Time) error {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("resend delivery %d: %w", id, err)
	}
	defer tx.Rollback()
	if err := outbox.ResendTx(ctx, db, tx, id, now); err != nil {
		return err
	}
	if err := q.EnqueueDeliveriesTx(ctx, tx, []int64{id}, true); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("resend delivery %d: commit: %w", id, err)
	}
	return nil
}
