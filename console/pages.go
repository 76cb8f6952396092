package console

import (
	"fmt"

	"github.com/payhook/payhook"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// ListSize is how many rows the billing lists show.
const ListSize = 200

type listData[T any] struct {
	Rows    []T
	Sources []string
	// Statuses are the statuses the list can filter on.
	Statuses []string
}

func (c *Console) sourceNames() []string {
	var out []string
	for _, s := range c.cfg.Sources {
		out = append(out, s.Name)
	}
	return out
}

// oneOf checks an optional enumerated parameter.
func oneOf(r *http.Request, name string, allowed []string) (string, error) {
	v := r.URL.Query().Get(name)
	if v != "" && !slices.Contains(allowed, v) {
		return "", invalid("%s %q: want one of %v", name, v, allowed)
	}
	return v, nil
}

func (c *Console) payments(w http.ResponseWriter, r *http.Request, v *view) error {
	status, err := oneOf(r, "status", billing.PaymentStatuses)
	if err != nil {
		return err
	}
	ps, err := billing.ListPayments(r.Context(), c.reads, billing.PaymentFilter{
		Source: r.URL.Query().Get("source"), Status: status, OrderID: r.URL.Query().Get("order_id"), Limit: ListSize})
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Payments", "payments", listData[billing.PaymentView]{Rows: ps, Sources: c.sourceNames(), Statuses: billing.PaymentStatuses}
	return nil
}

func (c *Console) payment(w http.ResponseWriter, r *http.Request, v *view) error {
	p, err := billing.LookupPayment(r.Context(), c.reads, r.PathValue("source"), r.PathValue("ref"))
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Payment "+p.Ref, "payment", p
	return nil
}

func (c *Console) ledger(w http.ResponseWriter, r *http.Request, v *view) error {
	b, err := billing.LedgerBalances(r.Context(), c.reads)
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Ledger balances", "ledger", b
	return nil
}

func (c *Console) subscriptions(w http.ResponseWriter, r *http.Request, v *view) error {
	status, err := oneOf(r, "status", billing.SubscriptionStatuses)
	if err != nil {
		return err
	}
	ss, err := billing.ListSubscriptions(r.Context(), c.reads, billing.SubscriptionFilter{
		Source: r.URL.Query().Get("source"), Status: status, Limit: ListSize})
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Subscriptions", "subscriptions", listData[billing.SubscriptionView]{Rows: ss, Sources: c.sourceNames()}
	return nil
}

func (c *Console) orders(w http.ResponseWriter, r *http.Request, v *view) error {
	status, err := oneOf(r, "status", billing.OrderStatuses)
	if err != nil {
		return err
	}
	os, err := billing.ListOrders(r.Context(), c.reads, billing.OrderFilter{Source: r.URL.Query().Get("source"), Status: status, Limit: ListSize})
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Orders", "orders", listData[billing.OrderView]{Rows: os, Sources: c.sourceNames(), Statuses: billing.OrderStatuses}
	return nil
}

func (c *Console) alerts(w http.ResponseWriter, r *http.Request, v *view) error {
	// ListAlerts refuses a kind neither payhook's nor stored.
	as, err := billing.ListAlerts(r.Context(), c.reads, billing.AlertFilter{
		Unacknowledged: r.URL.Query().Get("all") == "", Kind: r.URL.Query().Get("kind"), Limit: ListSize})
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Alerts", "alerts", listData[billing.AlertView]{Rows: as}
	return nil
}

func (c *Console) ack(w http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := rowID(r, "alert")
	if err != nil {
		return "", err
	}
	// The count the page showed: an alert raised again since stays open.
	seen := 0
	if v := r.PostFormValue("count"); v != "" {
		if seen, err = strconv.Atoi(v); err != nil || seen <= 0 {
			return "", invalid("alert %d: count %q: want the count the page showed", id, v)
		}
	}
	if err := billing.AckAlertSeen(r.Context(), c.cfg.DB, id, seen); err != nil {
		return "", err
	}
	c.log.Info("console acknowledged alert", "alert", id, "user", s.User)
	return "/console/alerts?done=acknowledged", nil
}

func (c *Console) runs(w http.ResponseWriter, r *http.Request, v *view) error {
	kind := store.RunKind(r.URL.Query().Get("kind"))
	if kind != "" && kind != store.RunBackfill && kind != store.RunReconcile {
		return invalid("kind %q: want backfill or reconcile", kind)
	}
	runs, err := c.reads.Runs(r.Context(), store.RunFilter{Source: r.URL.Query().Get("source"), Kind: kind, Limit: ListSize})
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Backfill and reconcile runs", "runs", listData[*store.Run]{Rows: runs, Sources: c.sourceNames()}
	return nil
}

// SourceHealth is a source with what its recent events tell.
type SourceHealth struct {
	Source
	// LastEvent is when its latest event was received; zero if none.
	LastEvent time.Time
	// Events counts its events of the last week, Failed those that failed.
	Events, Failed int
	// Secrets are the fingerprints that matched in the last week, with
	// when each matched last; a configured one that did not is safe to
	// retire once the provider signs with the new one only.
	Secrets []SecretUse
	// Signatures is what the signature checks of its deliveries in the
	// last SignatureWindow tell (store.SignatureStats): refused and
	// matched, the latest of each; zero when none were counted.
	Signatures store.SignatureStats
}

// SecretUse is one fingerprint's use by a source's recent events.
type SecretUse struct {
	Fingerprint string
	Configured  bool
	Events      int
	Last        time.Time
}

// HealthWindow is how far back the sources page looks.
const HealthWindow = 7 * 24 * time.Hour

// SignatureWindow is how far back the sources page counts signature
// checks: the counts are kept for a day.
const SignatureWindow = 24 * time.Hour

func (c *Console) sources(w http.ResponseWriter, r *http.Request, v *view) error {
	since := c.cfg.Now().Add(-HealthWindow)
	rows, err := c.reads.SQL.QueryContext(r.Context(), `SELECT source, secret_id, COUNT(*),
		SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), MAX(received_at)
		FROM payhook_events WHERE received_at >= $1 GROUP BY source, secret_id`, c.reads.TimeValue(since))
	if err != nil {
		return fmt.Errorf("source health: %w", err)
	}
	defer rows.Close()
	byName := map[string]*SourceHealth{}
	var out []*SourceHealth
	for _, s := range c.cfg.Sources {
		h := &SourceHealth{Source: s}
		for _, fp := range s.Fingerprints {
			h.Secrets = append(h.Secrets, SecretUse{Fingerprint: fp, Configured: true})
		}
		byName[s.Name] = h
		out = append(out, h)
	}
	for rows.Next() {
		var name, secret string
		var n, failed int
		var last time.Time
		if err := rows.Scan(&name, &secret, &n, &failed, store.ScanTime(&last)); err != nil {
			return fmt.Errorf("source health: %w", err)
		}
		h := byName[name]
		if h == nil {
			h = &SourceHealth{Source: Source{Name: name, Provider: "(not configured)"}}
			byName[name] = h
			out = append(out, h)
		}
		h.Events += n
		h.Failed += failed
		if last.After(h.LastEvent) {
			h.LastEvent = last
		}
		if secret == "" {
			continue // backfilled or unsigned
		}
		i := slices.IndexFunc(h.Secrets, func(s SecretUse) bool { return s.Fingerprint == secret })
		if i < 0 {
			h.Secrets = append(h.Secrets, SecretUse{Fingerprint: secret})
			i = len(h.Secrets) - 1
		}
		h.Secrets[i].Events += n
		h.Secrets[i].Last = last
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("source health: %w", err)
	}
	for _, h := range out {
		if h.LastEvent.IsZero() {
			// Older than the window, if any.
			var last time.Time
			if err := c.reads.SQL.QueryRowContext(r.Context(), `SELECT MAX(received_at) FROM payhook_events WHERE source = $1`,
				h.Name).Scan(store.ScanTime(&last)); err != nil {
				return fmt.Errorf("source health: %w", err)
			}
			h.LastEvent = last
		}
	}
	stats, err := c.reads.SignatureStats(r.Context(), "", c.cfg.Now().Add(-SignatureWindow))
	if err != nil {
		return fmt.Errorf("source health: %w", err)
	}
	for _, st := range stats {
		h := byName[st.Source]
		if h == nil {
			// Refused deliveries for a source that is not configured
			// (any more) are counted too.
			h = &SourceHealth{Source: Source{Name: st.Source, Provider: "(not configured)"}}
			byName[st.Source] = h
			out = append(out, h)
		}
		h.Signatures = st
	}
	v.Title, v.Nav, v.Data = "Sources", "sources", out
	return nil
}

type deliveriesData struct {
	Rows      []outbox.DeliveryView
	Statuses  []string
	CanResend bool
}

func (c *Console) deliveries(w http.ResponseWriter, r *http.Request, v *view) error {
	ds, err := outbox.ListDeliveries(r.Context(), c.reads, outbox.DeliveryFilter{
		Sink: r.URL.Query().Get("sink"), Status: r.URL.Query().Get("status"), Limit: ListSize})
	if err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = "Outbox deliveries", "deliveries", deliveriesData{Rows: ds, Statuses: outbox.DeliveryStatuses, CanResend: c.cfg.Resend != nil}
	return nil
}

func (c *Console) resend(w http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := rowID(r, "delivery")
	if err != nil {
		return "", err
	}
	if c.cfg.Resend == nil {
		return "", fmt.Errorf("resend delivery %d: %w: resending is not set up on this server", id, payhook.ErrInvalid)
	}
	if err := c.cfg.Resend(r.Context(), id); err != nil {
		return "", err
	}
	c.log.Info("console resend", "delivery", id, "user", s.User)
	return "/console/deliveries?done=resent", nil
}
