package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// checkDemoReport checks the demo's --html page (TestDemo) against its
// --json: no external URL, every figure of its table equal to the JSON's,
// the unsafe rows marked, the verdicts in words, the series consistent
// with the table, the tables rendered by headless Chromium, and the page
// fitting a 1400 px window.
func checkDemoReport(t *testing.T, jsonPath, htmlPath string) {
	t.Helper()
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs      []map[string]any
		Lifecycle struct{ Runs []map[string]any }
	}
	var rows lab.Report
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`).Find(page); m != nil {
		t.Errorf("the report refers to an external URL: %s", m)
	}
	first, second, _ := strings.Cut(string(page), `<h2 id="second">`)
	if len(doc.Runs) != len(strategies()) || rows.Lifecycle == nil || len(doc.Lifecycle.Runs) != 5 {
		t.Fatalf("the JSON has %d runs and %d with a payment window; want %d and 5", len(doc.Runs), len(doc.Lifecycle.Runs), len(strategies()))
	}
	checkTableRows(t, first, doc.Runs, rows.Runs)
	checkTableRows(t, second, doc.Lifecycle.Runs, rows.Lifecycle.Runs)
	for _, row := range rows.Runs {
		answered := 0
		for _, n := range row.Throughput {
			answered += n
		}
		if answered != row.Requests-row.Errors || len(row.Latency) == 0 {
			t.Errorf("%s: throughput adds up to %d, want %d answered; %d latency points", row.Strategy, answered, row.Requests-row.Errors, len(row.Latency))
		}
		for _, p := range row.Latency {
			if p.Percentile == 50 && p.Ms != row.P50Ms {
				t.Errorf("%s: the distribution's p50 is %v ms, the table's %v", row.Strategy, p.Ms, row.P50Ms)
			}
		}
	}
	for _, v := range append(lab.Verdicts(rows.Runs), lab.Verdicts(rows.Lifecycle.Runs)...) {
		if !strings.Contains(html.UnescapeString(string(page)), v) {
			t.Errorf("the report lacks the verdict %q", v)
		}
	}
	dom := chromium(t, "file://"+htmlPath, "--dump-dom")
	_, latency, _ := bytes.Cut(dom, []byte("Latency distribution"))
	if !bytes.Contains(dom, []byte(`<table id="audit">`)) || !bytes.Contains(dom, []byte(`data-field="strategy">naive<`)) ||
		!bytes.Contains(dom, []byte(`<table id="lifecycle-audit">`)) || !bytes.Contains(dom, []byte(`data-field="paid_units">`)) ||
		bytes.Count(dom, []byte(`<rect class="rate"`)) != len(rows.Runs) || bytes.Count(latency, []byte("<polyline")) != len(rows.Runs) {
		t.Errorf("Chromium did not render the table, the %d rates and the %d latency lines:\n%s", len(rows.Runs), len(rows.Runs), dom)
	}
	setup := html.UnescapeString(string(page))
	for _, want := range []string{"<dt>mode</dt><dd>in-process: 3 instances per strategy", "<dt>race window</dt><dd>2ms</dd>",
		"<dt>load</dt><dd>closed model, 10 in flight</dd>", "<dt>machine</dt><dd>" + lab.Machine()} {
		if !strings.Contains(setup, want) {
			t.Errorf("the report's setup lacks %q", want)
		}
	}
	checkTableFits(t, htmlPath)
}

// checkTableRows checks the rows of the audit table in page against the
// runs of the JSON, decoded both as maps (runs) and as rows: one row each,
// marked exact or not as the row is, every figure the JSON's (a run's
// lifecycle's among them) and shown as the report rounds it.
func checkTableRows(t *testing.T, page string, runs []map[string]any, rows []lab.Row) {
	t.Helper()
	tableRows := regexp.MustCompile(`<tr class="(exact|unsafe)">([\s\S]*?)</tr>`).FindAllStringSubmatch(page, -1)
	if len(tableRows) != len(runs) {
		t.Fatalf("the table has %d rows, the JSON %d runs", len(tableRows), len(runs))
	}
	cell := regexp.MustCompile(`data-field="(\w+)"(?: data-value="([^"]*)")?[^>]*>([^<]*)<`)
	for i, tr := range tableRows {
		run, row := runs[i], rows[i]
		if (tr[1] == "exact") != row.Exact() {
			t.Errorf("%s is marked %s, but Exact() is %v", row.Strategy, tr[1], row.Exact())
		}
		cells := cell.FindAllStringSubmatch(tr[2], -1)
		if len(cells) < 20 {
			t.Fatalf("row %d has %d figures", i, len(cells))
		}
		for _, c := range cells {
			field, exact, shown := c[1], c[2], html.UnescapeString(c[3])
			if exact == "" {
				exact = shown
			}
			v, ok := run[field]
			if lc, _ := run["lifecycle"].(map[string]any); !ok && lc != nil {
				v = lc[field]
			}
			if want := jsonText(v); exact != want {
				t.Errorf("%s %s: the page holds %q, the JSON %q", row.Strategy, field, exact, want)
			}
			if !readsAs(shown, exact) {
				t.Errorf("%s %s: the page shows %q for %s", row.Strategy, field, shown, exact)
			}
		}
	}
}

// readsAs reports whether shown is exact as the report rounds it: the
// same, or a number within half its last shown digit.
func readsAs(shown, exact string) bool {
	if shown == exact {
		return true
	}
	v, err1 := strconv.ParseFloat(exact, 64)
	s, err2 := strconv.ParseFloat(strings.ReplaceAll(shown, ",", ""), 64)
	if err1 != nil || err2 != nil {
		return false
	}
	unit := 1.0
	if _, frac, ok := strings.Cut(shown, "."); ok {
		unit = math.Pow(10, -float64(len(frac)))
	}
	return math.Abs(s-v) <= unit/2+1e-9
}

// TestHTMLReportFitsAt1400px: the audit table of a bench with long run
// names (the broken locks') and five-digit figures fits a 1400 px window:
// no column, the latencies least of all, hides behind a scroll bar.
func TestHTMLReportFitsAt1400px(t *testing.T) {
	rows := make([]lab.Row, 0, 8)
	for _, name := range []string{"naive", "mutex", "optimistic", "conditional", "stocklock:setnx-expire", "stocklock:checkdel", "batch", "async"} {
		rows = append(rows, lab.Row{Strategy: name, Instances: 3, Stock: 2000, Requests: 30000, Accepted: 3850,
			Rejected: map[string]int{"sold_out": 22000, "duplicate_order": 3650, "busy": 500}, Orders: 3850, Units: 3850, DistinctBuyers: 3700,
			DuplicateBuyers: 150, RemainingDB: 150, Oversold: 1850, StockDrift: -1850, Undersold: 150, Errors: 12,
			RPS: 12345.6, CeilingRPS: 45678.9, P50Ms: 1234.567, P90Ms: 2345.678, P99Ms: 3456.789, MaxMs: 30000})
	}
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	life := make([]lab.Row, 0, 5)
	for _, r := range rows[3:] {
		r.Lifecycle = &lab.Lifecycle{Payments: 1800, PaymentUnits: 1800, Cancels: 1234, Late: 1234, Abandoned: 1234,
			Ended: lab.EndedSale, PaidUnits: 1800, Cancelled: 12345, Expired: 12345, ReturnedUnits: 24690, Resold: 24690, Unpaid: 200}
		r.Rejected["order_closed"], r.Rejected["limit_reached"] = 1234, 1234
		life = append(life, r)
	}
	setup := lab.Setup{Mode: lab.ModeProcesses, Instances: 3}
	lifeSetup := setup
	lifeSetup.PaymentWindowSeconds, lifeSetup.PayRatio, lifeSetup.CancelRatio, lifeSetup.SaleDuration = 2, 0.8, 0.1, "20s"
	if err := lab.WriteHTML(f, lab.Report{Setup: setup, Runs: rows, Lifecycle: &lab.Report{Setup: lifeSetup, Runs: life}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	checkTableFits(t, path)
}

// checkTableFits opens a copy of the report at path, with a script that
// measures the page and each panel, in a 1400 px wide Chromium window, and
// fails if the page is wider than the window or a panel's content wider
// than the panel (a table that scrolls). (The report itself runs no
// script.)
func checkTableFits(t *testing.T, path string) {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const measure = `<script>const w = [document.documentElement.scrollWidth];
for (const p of document.querySelectorAll(".panel")) w.push((p.firstElementChild.id || "panel") + ":" + p.scrollWidth + "/" + p.clientWidth);
document.body.dataset.layout = w.join(" ");</script></body>`
	copyPath := filepath.Join(t.TempDir(), "measured.html")
	if err := os.WriteFile(copyPath, bytes.Replace(page, []byte("</body>"), []byte(measure), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := chromium(t, "file://"+copyPath, "--window-size=1400,1000", "--dump-dom")
	m := regexp.MustCompile(`data-layout="(\d+) ([^"]*)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the measuring script did not run:\n%s", dom)
	}
	if w := mustAtoi(t, string(m[1])); w > 1400 {
		t.Errorf("at 1400 px the page is %d px wide: it scrolls (%s)", w, m[2])
	}
	for _, panel := range strings.Fields(string(m[2])) {
		var name string
		var content, width int
		if _, err := fmt.Sscanf(strings.Replace(panel, ":", " ", 1), "%s %d/%d", &name, &content, &width); err != nil {
			t.Fatalf("measured %q: %v", panel, err)
		}
		if content > width {
			t.Errorf("at 1400 px the panel of %s holds %d px in %d: it scrolls", name, content, width)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// jsonText formats a decoded JSON value as the report shows it.
func jsonText(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	}
	return "?"
}
