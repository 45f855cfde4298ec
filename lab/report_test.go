package lab_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// documented are the keys of a run in flashsale bench --json, as the lab
// brief lists them, plus voucher_id and stock.
var documented = []string{
	"strategy", "voucher_id", "instances", "stock", "requests", "accepted", "rejected", "errors", "orders",
	"distinct_buyers", "duplicate_buyers", "remaining_db", "remaining_redis", "oversold", "lost",
	"undersold", "stock_drift", "rps", "p50_ms", "p90_ms", "p99_ms", "max_ms", "ceiling_rps",
	"elapsed_ms", "sold_out_ms", "throughput", "latency", // the series behind --html
}

// documentedSetup are the keys of the setup in flashsale bench --json.
var documentedSetup = []string{
	"mode", "targets", "instances", "redis", "db", "race_window", "stock", "shards", "users", "requests",
	"double_clicks", "seed", "concurrency", "rate", "machine",
}

// sampleSetup is the setup of a bench against two running servers.
func sampleSetup() lab.Setup {
	return lab.Setup{Mode: lab.ModeTargets, Targets: []string{"http://10.0.0.5:8080", "http://10.0.0.6:8080"}, Instances: 2,
		Redis: "redis://10.0.0.7:6379/0", DB: "mysql://root:xxxxx@10.0.0.8:3306/flashsale", Stock: 50, Shards: 1, Users: 300,
		Requests: 900, DoubleClicks: 0.25, Seed: 1, Concurrency: 200, Rate: 0, Machine: lab.Machine()}
}

func sampleRows() []lab.Row {
	zero := 0
	return []lab.Row{
		{Strategy: "naive", Instances: 3, Stock: 50, Requests: 900, Accepted: 120, Rejected: map[string]int{"duplicate_order": 780},
			Orders: 120, DistinctBuyers: 120, RemainingDB: 20, Oversold: 70, StockDrift: -90, RPS: 1000, CeilingRPS: 4000},
		{Strategy: "optimistic", Instances: 3, Stock: 50, Requests: 900, Accepted: 20, Rejected: map[string]int{"sold_out": 880},
			Orders: 20, DistinctBuyers: 20, RemainingDB: 30, Undersold: 30},
		{Strategy: "conditional", Instances: 3, Stock: 50, Requests: 900, Accepted: 50, Rejected: map[string]int{"sold_out": 850},
			Orders: 50, DistinctBuyers: 50},
		{Strategy: "async", Instances: 3, Stock: 50, Requests: 900, Accepted: 50, Rejected: map[string]int{"sold_out": 850},
			Orders: 50, DistinctBuyers: 50, RemainingRedis: &zero},
	}
}

// TestWriteJSONSchema checks the documented keys and that remaining_redis
// is null where a strategy keeps no stock in Redis.
func TestWriteJSONSchema(t *testing.T) {
	var buf bytes.Buffer
	if err := lab.WriteJSON(&buf, lab.Report{Setup: sampleSetup(), Runs: sampleRows()}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Setup map[string]any   `json:"setup"`
		Runs  []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(doc.Runs))
	}
	if got, want := slices.Sorted(maps.Keys(doc.Setup)), slices.Sorted(slices.Values(documentedSetup)); !slices.Equal(got, want) {
		t.Errorf("the setup has keys %v, want %v", got, want)
	}
	want := slices.Sorted(slices.Values(documented))
	for _, run := range doc.Runs {
		if got := slices.Sorted(maps.Keys(run)); !slices.Equal(got, want) {
			t.Errorf("run %v has keys %v, want %v", run["strategy"], got, want)
		}
	}
	if doc.Runs[0]["remaining_redis"] != nil || doc.Runs[3]["remaining_redis"] != 0.0 {
		t.Errorf("remaining_redis %v and %v; want null for naive and 0 for async", doc.Runs[0]["remaining_redis"], doc.Runs[3]["remaining_redis"])
	}
	if doc.Runs[0]["rejected"].(map[string]any)["duplicate_order"] != 780.0 || doc.Runs[0]["stock_drift"] != -90.0 {
		t.Errorf("naive run %v", doc.Runs[0])
	}
}

// TestWriteTable checks that the default table has one row per run with
// the audit's columns under their names, within 100 columns.
func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := lab.WriteTable(&buf, sampleRows()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("table of %d lines, want 2 headings and 4 rows:\n%s", len(lines), buf.String())
	}
	for i, want := range [][]string{
		{"dup", "lost", "stock", "p99"},
		{"strategy", "orders", "stock", "oversold", "buyers", "orders", "undersold", "drift", "errors", "rps", "ms"},
		{"naive", "120", "50", "70", "0", "0", "0", "-90", "0", "1000", "0.0"},
	} {
		if got := strings.Fields(lines[i]); !slices.Equal(got, want) {
			t.Errorf("line %d reads %q, want %q:\n%s", i, got, want, buf.String())
		}
	}
	// A heading of two words stands over its column: both lines' words
	// end in the same place.
	under := wordEnds(lines[1])
	for e, top := range wordEnds(lines[0]) {
		if want := map[string]string{"dup": "buyers", "lost": "orders", "stock": "drift", "p99": "ms"}[top]; under[e] != want {
			t.Errorf("%q stands over %q, want %q:\n%s", top, under[e], want, buf.String())
		}
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("a line of %d columns, want at most 100: %q", len(l), l)
		}
	}
}

// wordEnds maps where each word of line ends to the word.
func wordEnds(line string) map[int]string {
	ends := map[int]string{}
	for i := 0; i < len(line); i++ {
		if line[i] != ' ' && (i+1 == len(line) || line[i+1] == ' ') {
			start := strings.LastIndex(line[:i+1], " ") + 1
			ends[i] = line[start : i+1]
		}
	}
	return ends
}

// TestWriteWideTable checks that the wide table has one row per run, the
// ratio to the ceiling, and "-" where Redis keeps no stock.
func TestWriteWideTable(t *testing.T) {
	var buf bytes.Buffer
	if err := lab.WriteWideTable(&buf, sampleRows()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 || strings.Fields(lines[1])[0] != "naive" || !strings.Contains(lines[1], " 25% ") ||
		!strings.Contains(lines[1], " -90 ") || !strings.Contains(lines[1], " - ") || !strings.HasSuffix(lines[1], "duplicate_order=780") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestVerdictsComeFromTheNumbers checks that the sentences name what each
// row's numbers show, and group the exact rows.
func TestVerdictsComeFromTheNumbers(t *testing.T) {
	got := strings.Join(lab.Verdicts(sampleRows()), "\n")
	for _, want := range []string{
		"naive: oversold 70 (120 orders for 50 units); stock drift -90: 90 stock updates lost (the stock fell by 30 for 120 orders).",
		"optimistic: undersold 30",
		"exact: conditional (50 orders for 50 units), async (50 orders for 50 units)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdicts lack %q:\n%s", want, got)
		}
	}
}
