package bench

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// palette colours the series of a chart, in order.
var palette = []string{"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"}

// WriteSVG draws the results' timelines as an SVG chart: acknowledgements
// per second over time above, their p99 latency below, one line per
// result.
func WriteSVG(w io.Writer, title string, results []*Result) error {
	const width, panel, left, top, gap = 900, 220, 70, 40, 50
	plot := width - left - 200 // legend on the right
	var maxT time.Duration
	var maxRate float64
	var maxP99 time.Duration
	for _, r := range results {
		for _, s := range r.Timeline {
			maxT, maxRate, maxP99 = max(maxT, s.At), max(maxRate, s.AcksPerSec), max(maxP99, s.P99)
		}
	}
	maxT, maxRate, maxP99 = max(maxT, time.Second), max(maxRate, 1), max(maxP99, time.Millisecond)
	height := top + 2*panel + gap + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	x := func(t time.Duration) float64 { return left + float64(plot)*t.Seconds()/maxT.Seconds() }
	panels := []struct {
		name string
		y0   int
		max  float64
		val  func(Sample) float64
	}{
		{"acks/s", top, maxRate, func(s Sample) float64 { return s.AcksPerSec }},
		{"p99 latency (ms)", top + panel + gap, float64(maxP99) / 1e6, func(s Sample) float64 { return float64(s.P99) / 1e6 }},
	}
	for _, p := range panels {
		y := func(v float64) float64 { return float64(p.y0+panel) - float64(panel)*v/p.max }
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, p.y0, plot, panel)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left, p.y0-6, p.name)
		for i := 0; i <= 4; i++ {
			v := p.max * float64(i) / 4
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, axis(v))
		}
		for i, r := range results {
			var pts []string
			for _, s := range r.Timeline {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(p.val(s))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", palette[i%len(palette)], strings.Join(pts, " "))
		}
	}
	for i := 0; i <= 4; i++ {
		t := time.Duration(float64(maxT) * float64(i) / 4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.1f s</text>`+"\n", x(t), top+2*panel+gap+16, t.Seconds())
	}
	for i, r := range results {
		ly := top + 14 + 18*i
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+plot+14, ly-4, palette[i%len(palette)], left+plot+32, ly, html.EscapeString(r.Target+" "+r.Load()))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("bench: write svg: %w", err)
	}
	return nil
}

// axis formats an axis label.
func axis(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}
