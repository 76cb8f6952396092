package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// PageSize is how many events one page of the event list shows.
const PageSize = 50

// EventFilter is the event list's query, read from the URL.
type EventFilter struct {
	Source, Type, Status, Via, EventID, Since, Until string
}

type eventsData struct {
	Filter   EventFilter
	Events   []*payhook.Event
	Statuses []payhook.Status
	Sources  []string
	// Older is the URL of the next (older) page; "" on the last.
	Older string
	// First is true on the newest page.
	First bool
	// Bulk is the bulk replay running, or the last one; nil if none.
	Bulk *BulkStatus
}

// ParseEventFilter turns the URL query into a store.Filter: a status or
// way in that does not exist, or a time that is neither RFC 3339, the
// browser's "2006-01-02T15:04" (UTC) nor a duration ago ("24h"), is an
// error wrapping payhook.ErrInvalid.
func ParseEventFilter(q url.Values, now time.Time) (store.Filter, EventFilter, error) {
	ef := EventFilter{Source: q.Get("source"), Type: q.Get("type"), Status: q.Get("status"), Via: q.Get("via"),
		EventID: strings.TrimSpace(q.Get("event_id")), Since: q.Get("since"), Until: q.Get("until")}
	f := store.Filter{Source: ef.Source, Type: ef.Type, Status: payhook.Status(ef.Status), Via: payhook.Via(ef.Via),
		EventID: ef.EventID, Limit: PageSize + 1}
	if f.Status != "" && !f.Status.Valid() {
		return f, ef, invalid("status %q: want received, processed, ignored or failed", ef.Status)
	}
	if f.Via != "" && f.Via != payhook.ViaWebhook && f.Via != payhook.ViaBackfill {
		return f, ef, invalid("via %q: want webhook or backfill", ef.Via)
	}
	var err error
	if f.Since, err = parseWhen(ef.Since, now); err != nil {
		return f, ef, invalid("since: %v", err)
	}
	if f.Until, err = parseWhen(ef.Until, now); err != nil {
		return f, ef, invalid("until: %v", err)
	}
	if b := q.Get("before"); b != "" {
		if f.Before, err = strconv.ParseInt(b, 10, 64); err != nil || f.Before <= 0 {
			return f, ef, invalid("before %q: want an event's numeric id", b)
		}
	}
	return f, ef, nil
}

// parseWhen reads a time of the event filter.
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, payhook.CheckTime("time", t)
		}
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339, 2006-01-02T15:04 (UTC) or a duration ago such as 24h", s)
}

func (c *Console) events(w http.ResponseWriter, r *http.Request, v *view) error {
	f, ef, err := ParseEventFilter(r.URL.Query(), c.cfg.Now())
	if err != nil {
		return err
	}
	evs, err := c.reads.ListEvents(r.Context(), f)
	if err != nil {
		return err
	}
	d := eventsData{Filter: ef, Statuses: []payhook.Status{payhook.StatusReceived, payhook.StatusProcessed,
		payhook.StatusIgnored, payhook.StatusFailed}, First: f.Before == 0, Bulk: c.bulk.status()}
	for _, s := range c.cfg.Sources {
		d.Sources = append(d.Sources, s.Name)
	}
	if len(evs) > PageSize {
		evs = evs[:PageSize]
		q := r.URL.Query()
		q.Set("before", strconv.FormatInt(evs[len(evs)-1].ID, 10))
		d.Older = "/console/events?" + q.Encode()
	}
	d.Events = evs
	v.Title, v.Nav, v.Data = "Events", "events", d
	return nil
}

type eventData struct {
	Event    *payhook.Event
	Pretty   string
	Attempts []jobs.Attempt
	// AttemptsErr is why the attempts could not be read.
	AttemptsErr string
	Facts       []factView
	FactsNote   string
	Postings    []billing.PostingView
	Replayable  bool
}

type factView struct {
	Kind string
	JSON string
}

func (c *Console) event(w http.ResponseWriter, r *http.Request, v *view) error {
	id, err := rowID(r, "event")
	if err != nil {
		return err
	}
	ev, err := c.reads.Event(r.Context(), id)
	if err != nil {
		return err
	}
	d := eventData{Event: ev, Pretty: pretty(ev.Payload), Replayable: ev.Status != payhook.StatusIgnored}
	if d.Attempts, err = c.cfg.Queue.Attempts(r.Context(), id); err != nil {
		c.log.Warn("console: attempts", "event", id, "err", err)
		d.AttemptsErr = "the job queue's record could not be read"
	}
	if d.Facts, d.FactsNote, err = c.facts(ev); err != nil {
		d.FactsNote = err.Error()
	}
	if d.Postings, err = c.postings(r, ev.Source, d.Facts); err != nil {
		return err
	}
	v.Title, v.Nav, v.Data = fmt.Sprintf("Event %d", id), "event", d
	return nil
}

// facts reads what the event says for billing, as processing reads it.
func (c *Console) facts(ev *payhook.Event) ([]factView, string, error) {
	i := slices.IndexFunc(c.cfg.Sources, func(s Source) bool { return s.Name == ev.Source })
	if i < 0 {
		return nil, "source " + ev.Source + " is not configured here", nil
	}
	res, err := mapping.Read(c.cfg.Sources[i].Provider, ev)
	if err != nil {
		return nil, "", fmt.Errorf("the payload cannot be read for billing: %v", err)
	}
	var out []factView
	for _, f := range res.Facts {
		b, _ := json.MarshalIndent(f, "", "  ")
		out = append(out, factView{Kind: reflect.TypeOf(f).Name(), JSON: string(b)})
	}
	return out, res.Ignored, nil
}

// postings returns the ledger postings of the payments the facts name.
func (c *Console) postings(r *http.Request, source string, facts []factView) ([]billing.PostingView, error) {
	refs := map[string]bool{}
	for _, f := range facts {
		var m map[string]any
		if json.Unmarshal([]byte(f.JSON), &m) != nil {
			continue
		}
		collectRefs(m, refs)
	}
	out := []billing.PostingView{}
	for _, ref := range slices.Sorted(mapsKeys(refs)) {
		ps, err := billing.ListPostings(r.Context(), c.reads, source, ref)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	slices.SortFunc(out, func(a, b billing.PostingView) int { return int(a.ID - b.ID) })
	return slices.CompactFunc(out, func(a, b billing.PostingView) bool { return a.ID == b.ID }), nil
}

// collectRefs gathers the payment references of a fact's JSON: the
// fields Ref (of a Payment), PaymentRef and InvoiceRef.
func collectRefs(m map[string]any, refs map[string]bool) {
	for k, v := range m {
		switch v := v.(type) {
		case string:
			if k == "PaymentRef" || k == "InvoiceRef" || k == "Ref" {
				refs[v] = true
			}
		case map[string]any:
			collectRefs(v, refs)
		}
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// pretty indents a JSON payload; anything else is shown as it is.
func pretty(payload []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, payload, "", "  ") == nil {
		return b.String()
	}
	return string(payload)
}

// payload answers the stored body byte for byte, as a download.
func (c *Console) payload(w http.ResponseWriter, r *http.Request, v *view) error {
	id, err := rowID(r, "event")
	if err != nil {
		return err
	}
	ev, err := c.reads.Event(r.Context(), id)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="payhook-event-%d.json"`, id))
	h.Set("Content-Length", strconv.Itoa(len(ev.Payload)))
	h.Set("Cache-Control", "no-store")
	w.Write(ev.Payload)
	return nil
}

func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := rowID(r, "event")
	if err != nil {
		return "", err
	}
	ev, err := c.cfg.DB.Event(r.Context(), id)
	if err != nil {
		return "", err
	}
	if ev.Status == payhook.StatusIgnored {
		return "", invalid("event %d was ignored (%s): there is nothing to replay", id, ev.LastError)
	}
	if err := c.cfg.Queue.Replay(r.Context(), id); err != nil {
		return "", err
	}
	c.log.Info("console replay", "event", id, "user", s.User)
	return fmt.Sprintf("/console/events/%d?done=replayed", id), nil
}
