package lab

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The report's charts are SVG, laid out here: the rate of each run beside
// its ceiling (bars), the answers of each whole second of the longer runs
// (steps), and the latency distributions (lines over the percentiles).

// chart is an SVG line chart.
type chart struct {
	Width, Height int
	Left, Bottom  int // the plot area's left and bottom edges
	Lines         []line
	Marks         []mark // vertical marks: when a run's stock ran out
	XTicks        []tick
	YTicks        []tick
}

type line struct {
	Name, Color string
	Points      string // SVG polyline points
	Dots        []tick // the measured points, each with its figure
}

type tick struct {
	X, Y  float64
	Label string
}

// mark is a vertical line from Y1 to Y2 at X.
type mark struct {
	X, Y1, Y2    float64
	Color, Label string
}

// palette colours the strategies, one each, in row order.
var palette = []string{"#dc2626", "#ea580c", "#ca8a04", "#2563eb", "#7c3aed", "#059669", "#db2777", "#0891b2"}

func color(i int) string { return palette[i%len(palette)] }

const (
	chartW, chartH                 = 960, 300
	padL, padR, padT, padB         = 64, 20, 14, 34
	plotW, plotH           float64 = chartW - padL - padR, chartH - padT - padB
)

func newChart() chart {
	return chart{Width: chartW, Height: chartH, Left: padL, Bottom: chartH - padB}
}

// minSeconds is how many whole seconds the longest run must have for the
// answers per second to be drawn: fewer make a chart of one or two points,
// and the bars say as much.
const minSeconds = 3

// wholeSeconds is how many whole seconds of r's throughput there are: its
// last second is cut short by the run's end, and is not a rate.
func wholeSeconds(r Row) int {
	return min(len(r.Throughput), int(r.ElapsedMs/1000))
}

// secondsChart plots the answers of each whole second of each run as steps
// (a count holds for its whole second; nothing is known in between), with
// a mark where a run's stock ran out. It is nil when no run lasted
// minSeconds whole seconds; left names the runs too short to draw.
func secondsChart(rows []Row) (c *chart, left []string) {
	secs, peak := 0, 1
	for _, r := range rows {
		n := wholeSeconds(r)
		secs = max(secs, n)
		for _, v := range r.Throughput[:n] {
			peak = max(peak, v)
		}
	}
	if secs < minSeconds {
		return nil, nil
	}
	c = ptr(newChart())
	xs := niceTicks(float64(secs), 8)
	ys := niceTicks(float64(peak), 4)
	x := func(s float64) float64 { return padL + s/xs[len(xs)-1]*plotW }
	y := func(v float64) float64 { return padT + (1-v/ys[len(ys)-1])*plotH }
	for i, r := range rows {
		n := wholeSeconds(r)
		if n == 0 {
			left = append(left, fmt.Sprintf("%s (%s s)", r.Strategy, seconds(r.ElapsedMs)))
			continue
		}
		l := line{Name: r.Strategy, Color: color(i)}
		var pts []string
		for s, v := range r.Throughput[:n] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(float64(s)), y(float64(v)), x(float64(s+1)), y(float64(v))))
			l.Dots = append(l.Dots, tick{X: x(float64(s) + 0.5), Y: y(float64(v)), Label: fmt.Sprintf("%s: %s answers in second %d", r.Strategy, thousands(float64(v)), s+1)})
		}
		l.Points = strings.Join(pts, " ")
		c.Lines = append(c.Lines, l)
		if r.SoldOutMs != nil && *r.SoldOutMs/1000 <= float64(n) {
			c.Marks = append(c.Marks, mark{X: x(*r.SoldOutMs / 1000), Y1: padT, Y2: padT + plotH, Color: color(i),
				Label: fmt.Sprintf("%s: stock ran out at %s s", r.Strategy, seconds(*r.SoldOutMs))})
		}
	}
	for _, v := range ys {
		c.YTicks = append(c.YTicks, tick{X: padL, Y: y(v), Label: thousands(v)})
	}
	for _, s := range xs {
		c.XTicks = append(c.XTicks, tick{X: x(s), Y: chartH - padB, Label: strconv.FormatFloat(s, 'f', -1, 64) + " s"})
	}
	return c, left
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
		l := line{Name: r.Strategy, Color: color(i)}
		pts := make([]string, len(r.Latency))
		for j, p := range r.Latency {
			pts[j] = fmt.Sprintf("%.1f,%.1f", x(j), y(p.Ms))
			l.Dots = append(l.Dots, tick{X: x(j), Y: y(p.Ms), Label: fmt.Sprintf("%s: p%s %s ms", r.Strategy, strconv.FormatFloat(p.Percentile, 'f', -1, 64), millis(p.Ms))})
		}
		l.Points = strings.Join(pts, " ")
		c.Lines = append(c.Lines, l)
	}
	for e := lo; e <= hi; e++ {
		c.YTicks = append(c.YTicks, tick{X: padL, Y: y(math.Pow(10, e)), Label: strconv.FormatFloat(math.Pow(10, e), 'f', -1, 64) + " ms"})
	}
	for j, p := range percentiles {
		c.XTicks = append(c.XTicks, tick{X: x(j), Y: chartH - padB, Label: "p" + strconv.FormatFloat(p, 'f', -1, 64)})
	}
	return c
}

// bars is an SVG bar chart of each run's rate over the whole run (the
// table's rps) over its ceiling, with what else the run's length says.
type bars struct {
	Width, Height int
	Left, Bottom  int
	NameX, LabelX int // where the names end, and the labels start
	BarH          int
	Bars          []bar
	XTicks        []tick
}

type bar struct {
	Name, Color         string
	Y, TextY            float64 // the bar's top, and its text's baseline
	Width, Ceiling      float64 // the bar's length, and the ceiling's
	Label, CeilingLabel string  // beside the bar; the ceiling's title
}

const (
	barH, barGap   = 18, 10
	barsL, barsR   = 160, 600 // the plot's edges; the labels go right of it
	barsT, barsB   = 8, 30
	barsLabelsFrom = barsR + 12
)

// rateBars lays out the bars of rows.
func rateBars(rows []Row) bars {
	top := 1.0
	for _, r := range rows {
		top = max(top, r.RPS, r.CeilingRPS)
	}
	xs := niceTicks(top, 5)
	scale := func(v float64) float64 { return v / xs[len(xs)-1] * (barsR - barsL) }
	h := barsT + len(rows)*(barH+barGap) + barsB
	b := bars{Width: chartW, Height: h, Left: barsL, Bottom: h - barsB, NameX: barsL - 8, LabelX: barsLabelsFrom, BarH: barH}
	for i, r := range rows {
		y := float64(barsT + i*(barH+barGap))
		label := thousands(r.RPS) + " rps"
		if r.CeilingRPS > 0 {
			label += fmt.Sprintf(" (%s of the ceiling)", percent(r.RPS, r.CeilingRPS))
		}
		label += " · " + soldOut(r)
		b.Bars = append(b.Bars, bar{Name: r.Strategy, Color: color(i), Y: y, TextY: y + barH/2 + 4, Width: scale(r.RPS), Ceiling: scale(r.CeilingRPS),
			Label: label, CeilingLabel: fmt.Sprintf("%s: ceiling %s rps (GET /healthz)", r.Strategy, thousands(r.CeilingRPS))})
	}
	for _, v := range xs {
		b.XTicks = append(b.XTicks, tick{X: barsL + scale(v), Y: float64(h - barsB), Label: thousands(v)})
	}
	return b
}

// soldOut says when r's stock ran out, in the run's time.
func soldOut(r Row) string {
	if r.SoldOutMs == nil {
		return fmt.Sprintf("no buyer told sold out in %s s", seconds(r.ElapsedMs))
	}
	return fmt.Sprintf("sold out at %s s of %s s", seconds(*r.SoldOutMs), seconds(r.ElapsedMs))
}

// niceTicks returns the ticks of an axis of whole numbers from 0 that
// reaches top, in about n steps of 1, 2 or 5 times a power of ten.
func niceTicks(top float64, n int) []float64 {
	top = max(top, 1)
	raw := top / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	step = max(step, 1)
	var ticks []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		ticks = append(ticks, v)
		if v >= top {
			return ticks
		}
	}
}

func ptr[T any](v T) *T { return &v }
