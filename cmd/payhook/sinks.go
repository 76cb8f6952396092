package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// sinkConfig is one entry of sinks: where the facts billing tells go
// (package outbox). Every string may be given as ${VAR}.
type sinkConfig struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"` // http | smtp | log
	// Facts are the fact types it takes, "*" patterns ("subscription.*");
	// none means all.
	Facts []string `yaml:"facts"`
	// http: the receiver and payhook's Standard Webhooks secret (whsec_...).
	URL    string `yaml:"url"`
	Secret string `yaml:"secret"`
	// smtp: the server, sender and recipients.
	SMTP smtpConfig `yaml:"smtp"`
	From string     `yaml:"from"`
	To   []string   `yaml:"to"`
	// AllowPrivate lets url or smtp.addr reach loopback, private and
	// link-local addresses (tests, an application on the same host).
	AllowPrivate bool `yaml:"allow_private"`
}

type smtpConfig struct {
	Addr     string `yaml:"addr"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	StartTLS bool   `yaml:"starttls"`
}

// defaultSink is the sink when none is configured: a log line per fact.
var defaultSink = sinkConfig{Name: "log", Type: "log", Facts: []string{"*"}}

func (s *sinkConfig) label(i int) string {
	if s.Name != "" {
		return fmt.Sprintf("sink %q", s.Name)
	}
	return fmt.Sprintf("sink #%d", i+1)
}

// expand expands the ${VAR} references of every string of s, and returns
// the error of each field that failed.
func (s *sinkConfig) expand(getenv func(string) string) []error {
	var errs []error
	for _, f := range []struct {
		key string
		v   *string
	}{{"name", &s.Name}, {"type", &s.Type}, {"url", &s.URL}, {"secret", &s.Secret}, {"smtp.addr", &s.SMTP.Addr},
		{"smtp.username", &s.SMTP.Username}, {"smtp.password", &s.SMTP.Password}, {"from", &s.From}} {
		errs = expandField(errs, f.v, f.key, getenv)
	}
	for i := range s.To {
		errs = expandField(errs, &s.To[i], fmt.Sprintf("to %d", i+1), getenv)
	}
	for i := range s.Facts {
		errs = expandField(errs, &s.Facts[i], fmt.Sprintf("facts %d", i+1), getenv)
	}
	return errs
}

// build checks s and returns its sink. Errors do not wrap ErrConfig; the
// caller names the sink.
func (s *sinkConfig) build(log *slog.Logger) (outbox.Sink, error) {
	if s.Name == "" {
		return nil, errors.New("name is required")
	}
	if !sourceName.MatchString(s.Name) {
		return nil, fmt.Errorf("name %q must be letters, digits, '_', '.' or '-', starting with a letter or digit", s.Name)
	}
	notFor := func(keys ...string) error {
		set := map[string]bool{"url": s.URL != "", "secret": s.Secret != "", "smtp": s.SMTP != smtpConfig{},
			"from": s.From != "", "to": len(s.To) > 0, "allow_private": s.AllowPrivate}
		for _, k := range keys {
			if set[k] {
				return fmt.Errorf("%s is not a key of a sink of type %s", k, s.Type)
			}
		}
		return nil
	}
	switch s.Type {
	case "http":
		if err := notFor("smtp", "from", "to"); err != nil {
			return nil, err
		}
		if s.URL == "" || s.Secret == "" {
			return nil, errors.New("a sink of type http needs url and secret")
		}
		return outbox.NewHTTP(outbox.HTTPConfig{URL: s.URL, Secret: s.Secret, AllowPrivate: s.AllowPrivate})
	case "smtp":
		if err := notFor("url", "secret"); err != nil {
			return nil, err
		}
		return outbox.NewSMTP(outbox.SMTPConfig{Addr: s.SMTP.Addr, Username: s.SMTP.Username, Password: s.SMTP.Password,
			StartTLS: s.SMTP.StartTLS, From: s.From, To: s.To, AllowPrivate: s.AllowPrivate})
	case "log":
		if err := notFor("url", "secret", "smtp", "from", "to", "allow_private"); err != nil {
			return nil, err
		}
		return outbox.Log{Logger: log}, nil
	}
	return nil, fmt.Errorf("type %q is none of http, smtp, log", s.Type)
}

// validateSinks checks every sink as serve would build it. Errors wrap
// payhook.ErrConfig and name the sink.
func (c *fileConfig) validateSinks() error {
	_, err := c.outbox(nil, slog.New(slog.DiscardHandler), nil)
	return err
}

// outbox returns the Outbox of c's sinks on db (the default log sink when
// none is configured); a sink that answers 410 Gone raises a sink_paused
// alert. With db nil it only checks the sinks.
func (c *fileConfig) outbox(db *store.DB, log *slog.Logger, now func() time.Time) (*outbox.Outbox, error) {
	sinks := c.Sinks
	if len(sinks) == 0 {
		sinks = []sinkConfig{defaultSink}
	}
	var box *outbox.Outbox
	if db != nil {
		if now == nil {
			now = time.Now
		}
		var err error
		box, err = outbox.New(outbox.Config{DB: db, Logger: log, Now: now,
			OnPause: func(ctx context.Context, tx *sql.Tx, sink, reason string) error {
				return billing.RaiseAlert(ctx, billing.Wrap(db, tx, now()), outbox.AlertSinkPaused, sink, reason)
			}})
		if err != nil {
			return nil, err
		}
	}
	seen := map[string]int{}
	for i := range sinks {
		s := &sinks[i]
		sink, err := s.build(log)
		if j, dup := seen[strings.ToLower(s.Name)]; err == nil && dup {
			err = fmt.Errorf("name %q is already used by sink #%d", s.Name, j+1)
		}
		if err == nil {
			for _, p := range s.Facts {
				if !validPattern(p) {
					err = fmt.Errorf("facts: %q is no fact type or pattern (such as order.paid, subscription.*, *)", p)
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", c.prefix(), s.label(i), wrapConfig(err))
		}
		seen[strings.ToLower(s.Name)] = i
		if box != nil {
			if err := box.Add(s.Name, s.Facts, sink); err != nil {
				return nil, fmt.Errorf("%s%s: %w", c.prefix(), s.label(i), err)
			}
		}
	}
	return box, nil
}

// validPattern: "*", a known type, or a prefix of known types and ".*".
func validPattern(p string) bool {
	if p == "*" {
		return true
	}
	prefix, wild := strings.CutSuffix(p, ".*")
	for _, t := range outbox.Types {
		if t == p || (wild && strings.HasPrefix(t, prefix+".")) {
			return true
		}
	}
	return false
}

// wrapConfig makes err wrap payhook.ErrConfig once.
func wrapConfig(err error) error {
	if errors.Is(err, payhook.ErrConfig) {
		return err
	}
	return fmt.Errorf("%v: %w", err, payhook.ErrConfig)
}

// withJitter spreads the retries of the sinks' deliveries: each delay of
// backoff, from 3/4 to 5/4 of it, so that a receiver back from an outage
// is not hit by every retry at once.
func withJitter(backoff func(int) time.Duration) func(int) time.Duration {
	return func(attempt int) time.Duration {
		d := backoff(attempt)
		return d*3/4 + rand.N(d/2+1)
	}
}
