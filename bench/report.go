package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Ratios are a result's figures divided by the floor's of the same phase.
type Ratios struct {
	// AcksPerSec is the share of the floor's acknowledgements per second.
	AcksPerSec float64 `json:"acks_per_sec"`
	// The latencies as multiples of the floor's.
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	// Drain is the drain as a multiple of the time the floor took to
	// answer the same deliveries; 0 without a drain.
	Drain float64 `json:"drain,omitempty"`
}

// Compare sets r.VsFloor to r's figures divided by floor's.
func (r *Result) Compare(floor *Result) {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	d := func(a, b time.Duration) float64 { return div(float64(a), float64(b)) }
	r.VsFloor = &Ratios{
		AcksPerSec: div(r.AcksPerSec, floor.AcksPerSec),
		P50:        d(r.Latency.P50, floor.Latency.P50), P90: d(r.Latency.P90, floor.Latency.P90),
		P99: d(r.Latency.P99, floor.Latency.P99), P999: d(r.Latency.P999, floor.Latency.P999),
		Drain: d(r.Drain, floor.Elapsed),
	}
}

// Load names the phase's load: "c=64" or "rate=1000/s".
func (r *Result) Load() string {
	if r.Concurrency > 0 {
		return fmt.Sprintf("c=%d", r.Concurrency)
	}
	return fmt.Sprintf("rate=%g/s", r.Rate)
}

// WriteText writes results as one table per load, with each figure's
// ratio to the floor where Compare was called.
func WriteText(w io.Writer, results []*Result) error {
	var tw *tabwriter.Writer
	last := ""
	for _, r := range results {
		if r.Load() != last {
			if tw != nil {
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			last = r.Load()
			fmt.Fprintf(w, "\n%s, %s, %d events + %d duplicates\n", last, r.Provider, r.Events, r.Duplicates)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "target\tacks/s\tp50\tp90\tp99\tp99.9\terrors\tin commits\tstored\tdrain\tprocessed/s\t")
		}
		q := r.VsFloor
		if q == nil {
			q = &Ratios{}
		}
		drain, rate, st := "-", "-", "-"
		if r.Stored >= 0 {
			st = fmt.Sprint(r.Stored)
		}
		if r.Drain > 0 {
			drain = ms(r.Drain) + ratio(q.Drain, "×")
			rate = fmt.Sprintf("%.0f", float64(r.Stored)/r.Drain.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%.0f%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Target,
			r.AcksPerSec, ratio(q.AcksPerSec, ""), ms(r.Latency.P50)+ratio(q.P50, "×"), ms(r.Latency.P90)+ratio(q.P90, "×"),
			ms(r.Latency.P99)+ratio(q.P99, "×"), ms(r.Latency.P999)+ratio(q.P999, "×"), ErrorsText(r.Errors), InCommitsText(r), st, drain, rate)
	}
	if tw == nil {
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if slices.ContainsFunc(results, func(r *Result) bool { return r.VsFloor != nil }) {
		if _, err := fmt.Fprintln(w, "\nIn parentheses, against the floor in the same load: acks/s as a share of its acks/s; latencies as\n"+
			"multiples of its latencies; the drain as a multiple of the time it took to answer the same deliveries."); err != nil {
			return err
		}
	}
	if slices.ContainsFunc(results, func(r *Result) bool { return r.InCommits > 0 }) {
		if _, err := fmt.Fprintln(w, "In commits: seconds the target spent in its group commits per second of the load; its committers\n"+
			"(1 on SQLite, 3 on PostgreSQL) never rest near their number: only bigger batches or cheaper commits ack more."); err != nil {
			return err
		}
	}
	for _, r := range results {
		if r.HeldWaiting > 0 {
			if _, err := fmt.Fprintf(w, "Processing alone, %s %s: %s (%s); processing was held until every delivery was answered.\n",
				r.Target, r.Load(), processedAloneText(r), aloneVsAcksText(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// processedAloneText says how fast r's held events were processed once
// released (Target.Release): "4512 events/s, 20000 waiting".
func processedAloneText(r *Result) string {
	return fmt.Sprintf("%.0f events/s, %d waiting", r.ProcessedAlone, r.HeldWaiting)
}

// aloneVsAcksText compares r's processing alone with its acks: "0.52× its
// acks/s".
func aloneVsAcksText(r *Result) string {
	if r.AcksPerSec <= 0 {
		return "no acks to compare"
	}
	return fmt.Sprintf("%.2f× its acks/s", r.ProcessedAlone/r.AcksPerSec)
}

// InCommitsText is r.InCommits in seconds per second, "-" when not
// measured.
func InCommitsText(r *Result) string {
	if r.InCommits <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s/s", r.InCommits)
}

func ratio(q float64, suffix string) string {
	if q == 0 {
		return ""
	}
	if suffix == "" {
		return fmt.Sprintf(" (%.1f%%)", 100*q)
	}
	return fmt.Sprintf(" (%.1f%s)", q, suffix)
}

// ms formats d in milliseconds, or in seconds from 10 s on.
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// ErrorsText is a result's errors by status, "400×50,transport×2", or
// "0".
func ErrorsText(e map[string]int) string {
	if len(e) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, e[k]))
	}
	return strings.Join(parts, ",")
}
