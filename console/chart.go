package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// chartStatuses are the statuses the chart stacks, bottom up, with their
// colours.
var chartStatuses = []struct {
	Status payhook.Status
	Color  string
}{
	{payhook.StatusProcessed, "#2e7d32"},
	{payhook.StatusIgnored, "#9e9e9e"},
	{payhook.StatusReceived, "#1565c0"},
	{payhook.StatusFailed, "#c62828"},
}

// ChartMinutes is the chart's span: 24 hours.
const ChartMinutes = 24 * 60

// perMinute counts the events received in each of the last ChartMinutes
// minutes before now, by status: counts[status][i] is minute i, oldest
// first.
func perMinute(ctx context.Context, db *store.DB, now time.Time) (map[payhook.Status][]int, error) {
	end := now.UTC().Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-ChartMinutes * time.Minute)
	minute := `substr(received_at, 1, 16)`
	if db.Engine == store.Postgres {
		minute = `to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI')`
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT `+minute+`, status, COUNT(*) FROM payhook_events
		WHERE received_at >= $1 AND received_at < $2 GROUP BY 1, 2`, db.TimeValue(start), db.TimeValue(end))
	if err != nil {
		return nil, fmt.Errorf("events per minute: %w", err)
	}
	defer rows.Close()
	out := map[payhook.Status][]int{}
	for _, s := range chartStatuses {
		out[s.Status] = make([]int, ChartMinutes)
	}
	for rows.Next() {
		var m, status string
		var n int
		if err := rows.Scan(&m, &status, &n); err != nil {
			return nil, fmt.Errorf("events per minute: %w", err)
		}
		t, err := time.Parse("2006-01-02T15:04", m)
		if err != nil {
			return nil, fmt.Errorf("events per minute: minute %q: %w", m, err)
		}
		i := int(t.Sub(start) / time.Minute)
		if col, ok := out[payhook.Status(status)]; ok && i >= 0 && i < ChartMinutes {
			col[i] += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events per minute: %w", err)
	}
	return out, nil
}

// chartCache keeps the last chart a few seconds: the count reads a day of
// events.
type chartCache struct {
	mu  sync.Mutex
	at  time.Time
	svg string
}

const chartTTL = 10 * time.Second

func (c *Console) chart(ctx context.Context) (string, error) {
	c.charts.mu.Lock()
	defer c.charts.mu.Unlock()
	now := c.cfg.Now()
	if c.charts.svg != "" && now.Sub(c.charts.at) < chartTTL && !now.Before(c.charts.at) {
		return c.charts.svg, nil
	}
	counts, err := perMinute(ctx, c.reads, now)
	if err != nil {
		return "", err
	}
	c.charts.svg, c.charts.at = renderChart(counts, now), now
	return c.charts.svg, nil
}

// renderChart draws the counts as stacked bars, one per minute, in an SVG
// that scales to its container.
func renderChart(counts map[payhook.Status][]int, now time.Time) string {
	const w, h, top, bottom, left = ChartMinutes, 200, 10, 20, 40
	peak := 1
	for i := range ChartMinutes {
		sum := 0
		for _, s := range chartStatuses {
			sum += counts[s.Status][i]
		}
		peak = max(peak, sum)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" preserveAspectRatio="none" role="img" class="chart">`, w+left, h+top+bottom)
	fmt.Fprintf(&b, `<title>Events per minute by status, last 24 hours (peak %d/min)</title>`, peak)
	plot := float64(h)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ccc"/>`, left, top+h, left+w, top+h)
	fmt.Fprintf(&b, `<text x="2" y="%d" font-size="12" fill="#555">%d</text>`, top+10, peak)
	fmt.Fprintf(&b, `<text x="2" y="%d" font-size="12" fill="#555">0</text>`, top+h)
	for _, s := range chartStatuses {
		fmt.Fprintf(&b, `<path fill="%s" d="`, s.Color)
		for i := range ChartMinutes {
			below := 0
			for _, t := range chartStatuses {
				if t.Status == s.Status {
					break
				}
				below += counts[t.Status][i]
			}
			n := counts[s.Status][i]
			if n == 0 {
				continue
			}
			y0 := float64(top) + plot - float64(below)*plot/float64(peak)
			hh := float64(n) * plot / float64(peak)
			fmt.Fprintf(&b, "M%d %.1fh1v%.1fh-1z", left+i, y0-hh, hh)
		}
		b.WriteString(`"/>`)
	}
	start := now.UTC().Truncate(time.Minute).Add(time.Minute - ChartMinutes*time.Minute)
	for hr := 0; hr <= 24; hr += 6 {
		x := left + hr*60
		t := start.Add(time.Duration(hr) * time.Hour)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#555" text-anchor="%s">%s</text>`,
			x, top+h+16, anchor(hr), t.Format("15:04"))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// anchor aligns an hour label inside the chart at both ends.
func anchor(hr int) string {
	switch hr {
	case 0:
		return "start"
	case 24:
		return "end"
	}
	return "middle"
}

func (c *Console) chartSVG(w http.ResponseWriter, r *http.Request, v *view) error {
	svg, err := c.chart(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "private, max-age=10")
	fmt.Fprint(w, svg)
	return nil
}

type overviewData struct {
	Counts     map[payhook.Status]int
	Total      int
	OpenAlerts int
	Legend     []legendItem
	Chart      template.HTML
}

type legendItem struct {
	Status payhook.Status
	Color  string
	Count  int
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, v *view) error {
	counts, err := c.reads.CountByStatus(r.Context())
	if err != nil {
		return err
	}
	d := overviewData{Counts: counts}
	for _, s := range chartStatuses {
		d.Legend = append(d.Legend, legendItem{s.Status, s.Color, counts[s.Status]})
		d.Total += counts[s.Status]
	}
	if err := c.reads.SQL.QueryRowContext(r.Context(),
		`SELECT COUNT(*) FROM payhook_alerts WHERE acknowledged = $1`, false).Scan(&d.OpenAlerts); err != nil {
		return fmt.Errorf("count open alerts: %w", err)
	}
	svg, err := c.chart(r.Context())
	if err != nil {
		return err
	}
	d.Chart = template.HTML(svg) // made by renderChart from numbers and times only
	v.Title, v.Nav, v.Data = "Overview", "overview", d
	return nil
}
