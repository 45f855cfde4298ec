package lab_test

import (
	"bytes"
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// timedRows are sampleRows that ran for the given milliseconds, answering
// 900 requests a second and hearing sold_out after soldOut ms (0: never).
func timedRows(elapsedMs []float64, soldOut []float64) []lab.Row {
	rows := sampleRows()
	for i := range rows {
		r := &rows[i]
		r.ElapsedMs = elapsedMs[i]
		r.Throughput = make([]int, int(r.ElapsedMs/1000)+1)
		for s := range r.Throughput {
			r.Throughput[s] = 900 + 100*s
		}
		if soldOut[i] > 0 {
			r.SoldOutMs = &soldOut[i]
		}
		r.RPS, r.CeilingRPS = 10411.3, 20822.6
	}
	return rows
}

func writeHTML(t *testing.T, rep lab.Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := lab.WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestHTMLDrawsWhatTheDataSupports: every run's rate over the whole run
// (the table's figure) is a bar beside its ceiling, with when its stock ran
// out; answers per second are drawn only for whole seconds, as steps, and
// only when some run lasted three of them.
func TestHTMLDrawsWhatTheDataSupports(t *testing.T) {
	tests := []struct {
		name      string
		elapsed   []float64
		soldOut   []float64
		steps     []int    // points of each drawn run's steps; nil: no chart of seconds
		marks     []string // the sold-out marks' titles
		notDrawn  string   // the runs too short for the chart of seconds
		barLabels []string
	}{
		{"runs of a second or less: the rates alone", []float64{400, 900, 950, 120}, []float64{0, 300, 455.5, 60},
			nil, nil, "",
			[]string{"10,411 rps (50% of the ceiling) · no buyer told sold out in 0.40 s", "10,411 rps (50% of the ceiling) · sold out at 0.46 s of 0.95 s"}},
		{"two seconds are not enough", []float64{2999, 2500, 1000, 10}, []float64{0, 0, 0, 0}, nil, nil, "", nil},
		{"longer runs: their whole seconds as steps", []float64{3400, 12000, 400, 1999}, []float64{1250, 0, 100, 2500},
			[]int{3 * 2, 12 * 2, 1 * 2}, []string{"naive: stock ran out at 1.25 s"}, "Not drawn, shorter than a second: conditional (0.40 s).",
			[]string{"sold out at 1.25 s of 3.40 s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := writeHTML(t, lab.Report{Setup: sampleSetup(), Runs: timedRows(tt.elapsed, tt.soldOut)})
			text := html.UnescapeString(page)
			if got := strings.Count(page, `<rect class="rate"`); got != 4 {
				t.Errorf("%d rate bars, want 4", got)
			}
			for _, l := range tt.barLabels {
				if !strings.Contains(text, l) {
					t.Errorf("no bar says %q", l)
				}
			}
			if !strings.Contains(page, `data-field="rps" data-value="10411.3">10,411<`) {
				t.Errorf("the table's rps is not the bars' 10,411")
			}
			seconds := section(page, `id="seconds"`)
			lines := regexp.MustCompile(`<polyline points="([^"]*)"`).FindAllStringSubmatch(seconds, -1)
			if tt.steps == nil {
				if len(lines) != 0 || !strings.Contains(seconds, "No run lasted 3 whole seconds") {
					t.Errorf("a chart of seconds where no run lasted 3 whole seconds:\n%s", seconds)
				}
				return
			}
			if len(lines) != len(tt.steps) {
				t.Fatalf("%d runs drawn per second, want %d:\n%s", len(lines), len(tt.steps), seconds)
			}
			for i, l := range lines {
				if n := len(strings.Fields(l[1])); n != tt.steps[i] {
					t.Errorf("run %d is drawn with %d points, want %d: two per whole second, none for the last, partial one", i, n, tt.steps[i])
				}
			}
			marks := regexp.MustCompile(`<line class="sold-out"[^>]*><title>([^<]*)</title>`).FindAllStringSubmatch(seconds, -1)
			if len(marks) != len(tt.marks) {
				t.Errorf("sold-out marks %q, want %q", marks, tt.marks)
			}
			for i := range min(len(marks), len(tt.marks)) {
				if marks[i][1] != tt.marks[i] {
					t.Errorf("sold-out mark %q, want %q", marks[i][1], tt.marks[i])
				}
			}
			if !strings.Contains(html.UnescapeString(seconds), tt.notDrawn) {
				t.Errorf("the chart does not say %q", tt.notDrawn)
			}
			checkTicks(t, seconds)
		})
	}
}

// section returns the panel of page whose opening tag holds attr.
func section(page, attr string) string {
	i := strings.Index(page, attr)
	if i < 0 {
		return ""
	}
	end := strings.Index(page[i:], "<h2>")
	if end < 0 {
		return page[i:]
	}
	return page[i : i+end]
}

// checkTicks fails unless each axis of the chart counts from 0 in steps
// of 1, 2 or 5 times a power of ten (not 251, 501, 752, 1002).
func checkTicks(t *testing.T, chart string) {
	t.Helper()
	for _, anchor := range []string{"end", "middle"} { // the y axis, the x axis
		var ticks []int
		for _, m := range regexp.MustCompile(`text-anchor="`+anchor+`">([\d,]+)(?: s)?<`).FindAllStringSubmatch(chart, -1) {
			v, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
			if err != nil {
				t.Fatal(err)
			}
			ticks = append(ticks, v)
		}
		if len(ticks) < 2 || ticks[0] != 0 {
			t.Errorf("axis ticks %v, want 0 and more", ticks)
			continue
		}
		step := ticks[1]
		mantissa := step
		for mantissa%10 == 0 {
			mantissa /= 10
		}
		for i, v := range ticks {
			if v != i*step || (mantissa != 1 && mantissa != 2 && mantissa != 5) {
				t.Errorf("axis ticks %v, want steps of 1, 2 or 5 times a power of ten", ticks)
				break
			}
		}
	}
}

// TestHTMLShowsTheSetup: the page says how the runs were made: the mode and
// its servers, the backends, the race window, the sale, the load model and
// the machine.
func TestHTMLShowsTheSetup(t *testing.T) {
	tests := []struct {
		name  string
		setup lab.Setup
		want  []string
	}{
		{"targets", sampleSetup(), []string{
			"<dt>mode</dt><dd>targets: 2 running server(s): http://10.0.0.5:8080, http://10.0.0.6:8080</dd>",
			"<dt>Redis</dt><dd>redis://10.0.0.7:6379/0</dd>", "<dt>database</dt><dd>mysql://root:xxxxx@10.0.0.8:3306/flashsale</dd>",
			"<dt>race window</dt><dd>the servers' own (not known to the lab)</dd>",
			"<dt>sale</dt><dd>stock 50, 300 buyers, 900 order attempts (double-click chance 0.25), seed 1</dd>",
			"<dt>load</dt><dd>closed model, 200 in flight</dd>", "<dt>machine</dt><dd>" + lab.Machine() + " (where the load ran)</dd>"}},
		{"in-process, open model", lab.Setup{Mode: lab.ModeInProcess, Instances: 3, RaceWindow: "2ms", Stock: 50, Shards: 4, Users: 300,
			Requests: 900, Concurrency: 100, Rate: 5000}, []string{
			"<dt>mode</dt><dd>in-process: 3 instances per strategy, inside the bench's process</dd>", "<dt>race window</dt><dd>2ms</dd>",
			"<dt>sale</dt><dd>stock 50 in 4 shards, 300 buyers",
			"<dt>load</dt><dd>open model, 5000 requests/s (at most 100 in flight), latency from the scheduled send time</dd>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := html.UnescapeString(writeHTML(t, lab.Report{Setup: tt.setup, Runs: sampleRows()}))
			for _, w := range tt.want {
				if !strings.Contains(page, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
		})
	}
}

// TestHTMLRoundsForReading: the table shows rates whole and with
// thousands separated, latencies to two or three digits; each cell keeps
// the exact figure in its data-value.
func TestHTMLRoundsForReading(t *testing.T) {
	rows := sampleRows()[:1]
	rows[0].RPS, rows[0].CeilingRPS = 10411.3, 999.5
	rows[0].P50Ms, rows[0].P90Ms, rows[0].P99Ms, rows[0].MaxMs = 0.234, 12.345, 1206.3, 99.96
	page := writeHTML(t, lab.Report{Runs: rows})
	for _, want := range []string{
		`data-field="rps" data-value="10411.3">10,411<`, `data-field="ceiling_rps" data-value="999.5">1,000<`,
		`data-field="p50_ms" data-value="0.234">0.23<`, `data-field="p90_ms" data-value="12.345">12.3<`,
		`data-field="p99_ms" data-value="1206.3">1,206<`, `data-field="max_ms" data-value="99.96">100<`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the table lacks %s", want)
		}
	}
}

// TestHTMLShowsTheOrdersLife: rows with a payment window get the
// lifecycle columns (a payment after close marked), and a report's
// Lifecycle report (the demo's second set of sales) follows the first on
// the page with its setup, table and verdicts.
func TestHTMLShowsTheOrdersLife(t *testing.T) {
	setup := sampleSetup()
	setup.PaymentWindowSeconds, setup.PayRatio, setup.CancelRatio, setup.SaleDuration = 2, 0.8, 0.1, "30s"
	page := writeHTML(t, lab.Report{Setup: sampleSetup(), Runs: sampleRows(), Lifecycle: &lab.Report{Setup: setup, Runs: lifecycleRows()}})
	first, second := section(page, `id="audit"`), page[strings.Index(page, `id="second"`):]
	if strings.Contains(first, "paid_after_close") {
		t.Error("the first table, without a payment window, has the lifecycle columns")
	}
	text := html.UnescapeString(second)
	for _, want := range []string{
		"payment window 2s: 80% of orders paid, 10% cancelled, 10% never paid",
		`<td data-field="paid_units">9</td>`, `<td data-field="unpaid_units">1</td>`,
		`<td data-field="paid_after_close" class="bad">1</td>`,
		"batch: 1 orders paid after they closed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the second report lacks %q", want)
		}
	}
	if n := strings.Count(second, `<tr class="exact">`); n != 2 {
		t.Errorf("%d exact rows in the second table, want 2", n)
	}
}
