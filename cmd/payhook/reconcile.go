package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/reconcile"
	"github.com/payhook/payhook/store"
)

const reconcileHelp = `Usage: payhook reconcile --source S [--since 24h] [--json] [--config FILE] [--db URL]
       payhook reconcile runs [--json] [--db URL]

Lists the provider's recent payments, refunds, disputes and subscriptions
(those created since --since ago) and compares them with payhook's billing
state: missing here, missing at the provider, another status, amount,
currency or refunded amount, another subscription status or plan. An
amount is shown in minor units after its currency (refunded_amount EUR 0 →
EUR 1000; here_currency and provider_currency in --json). Each
difference is a row and an alert reconcile_difference (once per
difference); a later run that ends without error and no longer finds it
acknowledges the alert. Nothing is corrected: each row says which events would
correct it, through a backfill or a replay. Exit status 1 when differences
remain, 0 when none.

The source's api_url and api_key (and api_version, if pinned) come from the
config file, read as serve reads it (--config or PAYHOOK_CONFIG; --db or
PAYHOOK_DB).

"reconcile runs" lists the recorded runs of backfills and reconciliations,
scheduled (a source's reconcile: {every, window}) or not.

Examples:
  payhook reconcile --source stripe --since 24h
  payhook reconcile --source shop --since 72h --json
  payhook reconcile runs --json`

// errDifferences: reconcile found differences (exit status 1).
var errDifferences = errors.New("differences remain")

func (m *Main) reconcile(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "runs" {
		return m.reconcileRuns(ctx, args[1:])
	}
	fs := m.flags("reconcile", reconcileHelp)
	configPath := fs.String("config", "", "YAML file listing the sources (env PAYHOOK_CONFIG)")
	dbURL := fs.String("db", "", "database URL (env PAYHOOK_DB; default "+store.DefaultURL+")")
	source := fs.String("source", "", "the source to reconcile (required)")
	since := fs.Duration("since", reconcile.DefaultSince, "compare what was created this long ago or later")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *source == "" {
		return fmt.Errorf("%w: reconcile: --source is required (see payhook reconcile --help)", errUsage)
	}
	if *since <= 0 {
		return fmt.Errorf("%w: reconcile: --since must be a positive duration, not %v", errUsage, *since)
	}
	src, client, err := m.sourceClient(*configPath, *source)
	if err != nil {
		return err
	}
	db, err := m.openExisting(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	now := m.Now()
	rep, err := reconcile.Reconcile(ctx, reconcile.Config{
		DB: db, Source: src.Name, Client: client, Since: now.Add(-*since), Now: m.Now, APIVersion: src.APIVersion,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		err = m.printJSON(rep)
	} else {
		err = printReport(m.Stdout, rep, runFlags(*configPath, *dbURL))
	}
	if err != nil {
		return err
	}
	if n := len(rep.Differences); n > 0 {
		// Events stored but not processed yet (no serve running, or a
		// backlog) read as differences that no backfill fixes: say so.
		if waiting, err := db.ListEvents(ctx, store.Filter{Source: src.Name, Status: payhook.StatusReceived, Limit: 1}); err == nil && len(waiting) > 0 {
			// The command to paste names the database this run read, as
			// serve's hints do: without it, it would list the default one.
			fmt.Fprintf(m.Stderr, "note: events of source %s are still waiting to be processed (payhook events list --source %s --status received%s): "+
				"a running payhook serve processes them; reconcile again after\n", src.Name, src.Name, runFlags("", *dbURL))
		}
		return fmt.Errorf("reconcile %s: %d %s: %w", src.Name, n, plural(n, "difference"), errDifferences)
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// sourceClient returns the source called name of the config file (the
// flag, else PAYHOOK_CONFIG) and its API client. Errors wrap
// payhook.ErrConfig.
func (m *Main) sourceClient(configPath, name string) (*sourceConfig, adapter.Client, error) {
	path := m.env(configPath, "PAYHOOK_CONFIG", "")
	if path == "" {
		return nil, nil, fmt.Errorf("%w: no config file: give --config or PAYHOOK_CONFIG (the source's api_url and api_key come from it)", errUsage)
	}
	cfg, err := loadConfig(path, m.Getenv)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		names = append(names, s.Name)
		if s.Name != name {
			continue
		}
		if s.APIURL == "" {
			return nil, nil, fmt.Errorf("%ssource %q has no api_url and api_key: payhook cannot read its provider: %w", cfg.prefix(), name, payhook.ErrConfig)
		}
		client, err := provider.NewClient(s.Provider, adapter.ClientConfig{BaseURL: s.APIURL, Key: s.APIKey, APIVersion: s.APIVersion})
		if err != nil {
			return nil, nil, fmt.Errorf("%ssource %q: %w", cfg.prefix(), name, err)
		}
		return s, client, nil
	}
	return nil, nil, fmt.Errorf("%sno source %q (sources: %s): %w", cfg.prefix(), name, strings.Join(names, ", "), payhook.ErrConfig)
}

// runFlags are the --config and --db a command was given, to add to a
// payhook command it prints for pasting: without them, the pasted command
// would read the default config and database. A password in the URL is
// hidden.
func runFlags(configPath, dbURL string) string {
	var s string
	if configPath != "" {
		s += " --config " + configPath
	}
	if dbURL != "" {
		s += " --db " + store.Redact(dbURL)
	}
	return s
}

// printReport writes rep for people: one row per difference, whose fix,
// when it is a payhook backfill, ends with flags (runFlags).
func printReport(w io.Writer, rep *reconcile.Report, flags string) error {
	var listed []string
	for _, k := range adapter.ObjectKinds {
		listed = append(listed, fmt.Sprintf("%d %s", rep.Listed[k], plural(rep.Listed[k], k)))
	}
	fmt.Fprintf(w, "source %s since %s: listed %s at the provider\n", rep.Source, rep.Since.Format(time.RFC3339), strings.Join(listed, ", "))
	var unchecked []string
	for _, k := range adapter.ObjectKinds {
		if n := rep.Unchecked[k]; n > 0 {
			unchecked = append(unchecked, fmt.Sprintf("%d %s", n, plural(n, k)))
		}
	}
	if len(unchecked) > 0 {
		fmt.Fprintf(w, "unchecked: %s payhook stored in the window and the provider did not list, past the run's cap of retrieves (neither compared nor reported)\n",
			strings.Join(unchecked, ", "))
	}
	if len(rep.Differences) == 0 {
		_, err := fmt.Fprintln(w, "no differences")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tREF\tWHAT\tFIELDS (here → provider)\tFIX")
	for _, d := range rep.Differences {
		var fields []string
		for _, f := range d.Fields {
			fields = append(fields, fmt.Sprintf("%s %s → %s", f.Name, orDash(f.HereShown()), orDash(f.ProviderShown())))
		}
		fix := d.Fix
		if strings.Contains(fix, "payhook backfill ") {
			fix += flags
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Kind, d.Ref, d.What, orDash(strings.Join(fields, "; ")), fix)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reconcileRuns lists the recorded runs, newest first.
func (m *Main) reconcileRuns(ctx context.Context, args []string) error {
	fs := m.flags("reconcile runs", reconcileHelp)
	source := fs.String("source", "", "only the runs of this source")
	kind := fs.String("kind", "", "only the runs of this kind: backfill or reconcile")
	var limit int
	limitVar(fs, &limit, "runs, newest first")
	return m.runView(ctx, fs, args, view{
		check: func() error {
			if *kind != "" && *kind != string(store.RunBackfill) && *kind != string(store.RunReconcile) {
				return fmt.Errorf("%w: reconcile runs: --kind %q is neither backfill nor reconcile", errUsage, *kind)
			}
			return checkLimit(limit)
		},
		load: func(db *store.DB, _ string) (any, error) {
			runs, err := db.Runs(ctx, store.RunFilter{Source: *source, Kind: store.RunKind(*kind), Limit: limit})
			if runs == nil && err == nil {
				runs = []*store.Run{}
			}
			return runs, err
		},
		print: func(w io.Writer, v any) error {
			runs := v.([]*store.Run)
			if len(runs) == 0 {
				_, err := fmt.Fprintln(w, "no runs recorded")
				return err
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tSOURCE\tSTARTED\tFINISHED\tLISTED\tNEW\tKNOWN\tREFUSED\tDIFFERENCES\tUNCHECKED\tERROR")
			for _, r := range runs {
				finished := "running"
				if r.Finished() {
					finished = r.FinishedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", r.ID, r.Kind, r.Source,
					r.StartedAt.Format(time.RFC3339), finished, r.Listed, r.New, r.Known, r.Refused, r.Differences, r.Unchecked, orDash(r.Error))
			}
			return tw.Flush()
		},
	})
}
