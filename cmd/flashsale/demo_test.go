package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flashsale/flashsale/lab"
)

// TestDemo runs flashsale demo end to end on the embedded backends and
// checks its audit: the unsafe strategies misbehave, optimistic never
// oversells, and the safe ones are exact.
func TestDemo(t *testing.T) {
	tmp := privateTempDir(t)
	jsonPath := filepath.Join(t.TempDir(), "demo.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"demo", "--json", jsonPath}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("demo: %v\nstderr:\n%s", err, stderr.String())
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
		if r := runs[name]; !r.Exact() || r.Orders != r.Stock || r.Errors != 0 {
			t.Errorf("%s is not exact: %+v", name, r)
		}
	}
	if r := runs["async"]; r.RemainingRedis == nil || *r.RemainingRedis != 0 {
		t.Errorf("async: remaining_redis %v, want 0", r.RemainingRedis)
	}
	words := strings.Join(strings.Fields(stdout.String()), " ") // the paragraphs unwrapped
	for _, want := range []string{"mode: in-process — 3 instances", "exact: ", "conditional (50 orders for 50 units)",
		"flashsale bench --strategy naive,mutex,optimistic,conditional,lock,stocklock,batch,async \\ --instances 3", "ceiling: "} {
		if !strings.Contains(words, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	checkLifecycleDemo(t, doc.Lifecycle, words)
	checkWidth(t, "stdout", stdout.String(), 100)
	checkWidth(t, "stderr", stderr.String(), 100)
	noScratchLeft(t, tmp)
	// What help bench says of --wide holds for the demo's runs.
	var wide bytes.Buffer
	if err := lab.WriteWideTable(&wide, doc.Runs); err != nil {
		t.Fatal(err)
	}
	widest := 0
	for _, line := range strings.Split(wide.String(), "\n") {
		widest = max(widest, utf8.RuneCountInString(line))
	}
	if widest < wideColumns-wideSlack || widest > wideColumns+wideSlack {
		t.Errorf("the wide table is %d columns wide; help says about %d:\n%s", widest, wideColumns, wide.String())
	}
}

// checkLifecycleDemo checks the demo's second set of sales: each safe
// strategy sold its units with a payment window until every one was paid,
// resold what came back, and took no payment after close.
func checkLifecycleDemo(t *testing.T, rep *lab.Report, words string) {
	t.Helper()
	if rep == nil || len(rep.Runs) != 5 || rep.Setup.PaymentWindowSeconds != int(demoWindow/time.Second) {
		t.Fatalf("the lifecycle sales: %+v; want 5 runs with a %s window", rep, demoWindow)
	}
	for _, r := range rep.Runs {
		lc := r.Lifecycle
		if lc == nil || lc.PaidAfterClose != 0 || r.Oversold != 0 || r.Lost != 0 || r.Errors != 0 || len(lc.Refused) != 0 {
			t.Errorf("%s: %+v", r.Strategy, r)
			continue
		}
		if !r.Exact() || lc.Ended != lab.EndedPaid || lc.PaidUnits != r.Stock || lc.ReturnedUnits == 0 || lc.Resold != lc.ReturnedUnits {
			t.Errorf("%s: lifecycle %+v; want every unit paid, some returned and all of them resold", r.Strategy, *lc)
		}
	}
	for _, want := range []string{"Then, with a payment window: stock 10", "returned resold", "async: 10 of 10 units paid in",
		"--instances 3 --stock 10 --users 60 --payment-window 2s --pay-ratio 0.8 --cancel-ratio 0.1"} {
		if !strings.Contains(words, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
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
	if err != nil {
		t.Fatalf("demo --wide: %v\nstderr:\n%s", err, stderr.String())
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
