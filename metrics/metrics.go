// Package metrics exposes payhook's Prometheus metrics at /metrics.
//
// The hot path only touches counters and histograms, through the func
// fields the receiver, the group committer, the queue and processing take
// in their Config (OnAnswer, OnCommit, OnDone, OnRateLimited), so that
// those packages know nothing of Prometheus. Gauges that describe the database (queue depth, oldest
// waiting event, outbox backlog, open alerts, reconcile differences) are
// read at scrape time by a Collector. Labels are bounded: configured
// source and sink names, alert kinds, reasons and statuses; never an event
// id.
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// Config says where the scrape-time gauges are read.
type Config struct {
	// DB is the store whose events, alerts and runs are counted at
	// scrape time (required).
	DB *store.DB
	// Outbox, if set, gives the backlog per sink.
	Outbox *outbox.Outbox
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// ScrapeTimeout bounds the queries of one scrape. Default 5s.
	ScrapeTimeout time.Duration
	// Sources, if set, are the configured sources: each event counter
	// (received, backfilled, duplicates, processed, failed) has a series
	// for each from the start, at 0, so that a rule's increase() or rate()
	// sees the first event (payhook serve gives its config's sources).
	Sources []string
	// AlertKinds, if set, are the alert kinds payhook_alerts_open always
	// has a series for, 0 while none is open (payhook serve gives
	// billing.AlertKinds), so that a rule on it reads 0 rather than no
	// data; a kind not listed has a series only while one is open.
	AlertKinds []string
}

// Metrics holds payhook's metrics and their registry.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry

	received   *prometheus.CounterVec
	backfilled *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	ignored    *prometheus.CounterVec
	processed  *prometheus.CounterVec
	failed     *prometheus.CounterVec
	limited    *prometheus.CounterVec
	batch      prometheus.Histogram
	commit     prometheus.Histogram
	ack        *prometheus.HistogramVec
	processing *prometheus.HistogramVec
	endToEnd   *prometheus.HistogramVec
}

// New returns the metrics of one process, registered with the Go runtime
// and process collectors and the database collector over cfg.DB.
func New(cfg Config) (*Metrics, error) {
	if cfg.DB == nil {
		return nil, fmt.Errorf("metrics: no database: %w", payhook.ErrConfig)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ScrapeTimeout <= 0 {
		cfg.ScrapeTimeout = 5 * time.Second
	}
	latency := prometheus.ExponentialBuckets(0.001, 2, 16) // 1 ms .. 33 s
	m := &Metrics{
		cfg: cfg,
		reg: prometheus.NewRegistry(),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_events_received_total",
			Help: "Events stored for the first time (new rows, whether queued or ignored at once)."}, []string{"source"}),
		backfilled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_events_backfilled_total",
			Help: "Events stored for the first time by this process's scheduled backfills (counted in payhook_events_received_total too): " +
				"events the webhooks did not bring."}, []string{"source"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_events_duplicates_total",
			Help: "Deliveries of an event already stored, answered 200 without a new row."}, []string{"source"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_deliveries_rejected_total",
			Help: "Deliveries answered with an error, by reason: signature, malformed, unknown_source (source empty), method, too_large, encoding, unavailable, timeout, other."}, []string{"source", "reason"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_events_ignored_total",
			Help: "Events ignored, at receipt (stage=receive) or by processing (stage=process)."}, []string{"source", "stage"}),
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_events_processed_total",
			Help: "Processing attempts that marked an event processed (a replay counts again)."}, []string{"source"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_events_failed_total",
			Help: "Events marked failed after their last attempt."}, []string{"source"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payhook_provider_rate_limited_total",
			Help: "Reads of an event's resource the provider refused for its rate limit (429): each pauses the source's reads " +
				"for its Retry-After and puts the event off, not counted as an attempt. Another application or instance " +
				"uses the account's share: lower api_rate."}, []string{"source"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "payhook_groupcommit_batch_events",
			Help: "Events per group commit.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100, 200, 500}}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "payhook_groupcommit_commit_duration_seconds",
			Help: "Time of each group commit (its inserts and durable commit), or of a delivery retried alone. " +
				"Its sum's rate near the number of committers (1 on SQLite, 3 on PostgreSQL): they never rest.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16)}), // 0.25 ms .. 8 s
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "payhook_ack_duration_seconds",
			Help: "Time from taking a delivery to answering it.", Buckets: latency}, []string{"source"}),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "payhook_processing_duration_seconds",
			Help: "Time of the processing attempt that ended an event's processing: for an event applied in a batch, the batch's (its sum over its count is not the time per event).", Buckets: latency}, []string{"source"}),
		// An event's end comes seconds after its receipt when all is
		// well, and minutes to hours after it when it waits out a retry's
		// backoff or a backlog: ack's buckets (up to 33 s) put all of those
		// in +Inf, where an SLO on them cannot be read.
		endToEnd: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "payhook_end_to_end_duration_seconds",
			Help:    "Time from an event's receipt to the end of its processing.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}},
			[]string{"source"}),
	}
	for _, source := range cfg.Sources {
		for _, c := range []*prometheus.CounterVec{m.received, m.backfilled, m.duplicates, m.processed, m.failed, m.limited} {
			c.WithLabelValues(source)
		}
	}
	for _, c := range []prometheus.Collector{m.received, m.backfilled, m.duplicates, m.rejected, m.ignored, m.processed, m.failed, m.limited,
		m.batch, m.commit, m.ack, m.processing, m.endToEnd,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&dbCollector{cfg: reading(cfg)}} {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Answered is the receiver's OnAnswer hook.
func (m *Metrics) Answered(source, outcome string, status int, took time.Duration) {
	// Stored, duplicate and ignored are counted by Committed, at the
	// commit: an answer lost after it must not lose the count.
	if status/100 != 2 {
		m.rejected.WithLabelValues(source, reason(status, outcome)).Inc()
	}
	if source != "" {
		m.ack.WithLabelValues(source).Observe(took.Seconds())
	}
}

// reason names a rejection by its status, or "signature" for a delivery
// the receiver's outcome says was refused for its signature (answered 400,
// as a malformed one is): a bounded label.
func reason(status int, outcome string) string {
	if outcome == "signature" {
		return "signature"
	}
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "malformed"
	case http.StatusNotFound:
		return "unknown_source"
	case http.StatusMethodNotAllowed:
		return "method"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return "unavailable"
	case http.StatusUnsupportedMediaType:
		return "encoding"
	case http.StatusRequestTimeout:
		return "timeout"
	}
	return "other"
}

// CommitTook is the group committer's OnCommitTime hook.
func (m *Metrics) CommitTook(took time.Duration) { m.commit.Observe(took.Seconds()) }

// Committed is the group committer's OnCommit hook: it counts the
// events received (new rows), ignored at receipt and duplicates.
func (m *Metrics) Committed(evs []*payhook.Event, inserted []bool) {
	m.batch.Observe(float64(len(evs)))
	for i, ev := range evs {
		switch {
		case i >= len(inserted) || !inserted[i]:
			m.duplicates.WithLabelValues(ev.Source).Inc()
		case ev.Status == payhook.StatusIgnored:
			m.received.WithLabelValues(ev.Source).Inc()
			m.ignored.WithLabelValues(ev.Source, "receive").Inc()
		default:
			m.received.WithLabelValues(ev.Source).Inc()
		}
	}
}

// Backfill returns in, counting the events it stores for the first time
// as received and backfilled: the inbox of serve's scheduled backfills,
// which store without the group committer (whose OnCommit counts the
// deliveries). An event it finds stored already is no delivery: not a
// duplicate.
func (m *Metrics) Backfill(in payhook.Inbox) payhook.Inbox { return backfillInbox{in, m} }

type backfillInbox struct {
	payhook.Inbox
	m *Metrics
}

func (b backfillInbox) Ingest(ctx context.Context, evs []*payhook.Event) ([]bool, error) {
	inserted, err := b.Inbox.Ingest(ctx, evs)
	if err != nil {
		return inserted, err
	}
	for i, ev := range evs {
		if i >= len(inserted) || !inserted[i] {
			continue
		}
		b.m.received.WithLabelValues(ev.Source).Inc()
		b.m.backfilled.WithLabelValues(ev.Source).Inc()
		if ev.Status == payhook.StatusIgnored {
			b.m.ignored.WithLabelValues(ev.Source, "receive").Inc()
		}
	}
	return inserted, nil
}

// RateLimited is processing's OnRateLimited hook.
func (m *Metrics) RateLimited(source string) { m.limited.WithLabelValues(source).Inc() }

// Done is the queue's OnDone hook.
func (m *Metrics) Done(ev *payhook.Event, status payhook.Status, took time.Duration) {
	switch status {
	case payhook.StatusProcessed:
		m.processed.WithLabelValues(ev.Source).Inc()
	case payhook.StatusIgnored:
		m.ignored.WithLabelValues(ev.Source, "process").Inc()
	case payhook.StatusFailed:
		m.failed.WithLabelValues(ev.Source).Inc()
	}
	m.processing.WithLabelValues(ev.Source).Observe(took.Seconds())
	if !ev.ReceivedAt.IsZero() {
		if d := m.cfg.Now().Sub(ev.ReceivedAt); d >= 0 {
			m.endToEnd.WithLabelValues(ev.Source).Observe(d.Seconds())
		}
	}
}

var (
	eventsDesc = prometheus.NewDesc("payhook_events", "Stored events by status, read from the database at scrape time.",
		[]string{"status"}, nil)
	depthDesc  = prometheus.NewDesc("payhook_queue_depth", "Events waiting to be processed (status received).", nil, nil)
	oldestDesc = prometheus.NewDesc("payhook_queue_oldest_age_seconds",
		"Age of the oldest event waiting to be processed; 0 when none waits.", nil, nil)
	backlogDesc = prometheus.NewDesc("payhook_outbox_backlog", "Deliveries pending per sink (for a log sink, facts not told yet too).", []string{"sink"}, nil)
	pausedDesc  = prometheus.NewDesc("payhook_outbox_paused", "Deliveries waiting for their sink to resume.", []string{"sink"}, nil)
	alertsDesc  = prometheus.NewDesc("payhook_alerts_open", "Alerts not acknowledged, by kind.", []string{"kind"}, nil)
	diffsDesc   = prometheus.NewDesc("payhook_reconcile_differences",
		"Differences found by the last reconcile run of each source that finished without an error "+
			"(a failed run compared nothing: see payhook_runs_last_failed).", []string{"source"}, nil)
	uncheckedDesc = prometheus.NewDesc("payhook_reconcile_unchecked",
		"Objects the last reconcile run of each source that finished without an error left unchecked, "+
			"past its cap on retrieves: neither compared nor counted in payhook_reconcile_differences.", []string{"source"}, nil)
	runFailedDesc = prometheus.NewDesc("payhook_runs_last_failed",
		"1 when the last finished backfill or reconcile run of a source ended with an error, else 0.", []string{"kind", "source"}, nil)
	runSuccessDesc = prometheus.NewDesc("payhook_runs_last_success_timestamp_seconds",
		"When the last backfill or reconcile run of a source that finished without an error ended (Unix time).", []string{"kind", "source"}, nil)
	walDesc = prometheus.NewDesc("payhook_sqlite_wal_bytes",
		"Size of the SQLite database's WAL file (SQLite only). Above store.WALLimit (64 MiB) and growing, "+
			"checkpoints cannot empty it: a read transaction held open (a long backup, a sqlite3 shell in BEGIN).", nil, nil)
	scrapeErrDesc = prometheus.NewDesc("payhook_metrics_scrape_errors",
		"Database reads of this scrape that failed (their gauges are missing).", nil, nil)
)

// dbCollector reads the gauges that describe the database at scrape
// time, from cfg.DB.Reader() (see reading).
type dbCollector struct{ cfg Config }

// reading is cfg with its DB's Reader: on SQLite a scrape (a count of
// every event among its queries) then never holds the connection acks
// are written with.
func reading(cfg Config) Config {
	cfg.DB = cfg.DB.Reader()
	return cfg
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{eventsDesc, depthDesc, oldestDesc, backlogDesc, pausedDesc, alertsDesc, diffsDesc,
		uncheckedDesc, runFailedDesc, runSuccessDesc, walDesc, scrapeErrDesc} {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ScrapeTimeout)
	defer cancel()
	errs := 0
	for _, read := range []func(context.Context, chan<- prometheus.Metric) error{
		c.events, c.oldest, c.outbox, c.alerts, c.differences, c.runs,
	} {
		if err := read(ctx, ch); err != nil {
			errs++
		}
	}
	if size, ok := c.cfg.DB.WALBytes(); ok {
		ch <- prometheus.MustNewConstMetric(walDesc, prometheus.GaugeValue, float64(size))
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, float64(errs))
}

func (c *dbCollector) events(ctx context.Context, ch chan<- prometheus.Metric) error {
	counts, err := c.cfg.DB.CountByStatus(ctx)
	if err != nil {
		return err
	}
	for _, s := range []payhook.Status{payhook.StatusReceived, payhook.StatusProcessed, payhook.StatusIgnored, payhook.StatusFailed} {
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(counts[payhook.StatusReceived]))
	return nil
}

func (c *dbCollector) oldest(ctx context.Context, ch chan<- prometheus.Metric) error {
	var id *int64
	if err := c.cfg.DB.SQL.QueryRowContext(ctx,
		`SELECT MIN(id) FROM payhook_events WHERE status = 'received'`).Scan(&id); err != nil {
		return fmt.Errorf("oldest waiting event: %w", err)
	}
	age := 0.0
	if id != nil {
		ev, err := c.cfg.DB.Event(ctx, *id)
		if err != nil {
			return err
		}
		if d := c.cfg.Now().Sub(ev.ReceivedAt); d > 0 {
			age = d.Seconds()
		}
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
	return nil
}

func (c *dbCollector) outbox(ctx context.Context, ch chan<- prometheus.Metric) error {
	if c.cfg.Outbox == nil {
		return nil
	}
	stats, err := c.cfg.Outbox.Stats(ctx)
	if err != nil {
		return err
	}
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(s.Backlog), s.Sink)
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, float64(s.Paused), s.Sink)
	}
	return nil
}

func (c *dbCollector) alerts(ctx context.Context, ch chan<- prometheus.Metric) error {
	rows, err := c.cfg.DB.SQL.QueryContext(ctx,
		`SELECT kind, COUNT(*) FROM payhook_alerts WHERE acknowledged = $1 GROUP BY kind`, false)
	if err != nil {
		return fmt.Errorf("open alerts: %w", err)
	}
	defer rows.Close()
	open := make(map[string]int64, len(c.cfg.AlertKinds))
	for _, kind := range c.cfg.AlertKinds {
		open[kind] = 0
	}
	for rows.Next() {
		var kind string
		var n int64
		if err := rows.Scan(&kind, &n); err != nil {
			return fmt.Errorf("open alerts: %w", err)
		}
		open[kind] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open alerts: %w", err)
	}
	for kind, n := range open {
		ch <- prometheus.MustNewConstMetric(alertsDesc, prometheus.GaugeValue, float64(n), kind)
	}
	return nil
}

func (c *dbCollector) differences(ctx context.Context, ch chan<- prometheus.Metric) error {
	// A run that failed (the provider's API down) counted nothing: its 0
	// would say all agree. The last run that compared is the answer.
	rows, err := c.cfg.DB.SQL.QueryContext(ctx, `SELECT r.source, r.differences, r.unchecked FROM payhook_reconcile_runs r
		WHERE r.id IN (SELECT MAX(id) FROM payhook_reconcile_runs
			WHERE kind = 'reconcile' AND finished_at IS NOT NULL AND error = '' GROUP BY source)`)
	if err != nil {
		return fmt.Errorf("reconcile differences: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var source string
		var n, unchecked int64
		if err := rows.Scan(&source, &n, &unchecked); err != nil {
			return fmt.Errorf("reconcile differences: %w", err)
		}
		ch <- prometheus.MustNewConstMetric(diffsDesc, prometheus.GaugeValue, float64(n), source)
		ch <- prometheus.MustNewConstMetric(uncheckedDesc, prometheus.GaugeValue, float64(unchecked), source)
	}
	return rows.Err()
}

// runs reads, per kind and source, whether the last finished run failed
// and when the last one that succeeded ended.
func (c *dbCollector) runs(ctx context.Context, ch chan<- prometheus.Metric) error {
	rows, err := c.cfg.DB.SQL.QueryContext(ctx, `SELECT r.kind, r.source, r.error FROM payhook_reconcile_runs r
		WHERE r.id IN (SELECT MAX(id) FROM payhook_reconcile_runs WHERE finished_at IS NOT NULL GROUP BY kind, source)`)
	if err != nil {
		return fmt.Errorf("last runs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, source, msg string
		if err := rows.Scan(&kind, &source, &msg); err != nil {
			return fmt.Errorf("last runs: %w", err)
		}
		failed := 0.0
		if msg != "" {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(runFailedDesc, prometheus.GaugeValue, failed, kind, source)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("last runs: %w", err)
	}
	rows.Close()
	ok, err := c.cfg.DB.SQL.QueryContext(ctx, `SELECT kind, source, MAX(finished_at) FROM payhook_reconcile_runs
		WHERE finished_at IS NOT NULL AND error = '' GROUP BY kind, source`)
	if err != nil {
		return fmt.Errorf("last successful runs: %w", err)
	}
	defer ok.Close()
	for ok.Next() {
		var kind, source string
		var at time.Time
		if err := ok.Scan(&kind, &source, store.ScanTime(&at)); err != nil {
			return fmt.Errorf("last successful runs: %w", err)
		}
		ch <- prometheus.MustNewConstMetric(runSuccessDesc, prometheus.GaugeValue, float64(at.UnixNano())/1e9, kind, source)
	}
	return ok.Err()
}
