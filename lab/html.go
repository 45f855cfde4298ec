package lab

import (
	_ "embed" // the report's template
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportTemplate string

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"codes":   codes,
	"total":   total,
	"redis":   func(n *int) string { return optional(n) },
	"number":  func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
	"rate":    thousands,
	"latency": millis,
	"percent": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "%" },
}).Parse(reportTemplate))

// WriteHTML writes rep as one self-contained HTML page (inline CSS and
// SVG, no script, nothing fetched) of the report's own figures, as
// WriteJSON writes them, rounded for reading (each exact one in its cell's
// data-value); a report with a Lifecycle report ends with that one's
// setup, table and verdicts. What the page shows: docs/observability.md.
func WriteHTML(w io.Writer, rep Report) error {
	seconds, short := secondsChart(rep.Runs)
	data := struct {
		Generated string
		Setup     []setupItem
		Audit     auditTable
		Verdicts  []string
		Rates     bars
		Seconds   *chart   // nil: no run lasted minSeconds whole seconds
		Short     []string // the runs Seconds leaves out
		Latency   chart
		Second    *secondReport
		Crowd     []Row // the runs with bots and people
	}{time.Now().UTC().Format(time.RFC3339), rep.Setup.items(), newAuditTable("audit", rep.Runs), Verdicts(rep.Runs), rateBars(rep.Runs),
		seconds, short, latencyChart(rep.Runs), nil, slices.DeleteFunc(slices.Clone(rep.Runs), func(r Row) bool { return r.Crowd == nil })}
	if l := rep.Lifecycle; l != nil {
		data.Second = &secondReport{Title: l.Setup.Sale(), Setup: l.Setup.items(), Audit: newAuditTable("lifecycle-audit", l.Runs), Verdicts: Verdicts(l.Runs)}
	}
	return reportPage.Execute(w, data)
}

// auditTable is the report's table of rows; with Life, the lifecycle
// columns too, and with Rules (orders of several units, or a limit per
// buyer above 1) the orders and the most units a buyer holds.
type auditTable struct {
	ID          string
	Rows        []Row
	Life, Rules bool
}

func newAuditTable(id string, rows []Row) auditTable {
	return auditTable{ID: id, Rows: rows,
		Life:  slices.ContainsFunc(rows, func(r Row) bool { return r.Lifecycle != nil }),
		Rules: slices.ContainsFunc(rows, func(r Row) bool { return r.Units != r.Orders || r.LimitPerBuyer > 1 })}
}

// secondReport is a Report's Lifecycle report, on the same page.
type secondReport struct {
	Title    string
	Setup    []setupItem
	Audit    auditTable
	Verdicts []string
}

func optional(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

// thousands formats f rounded to a whole number, its thousands
// separated: 10411.3 is "10,411".
func thousands(f float64) string {
	digits := strconv.FormatFloat(math.Abs(math.Round(f)), 'f', 0, 64)
	var b strings.Builder
	if math.Round(f) < 0 {
		b.WriteByte('-')
	}
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

// millis formats a latency in milliseconds to two or three significant
// digits: a hundredth below 1 ms, a tenth below 100 ms, whole ones above.
func millis(ms float64) string {
	switch {
	case round(ms, 2) < 1:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	case round(ms, 1) < 100:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	}
	return thousands(ms)
}

// seconds formats milliseconds as seconds, to a hundredth.
func seconds(ms float64) string {
	return strconv.FormatFloat(ms/1000, 'f', 2, 64)
}
