package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

// scheduleConfig is a source's reconcile: {every, window}: how often its
// provider is reconciled, and how far back each run looks.
type scheduleConfig struct {
	// Every is the interval between two runs, e.g. 1h (required, at
	// least 1s).
	Every string `yaml:"every"`
	// Window is how far back from its period each run looks; default
	// three times Every, so that a run that failed is covered by the
	// next ones.
	Window string `yaml:"window"`
}

// set reports whether the source has a schedule.
func (c *scheduleConfig) set() bool { return c.Every != "" || c.Window != "" }

// parse returns the schedule's interval and window.
func (c *scheduleConfig) parse() (every, window time.Duration, err error) {
	every, err = time.ParseDuration(c.Every)
	if err != nil || every < time.Second {
		return 0, 0, fmt.Errorf("reconcile: every %q is not a duration of at least 1s, such as 1h", c.Every)
	}
	window = 3 * every
	if c.Window != "" {
		if window, err = time.ParseDuration(c.Window); err != nil || window <= 0 {
			return 0, 0, fmt.Errorf("reconcile: window %q is not a positive duration, such as 3h", c.Window)
		}
	}
	return every, window, nil
}

// silence parses the source's silence; 0 when off.
func (s *sourceConfig) silence() (time.Duration, error) {
	if s.Silence == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s.Silence)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("silence %q is not a duration of at least 1s, such as 6h", s.Silence)
	}
	return d, nil
}

// signatureAlert parses the source's signature_failures and
// signature_window: the refused signatures within the window that raise
// signature_failures (default reconcile.DefaultSignatureFailures in
// reconcile.DefaultSignatureWindow); limit 0 when off.
func (s *sourceConfig) signatureAlert() (limit int, window time.Duration, err error) {
	limit, window = reconcile.DefaultSignatureFailures, reconcile.DefaultSignatureWindow
	switch s.SignatureFailures {
	case "":
	case "off", "0":
		limit = 0
	default:
		if limit, err = strconv.Atoi(s.SignatureFailures); err != nil || limit < 1 {
			return 0, 0, fmt.Errorf("signature_failures %q is neither a count of at least 1, such as 20, nor off", s.SignatureFailures)
		}
	}
	if s.SignatureWindow != "" {
		if window, err = time.ParseDuration(s.SignatureWindow); err != nil || window < time.Second {
			return 0, 0, fmt.Errorf("signature_window %q is not a duration of at least 1s, such as 5m", s.SignatureWindow)
		}
	}
	return limit, window, nil
}

// signatureBucket is the span the signature counts of serve are kept in:
// a tenth of the shortest signature_window, between 1s and 10s.
func (c *fileConfig) signatureBucket() time.Duration {
	bucket := 10 * time.Second
	for i := range c.Sources {
		if limit, window, err := c.Sources[i].signatureAlert(); err == nil && limit > 0 {
			bucket = min(bucket, window/10)
		}
	}
	return max(bucket, time.Second)
}

// schedules returns the periodic jobs of the sources with a reconcile
// schedule: one job per source backfills the window ending now that
// starts window before the period, storing what is missing through
// inbox(), then reconciles the same window.
func (m *Main) schedules(cfg *fileConfig, db *store.DB, log *slog.Logger, inbox func() payhook.Inbox) ([]jobs.Periodic, error) {
	var out []jobs.Periodic
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		if silence, err := s.silence(); err != nil {
			return nil, fmt.Errorf("%s%s: %w", cfg.prefix(), s.label(i), err)
		} else if silence > 0 {
			// Checked four times per silence, at least every minute.
			name := s.Name
			out = append(out, jobs.Periodic{Name: "silence:" + name, Every: min(max(silence/4, time.Second), time.Minute),
				Run: func(ctx context.Context, period time.Time) error {
					silent, err := reconcile.CheckSilence(ctx, db, name, silence, m.Now())
					if silent {
						log.Warn("source silent", "source", name, "silence", silence)
					}
					return err
				}})
		}
		if limit, window, err := s.signatureAlert(); err != nil {
			return nil, fmt.Errorf("%s%s: %w", cfg.prefix(), s.label(i), err)
		} else if limit > 0 {
			// Checked five times per window, at least every minute.
			name := s.Name
			out = append(out, jobs.Periodic{Name: "signatures:" + name, Every: min(max(window/5, time.Second), time.Minute),
				Run: func(ctx context.Context, period time.Time) error {
					burst, err := reconcile.CheckSignatures(ctx, db, name, limit, window, m.Now())
					if burst {
						log.Warn("source refusing signatures", "source", name, "limit", limit, "window", window)
					}
					return err
				}})
		}
		if !s.Reconcile.set() {
			continue
		}
		every, window, err := s.Reconcile.parse()
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", cfg.prefix(), s.label(i), err)
		}
		client, err := provider.NewClient(s.Provider, adapter.ClientConfig{BaseURL: s.APIURL, Key: s.APIKey, APIVersion: s.APIVersion})
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", cfg.prefix(), s.label(i), err)
		}
		name, version := s.Name, s.APIVersion
		a, _ := provider.Lookup(s.Provider)
		src := payhook.Source{Name: s.Name, Provider: s.Provider, Environment: s.Environment}
		out = append(out, jobs.Periodic{Name: "reconcile:" + name, Every: every, Run: func(ctx context.Context, period time.Time) error {
			// A backfill first: what it brings is not reported missing.
			// Failed, it does not stop the comparison.
			var backfillErr error
			if lister, ok := client.(adapter.EventLister); ok && a.Envelope != nil {
				sum, err := reconcile.Backfill(ctx, reconcile.BackfillConfig{
					DB: db, Inbox: inbox(), Source: src, Envelope: a.Envelope, Lister: lister,
					From: period.Add(-window), Logger: log, Now: m.Now,
				})
				if backfillErr = err; err != nil {
					log.Warn("scheduled backfill failed; reconciling all the same", "source", name, "period", period, "err", err)
				} else {
					log.Info("scheduled backfill", "source", name, "period", period, "listed", sum.Listed, "new", sum.New)
				}
				if sum != nil && sum.New > 0 {
					// The workers process what it stored after it: until
					// they have, it is missing here all the same.
					if err := waitBackfilled(ctx, db, name, backfillSettle); err != nil {
						return errors.Join(backfillErr, err)
					}
				}
			}
			rep, err := reconcile.Reconcile(ctx, reconcile.Config{
				DB: db, Source: name, Client: client, Since: period.Add(-window), Now: m.Now, APIVersion: version, Logger: log,
			})
			if err != nil {
				return errors.Join(backfillErr, err)
			}
			level := slog.LevelInfo
			if len(rep.Differences) > 0 {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "scheduled reconcile", "source", name, "period", period, "run", rep.Run,
				"listed", rep.Listed, "unchecked", rep.Unchecked, "differences", len(rep.Differences))
			return backfillErr
		}})
	}
	return out, nil
}

// backfillSettle is how long a scheduled reconcile waits for the events
// its backfill stored while their number does not fall: one that cannot be
// processed yet (a refund of a payment payhook has not seen) is reported
// after it. As long as the workers make progress it waits, however large
// the backfill.
const backfillSettle = 30 * time.Second

// waitBackfilled waits until no backfilled event of the source is still
// waiting to be processed, or until their number has not fallen for
// settle.
func waitBackfilled(ctx context.Context, db *store.DB, source string, settle time.Duration) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, since := -1, time.Now()
	for {
		var n int
		if err := db.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM payhook_events
			WHERE status = 'received' AND source = $1 AND received_via = $2`, source, string(payhook.ViaBackfill)).Scan(&n); err != nil {
			return fmt.Errorf("wait for the backfilled events of %s: %w", source, err)
		}
		switch {
		case n == 0:
			return nil
		case last < 0 || n < last:
			last, since = n, time.Now()
		case time.Since(since) >= settle:
			return nil // no progress: reconcile all the same
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
