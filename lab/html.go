package lab

import (
	_ "embed" // the report's template
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportTemplate string

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"codes":  codes,
	"total":  total,
	"redis":  func(n *int) string { return optional(n) },
	"number": func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
}).Parse(reportTemplate))

// WriteHTML writes rows as one self-contained HTML page (inline CSS and
// SVG, no script, nothing fetched): the audit table with the unsafe rows
// marked, the verdicts, the throughput of each run over time and its
// latency distribution. Its figures are the rows' own, as WriteJSON
// writes them.
func WriteHTML(w io.Writer, rows []Row) error {
	data := struct {
		Generated  string
		Rows       []Row
		Verdicts   []string
		Throughput chart
		Latency    chart
	}{time.Now().UTC().Format(time.RFC3339), rows, Verdicts(rows), throughputChart(rows), latencyChart(rows)}
	return reportPage.Execute(w, data)
}

func optional(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

// chart is an SVG line chart, laid out in Go.
type chart struct {
	Width, Height int
	Left, Bottom  int // the plot area's left and bottom edges
	Lines         []line
	XTicks        []tick
	YTicks        []tick
}

type line struct {
	Name, Color string
	Points      string // SVG polyline points
	Dots        []tick // the points, marked: a run of one second is one point
}

type tick struct {
	X, Y  float64
	Label string
}

// palette colours the strategies, one each, in row order.
var palette = []string{"#dc2626", "#ea580c", "#ca8a04", "#2563eb", "#7c3aed", "#059669", "#db2777", "#0891b2"}

const (
	chartW, chartH                 = 860, 300
	padL, padR, padT, padB         = 60, 20, 14, 34
	plotW, plotH           float64 = chartW - padL - padR, chartH - padT - padB
)

func newChart() chart {
	return chart{Width: chartW, Height: chartH, Left: padL, Bottom: chartH - padB}
}

// throughputChart plots each run's answered requests per second.
func throughputChart(rows []Row) chart {
	c := newChart()
	secs, peak := 1, 1
	for _, r := range rows {
		secs = max(secs, len(r.Throughput))
		for _, n := range r.Throughput {
			peak = max(peak, n)
		}
	}
	x := func(i float64) float64 { return padL + i/float64(secs)*plotW }
	y := func(v float64) float64 { return padT + (1-v/float64(peak))*plotH }
	for i, r := range rows {
		l := line{Name: r.Strategy, Color: palette[i%len(palette)]}
		for s, n := range r.Throughput {
			// Each second's count is drawn at its middle.
			l.Dots = append(l.Dots, tick{X: x(float64(s) + 0.5), Y: y(float64(n)), Label: fmt.Sprintf("%s: %d in second %d", r.Strategy, n, s+1)})
		}
		c.Lines = append(c.Lines, l.joined())
	}
	for _, f := range []float64{0, .25, .5, .75, 1} {
		c.YTicks = append(c.YTicks, tick{X: padL, Y: y(f * float64(peak)), Label: strconv.Itoa(int(math.Round(f * float64(peak))))})
	}
	step := max(1, secs/8)
	for s := 0; s <= secs; s += step {
		c.XTicks = append(c.XTicks, tick{X: x(float64(s)), Y: chartH - padB, Label: fmt.Sprintf("%ds", s)})
	}
	return c
}

// latencyChart plots each run's latency at the distribution's
// percentiles, evenly spaced, on a log scale of milliseconds.
func latencyChart(rows []Row) chart {
	c := newChart()
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, p := range r.Latency {
			v := math.Log10(max(p.Ms, 0.001))
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi == lo {
		hi = lo + 1
	}
	x := func(i int) float64 { return padL + float64(i)/float64(len(percentiles)-1)*plotW }
	y := func(ms float64) float64 { return padT + (1-(math.Log10(max(ms, 0.001))-lo)/(hi-lo))*plotH }
	for i, r := range rows {
		l := line{Name: r.Strategy, Color: palette[i%len(palette)]}
		for j, p := range r.Latency {
			l.Dots = append(l.Dots, tick{X: x(j), Y: y(p.Ms), Label: fmt.Sprintf("%s: p%s %s ms", r.Strategy, strconv.FormatFloat(p.Percentile, 'f', -1, 64), strconv.FormatFloat(p.Ms, 'f', -1, 64))})
		}
		c.Lines = append(c.Lines, l.joined())
	}
	for e := lo; e <= hi; e++ {
		c.YTicks = append(c.YTicks, tick{X: padL, Y: y(math.Pow(10, e)), Label: strconv.FormatFloat(math.Pow(10, e), 'g', -1, 64) + " ms"})
	}
	for j, p := range percentiles {
		c.XTicks = append(c.XTicks, tick{X: x(j), Y: chartH - padB, Label: "p" + strconv.FormatFloat(p, 'f', -1, 64)})
	}
	return c
}

// joined returns l with Points joining its dots.
func (l line) joined() line {
	pts := make([]string, len(l.Dots))
	for i, d := range l.Dots {
		pts[i] = fmt.Sprintf("%.1f,%.1f", d.X, d.Y)
	}
	l.Points = strings.Join(pts, " ")
	return l
}
