// Command payhook is the payment-webhook inbox as a server: it receives
// webhooks for the configured sources, stores each event once, processes
// it in the background and lets operators inspect and replay events.
//
//	payhook serve [--config FILE] [--db URL] [--addr HOST:PORT]
//	payhook migrate [--db URL]
//	payhook events list|show|replay ...
//	payhook send [--url URL] [--secret SECRET] ...
//
// Run "payhook help" or "payhook COMMAND --help" for details.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// Main is the whole program with its outside world injected, so tests run
// it in-process exactly as a user would.
type Main struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnListen, if set, is called with the address serve listens on.
	OnListen func(addr string)
	// demoSecret, if set, is the demo source's secret (payhook demo).
	demoSecret string
}

// errUsage marks a command-line mistake: exit status 2.
var errUsage = errors.New("usage")

const usage = `payhook: a payment-webhook inbox that stores every event once and processes it once.

Usage:
  payhook demo                                                     payhook on SQLite against a storm of deliveries
  payhook serve    [--config FILE] [--db URL] [--addr HOST:PORT]   receive and process webhooks
  payhook migrate  [--db URL]                                      create or update the schema
  payhook events   list|show|replay ...                            inspect and replay events
  payhook send     [--url URL] [--secret S] [--type T]             send a signed test event
  payhook sim      run|serve ...                                   a local provider that breaks like real ones
  payhook payments|orders|subscriptions list|show ...              billing state
  payhook ledger   balances                                        balances per currency and account
  payhook alerts   list|ack ...                                    conflicts, failed events
  payhook bench    [--floor] [--db URL]... [--url URL]             measure acks/s, latency and drain against a floor
  payhook help

Environment: PAYHOOK_CONFIG, PAYHOOK_DB, PAYHOOK_ADDR stand for the flags;
PAYHOOK_ADMIN_TOKEN enables the read API (/api/v1/) of serve.
The database defaults to sqlite://payhook.db in the working directory;
--db also takes sqlite:///abs/path.db and postgres://user:pass@host/db.

Run "payhook COMMAND --help" for a command's flags and examples.
`

// Run runs the command line args and returns the exit status.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Now == nil {
		m.Now = time.Now
	}
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return 2
	}
	cmds := map[string]func(context.Context, []string) error{
		"serve":   m.serve,
		"migrate": m.migrate,
		"events":  m.events,
		"send":    m.send,
		"sim":     m.sim,
		"demo":    m.demo,
		"bench":   m.bench,
	}
	maps.Copy(cmds, m.billingCommands())
	var err error
	switch cmd := args[0]; cmd {
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return 0
	default:
		run, ok := cmds[cmd]
		if !ok {
			fmt.Fprintf(m.Stderr, "payhook: unknown command %q\n\n%s", cmd, usage)
			return 2
		}
		err = run(ctx, args[1:])
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(m.Stderr, "payhook: %v\n", err)
		return 2
	default:
		fmt.Fprintf(m.Stderr, "payhook: %v\n", err)
		return 1
	}
}

// flags returns a FlagSet for a command whose --help prints the text.
func (m *Main) flags(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("payhook "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.Stderr, "%s\nFlags:\n", help)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, turning flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %s: %v", errUsage, fs.Name(), err)
	}
	return nil
}

// env returns the flag value if set, else the environment variable, else def.
func (m *Main) env(flagValue, name, def string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := m.Getenv(name); v != "" {
		return v
	}
	return def
}

func (m *Main) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
