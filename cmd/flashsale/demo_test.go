package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// TestDemo runs flashsale demo end to end on the embedded backends and
// checks its audit: the unsafe strategies misbehave, optimistic never
// oversells, and the safe ones are exact.
func TestDemo(t *testing.T) {
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
	var doc struct{ Runs []lab.Row }
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
	for _, name := range []string{"conditional", "lock", "batch", "async"} {
		if r := runs[name]; !r.Exact() || r.Orders != r.Stock || r.Errors != 0 {
			t.Errorf("%s is not exact: %+v", name, r)
		}
	}
	if r := runs["async"]; r.RemainingRedis == nil || *r.RemainingRedis != 0 {
		t.Errorf("async: remaining_redis %v, want 0", r.RemainingRedis)
	}
	for _, want := range []string{"mode: in-process — 3 instances", "exact: ", "conditional (50 orders for 50 units)", "flashsale bench --strategy naive,mutex,optimistic,conditional,lock,batch,async --instances 3"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
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
