package main

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// TestDemoHTMLReport runs the demo with --json and --html and checks the
// page: no external URL, every figure of its table equal to the JSON's,
// the unsafe rows marked, the verdicts in words, the series consistent
// with the table, and the table rendered by headless Chromium.
func TestDemoHTMLReport(t *testing.T) {
	defer noScratchLeft(t, privateTempDir(t))
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "demo.json"), filepath.Join(dir, "demo.html")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"demo", "--users", "120", "--stock", "20", "--json", jsonPath, "--html", htmlPath}, &stdout, &stderr); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Runs []map[string]any }
	var rows struct{ Runs []lab.Row }
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
	tableRows := regexp.MustCompile(`<tr class="(exact|unsafe)">([\s\S]*?)</tr>`).FindAllStringSubmatch(string(page), -1)
	if want := len(strategies()); len(tableRows) != len(doc.Runs) || len(doc.Runs) != want {
		t.Fatalf("the table has %d rows, the JSON %d runs; want %d", len(tableRows), len(doc.Runs), want)
	}
	cell := regexp.MustCompile(`data-field="(\w+)"[^>]*>([^<]*)<`)
	for i, tr := range tableRows {
		run, row := doc.Runs[i], rows.Runs[i]
		if (tr[1] == "exact") != row.Exact() {
			t.Errorf("%s is marked %s, but Exact() is %v", row.Strategy, tr[1], row.Exact())
		}
		cells := cell.FindAllStringSubmatch(tr[2], -1)
		if len(cells) < 20 {
			t.Fatalf("row %d has %d figures", i, len(cells))
		}
		for _, c := range cells {
			if got, want := html.UnescapeString(c[2]), jsonText(run[c[1]]); got != want {
				t.Errorf("%s %s: the page shows %q, the JSON %q", row.Strategy, c[1], got, want)
			}
		}
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
	for _, v := range lab.Verdicts(rows.Runs) {
		if !strings.Contains(html.UnescapeString(string(page)), v) {
			t.Errorf("the report lacks the verdict %q", v)
		}
	}
	dom := chromium(t, "file://"+htmlPath, "--dump-dom")
	if !bytes.Contains(dom, []byte(`<table id="audit">`)) || !bytes.Contains(dom, []byte(`data-field="strategy">naive<`)) ||
		bytes.Count(dom, []byte("<polyline")) != 2*len(rows.Runs) {
		t.Errorf("Chromium did not render the table and the %d lines (throughput and latency per strategy):\n%s", 2*len(rows.Runs), dom)
	}
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
