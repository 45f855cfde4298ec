package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flashsale/flashsale/lab"
)

// TestDemo runs one small flashsale demo end to end on the embedded
// backends, with --json and --html, and checks its audit (the unsafe
// strategies misbehave, optimistic never oversells, the safe ones are
// exact), what the sales with a payment window promise, the HTML report
// (checkDemoReport) and the README's demo table against its output.
func TestDemo(t *testing.T) {
	tmp := privateTempDir(t)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "demo.json"), filepath.Join(dir, "demo.html")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"demo", "--users", "60", "--stock", "10", "--concurrency", "10", "--json", jsonPath, "--html", htmlPath}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	// Requests that timed out (30 s) say the machine was too busy, not
	// that a promise was broken: every promise is checked all the same,
	// only not that every request got an answer.
	slow := err != nil && errors.Is(err, lab.ErrTransport) && !errors.Is(err, lab.ErrUnreachable) && strings.Contains(err.Error(), "Client.Timeout exceeded")
	if err != nil && !slow {
		t.Fatalf("demo: %v\nstderr:\n%s", err, stderr.String())
	} else if slow {
		t.Logf("requests timed out on this machine: %v", err)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc lab.Report
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	runs := map[string]lab.Row{}
	for _, r := range doc.Runs {
		runs[r.Strategy] = r
	}
	if len(runs) != len(strategies()) {
		t.Fatalf("%d strategies ran, want %d: %s", len(runs), len(strategies()), raw)
	}
	for _, name := range []string{"naive", "mutex"} {
		if r := runs[name]; r.Oversold == 0 && r.StockDrift == 0 && r.DuplicateBuyers == 0 {
			t.Errorf("%s on 3 instances shows no oversell, drift or duplicate: %+v", name, r)
		}
	}
	if r := runs["optimistic"]; r.Oversold != 0 || r.StockDrift != 0 || r.DuplicateBuyers != 0 || r.Lost != 0 {
		t.Errorf("optimistic oversold, drifted, duplicated or lost: %+v", r)
	}
	for _, name := range []string{"conditional", "lock", "stocklock", "batch", "async"} {
		r := runs[name]
		if r.Oversold != 0 || r.DuplicateBuyers != 0 || r.Lost != 0 || r.StockDrift != 0 || r.Errors != 0 && !slow {
			t.Errorf("%s is not exact: %+v", name, r)
		}
		// A lock's wait (1 s) may run out on a loaded machine: busy, and
		// units left. Everything else sells the stock.
		if busy := r.Rejected["busy"]; (r.Undersold != 0 || r.Orders != r.Stock) && (busy == 0 || r.Undersold > busy) && !slow {
			t.Errorf("%s sold %d of %d units and turned nobody away busy: %+v", name, r.Orders, r.Stock, r)
		} else if busy > 0 {
			t.Logf("%s: %d buyers turned away busy (its lock's wait ran out), %d units undersold", name, busy, r.Undersold)
		}
	}
	if r := runs["async"]; r.RemainingRedis == nil || *r.RemainingRedis != 0 {
		t.Errorf("async: remaining_redis %v, want 0", r.RemainingRedis)
	}
	words := strings.Join(strings.Fields(stdout.String()), " ") // the paragraphs unwrapped
	for _, want := range []string{"mode: in-process — 3 instances", "exact: ", "async (10 orders for 10 units)",
		"flashsale bench --strategy naive,mutex,optimistic,conditional,lock,stocklock,batch,async \\ --instances 3", "ceiling: ",
		"on Redis DB 0 under the prefix lab: and the MySQL database flashsale_lab", "--redis redis://127.0.0.1:6379/0 --redis-prefix lab: \\ --db mysql://root@127.0.0.1:3306/flashsale_lab"} {
		if !strings.Contains(words, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	checkLifecycleDemo(t, doc, words, slow)
	checkWidth(t, "stdout", stdout.String(), 100)
	if stderr.Len() != 0 { // its progress shows on a terminal only
		t.Errorf("the demo wrote on a stderr that is not a terminal:\n%s", stderr.String())
	}
	noScratchLeft(t, tmp)
	checkWideWidth(t, doc.Runs)
	checkREADMEDemoTable(t, stdout.String())
	checkDemoReport(t, jsonPath, htmlPath)
}

// checkLifecycleDemo checks the demo's second set of sales for what a
// sale with a payment window promises, however fast the machine: nothing
// oversold, lost or paid after close, every returned unit resold or back
// on sale (no stock drift; for async Redis's stock the same), and every
// unit paid unless the sale ended first, which it does no sooner than
// saleScale times the first set's longest sale.
func checkLifecycleDemo(t *testing.T, doc lab.Report, words string, slow bool) {
	t.Helper()
	rep := doc.Lifecycle
	if rep == nil || len(rep.Runs) != 5 || rep.Setup.PaymentWindowSeconds != int(demoWindow/time.Second) {
		t.Fatalf("the lifecycle sales: %+v; want 5 runs with a %s window", rep, demoWindow)
	}
	if sd, _ := time.ParseDuration(rep.Setup.SaleDuration); sd != saleBound(20*time.Second, doc.Runs) || sd < 20*time.Second {
		t.Errorf("the sales with a payment window lasted at most %s; want the larger of 20s and %d× the longest first sale", sd, saleScale)
	}
	for _, r := range rep.Runs {
		lc := r.Lifecycle
		if lc == nil || lc.PaidAfterClose != 0 || r.Oversold != 0 || r.DuplicateBuyers != 0 || r.Lost != 0 || r.StockDrift != 0 || r.Undersold != 0 ||
			len(lc.Refused) != 0 || lc.PaidUnits != lc.PaymentUnits || (r.Errors != 0 || lc.Errors != 0 || !r.Exact()) && !slow {
			t.Errorf("%s: %+v", r.Strategy, r)
			continue
		}
		if r.RemainingRedis != nil && *r.RemainingRedis != r.RemainingDB {
			t.Errorf("%s: %d units left in Redis, %d in MySQL", r.Strategy, *r.RemainingRedis, r.RemainingDB)
		}
		if lc.Ended == lab.EndedPaid && (lc.PaidUnits != r.Stock || lc.Unpaid != 0) || !slices.Contains([]string{lab.EndedPaid, lab.EndedSale, lab.EndedBuyers}, lc.Ended) {
			t.Errorf("%s: lifecycle %+v; want every unit paid, or the sale or its buyers ended first", r.Strategy, *lc)
		}
		if lc.Ended != lab.EndedPaid {
			t.Logf("%s: %s with %d units unpaid (a loaded machine)", r.Strategy, lc.Ended, lc.Unpaid)
		}
	}
	for _, want := range []string{"Then, with a payment window: stock 10", "returned resold", "async: ",
		"--instances 3 --stock 10 --users 60 --payment-window 2s --pay-ratio 0.8 --cancel-ratio 0.1"} {
		if !strings.Contains(words, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}

// checkWideWidth measures --wide's table of the demo's runs: help bench
// and docs/testing.md say the same width, and it is within wideSlack of
// what was measured.
func checkWideWidth(t *testing.T, runs []lab.Row) {
	t.Helper()
	var wide bytes.Buffer
	if err := lab.WriteWideTable(&wide, runs); err != nil {
		t.Fatal(err)
	}
	widest := 0
	for _, line := range strings.Split(wide.String(), "\n") {
		widest = max(widest, utf8.RuneCountInString(line))
	}
	if widest < wideColumns-wideSlack || widest > wideColumns+wideSlack {
		t.Errorf("the wide table is %d columns wide; help says about %d:\n%s", widest, wideColumns, wide.String())
	}
	doc, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	if said := fmt.Sprintf("about %d characters wide", wideColumns); !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), said) {
		t.Errorf("docs/testing.md does not say --wide's table is %q, as help bench does (measured: %d)", said, widest)
	}
}

// checkREADMEDemoTable checks the README's demo table against the demo's
// output: the same two heading lines, word for word, and a row of as many
// figures for each strategy, in the order the demo runs them.
func checkREADMEDemoTable(t *testing.T, stdout string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tableOf(stdout)
	got, rows := tableOf(string(readme))
	if len(want) != 2 || !slices.Equal(got, want) {
		t.Fatalf("the README's demo table is headed %q; the demo prints %q", got, want)
	}
	columns := len(strings.Fields(want[1]))
	if len(rows) != len(strategies()) {
		t.Fatalf("the README's demo table has %d rows; the demo runs %d strategies", len(rows), len(strategies()))
	}
	for i, row := range rows {
		if f := strings.Fields(row); len(f) != columns || f[0] != strategies()[i] {
			t.Errorf("the README's demo table's row %q; want %s and %d figures", row, strategies()[i], columns-1)
		}
	}
}

// tableOf returns the first table in text headed by a line that starts
// with "strategy" and has "stock": its two heading lines, words joined by
// one space, and the lines of its rows up to the first blank one.
func tableOf(text string) (heading, rows []string) {
	lines := strings.Split(text, "\n")
	for i := 1; i < len(lines); i++ {
		f := strings.Fields(lines[i])
		if len(f) < 2 || f[0] != "strategy" || !slices.Contains(f, "stock") {
			continue
		}
		heading = []string{strings.Join(strings.Fields(lines[i-1]), " "), strings.Join(f, " ")}
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "```") {
				break
			}
			rows = append(rows, l)
		}
		return heading, rows
	}
	return nil, nil
}

// wideSlack is how far the wide table's width may be from what help says:
// the figures' digits and the refusal codes vary from run to run.
const wideSlack = 15

// checkWidth fails the test for a line of out wider than width columns.
func checkWidth(t *testing.T, what, out string, width int) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > width {
			t.Errorf("%s has a line of %d columns, want at most %d:\n%s", what, n, width, line)
		}
	}
}

// TestDemoWide: with --wide the table has every column, the ones the
// default table leaves out too.
func TestDemoWide(t *testing.T) {
	tmp := privateTempDir(t)
	defer noScratchLeft(t, tmp)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"demo", "--wide", "--stock", "5", "--users", "30", "--concurrency", "10", "--lifecycle=false"}, &stdout, &stderr)
	if err != nil || stderr.Len() != 0 {
		t.Fatalf("demo --wide: %v; want no error and, off a terminal, nothing on stderr:\n%s", err, stderr.String())
	}
	var heading string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "strategy ") {
			heading = line
		}
	}
	for _, column := range []string{"inst", "requests", "accepted", "rejected", "errors", "orders", "units", "buyers", "dup buyers", "buyer max",
		"left db", "left redis", "oversold", "lost orders", "undersold", "stock drift", "rps", "ceiling", "of ceiling",
		"p50 ms", "p90 ms", "p99 ms", "max ms", "rejected by code"} {
		if !strings.Contains(heading, " "+column) {
			t.Errorf("the wide table's heading lacks %q: %q", column, heading)
		}
	}
}

// TestDemoRefusesRealBackends checks that the demo says where real servers
// are benchmarked instead of silently ignoring --redis.
func TestDemoRefusesRealBackends(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"demo", "--redis", "redis://127.0.0.1:6379/0"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "embedded backends only") || !strings.Contains(err.Error(), "flashsale bench") {
		t.Errorf("demo --redis = %v; want a refusal that names flashsale bench", err)
	}
}
