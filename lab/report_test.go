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
	"units", "limit_per_buyer", "max_buyer_units", "lifecycle", // the purchase rules and the order's life
	"crowd", // a sale of bots and people
	"distinct_buyers", "duplicate_buyers", "remaining_db", "remaining_redis", "oversold", "lost",
	"undersold", "stock_drift", "rps", "p50_ms", "p90_ms", "p99_ms", "max_ms", "ceiling_rps",
	"elapsed_ms", "sold_out_ms", "throughput", "latency", // the series behind --html
}

// documentedSetup are the keys of the setup in flashsale bench --json.
var documentedSetup = []string{
	"mode", "targets", "instances", "redis", "db", "race_window", "stock", "shards", "users", "requests",
	"double_clicks", "seed", "concurrency", "rate", "machine",
	"quantity_max", "limit_per_buyer", "payment_window_seconds", "pay_ratio", "cancel_ratio", "sale_duration",
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
			Orders: 120, Units: 120, DistinctBuyers: 120, RemainingDB: 20, Oversold: 70, StockDrift: -90, RPS: 1000, CeilingRPS: 4000},
		{Strategy: "optimistic", Instances: 3, Stock: 50, Requests: 900, Accepted: 20, Rejected: map[string]int{"sold_out": 880},
			Orders: 20, Units: 20, DistinctBuyers: 20, RemainingDB: 30, Undersold: 30},
		{Strategy: "conditional", Instances: 3, Stock: 50, Requests: 900, Accepted: 50, Rejected: map[string]int{"sold_out": 850},
			Orders: 50, Units: 50, DistinctBuyers: 50},
		{Strategy: "async", Instances: 3, Stock: 50, Requests: 900, Accepted: 50, Rejected: map[string]int{"sold_out": 850},
			Orders: 50, Units: 50, DistinctBuyers: 50, RemainingRedis: &zero},
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
		{"strategy", "sold", "stock", "oversold", "buyers", "orders", "undersold", "drift", "errors", "rps", "ms"},
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

// lifecycleRows are rows of sales with a payment window: async sold
// every unit, conditional's sale ended with one unpaid, and batch took a
// payment after an order expired.
func lifecycleRows() []lab.Row {
	zero := 0
	lc := func(paid, cancelled, expired, returned, resold, late, after, unpaid int, ended string) *lab.Lifecycle {
		return &lab.Lifecycle{Payments: paid, PaymentUnits: paid, Cancels: cancelled, Late: late, Refused: map[string]int{}, Ended: ended, Waves: 12,
			PaidUnits: paid, Cancelled: cancelled, Expired: expired, ReturnedUnits: returned, Resold: resold, Unpaid: unpaid, PaidAfterClose: after}
	}
	return []lab.Row{
		{Strategy: "conditional", Instances: 2, Stock: 10, Requests: 400, Accepted: 14, Orders: 9, Units: 9, DistinctBuyers: 9, RemainingDB: 1,
			LimitPerBuyer: 1, MaxBuyerUnits: 1, Lifecycle: lc(9, 1, 4, 5, 4, 1, 0, 1, lab.EndedSale), Series: lab.Series{ElapsedMs: 61000}},
		{Strategy: "async", Instances: 2, Stock: 10, Requests: 300, Accepted: 13, Orders: 10, Units: 10, DistinctBuyers: 10, RemainingRedis: &zero,
			LimitPerBuyer: 1, MaxBuyerUnits: 1, Lifecycle: lc(10, 1, 2, 3, 3, 0, 0, 0, lab.EndedPaid), Series: lab.Series{ElapsedMs: 4200}},
		{Strategy: "batch", Instances: 2, Stock: 10, Requests: 300, Accepted: 13, Orders: 10, Units: 10, DistinctBuyers: 10,
			LimitPerBuyer: 1, MaxBuyerUnits: 1, Lifecycle: lc(10, 1, 2, 3, 3, 0, 1, 0, lab.EndedPaid), Series: lab.Series{ElapsedMs: 4000}},
	}
}

// TestWriteLifecycleTable: rows of sales with a payment window get a
// second table, within 100 columns, of what became of their orders;
// rows without one get none.
func TestWriteLifecycleTable(t *testing.T) {
	var none bytes.Buffer
	if err := lab.WriteLifecycleTable(&none, sampleRows()); err != nil || none.Len() != 0 {
		t.Fatalf("a lifecycle table of rows without a payment window: %v\n%s", err, none.String())
	}
	var buf bytes.Buffer
	if err := lab.WriteLifecycleTable(&buf, lifecycleRows()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("table of %d lines, want 2 headings and 3 rows:\n%s", len(lines), buf.String())
	}
	for i, want := range [][]string{
		{"paid", "returned", "resold", "paid", "after", "sale"},
		{"strategy", "units", "stock", "cancelled", "expired", "units", "units", "late", "close", "unpaid", "s"},
		{"conditional", "9", "10", "1", "4", "5", "4", "1", "0", "1", "61.0"},
	} {
		if got := strings.Fields(lines[i]); !slices.Equal(got, want) {
			t.Errorf("line %d reads %q, want %q:\n%s", i, got, want, buf.String())
		}
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("a line of %d columns, want at most 100: %q", len(l), l)
		}
	}
}

// TestLifecycleVerdicts: a payment after close is a problem; a sale that
// ended with units unpaid is told, not blamed; every row says what became
// of its orders.
func TestLifecycleVerdicts(t *testing.T) {
	got := strings.Join(lab.Verdicts(lifecycleRows()), "\n")
	for _, want := range []string{
		"batch: 1 orders paid after they closed (cancelled or expired).",
		"exact: conditional (9 orders for 10 units), async (10 orders for 10 units): nothing oversold, one order per buyer, no accepted order lost, no stock drift, no payment after close.",
		"conditional: 9 of 10 units paid (the sale ended: 1 unpaid) in 61.0 s; orders cancelled 1, expired 4: 5 units returned, 4 resold;",
		"async: 10 of 10 units paid in 4.2 s;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdicts lack %q:\n%s", want, got)
		}
	}
	rows := lifecycleRows()
	if rows[0].Exact() != true || rows[2].Exact() != false {
		t.Errorf("exact: conditional %v, batch %v; want true and false", rows[0].Exact(), rows[2].Exact())
	}
}

// TestWideTableWithLifecycle: the wide table has the lifecycle columns
// when a row has a payment window, "-" in the rows without one.
func TestWideTableWithLifecycle(t *testing.T) {
	var buf bytes.Buffer
	if err := lab.WriteWideTable(&buf, append(lifecycleRows(), sampleRows()[0])); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, col := range []string{"units", "buyer max", "paid units", "cancelled", "expired", "returned units", "resold units", "late", "paid after close", "unpaid"} {
		if !strings.Contains(lines[0], "  "+col+"  ") {
			t.Errorf("the heading lacks %q: %s", col, lines[0])
		}
	}
	if len(lines) != 5 {
		t.Fatalf("table:\n%s", buf.String())
	}
	naive := strings.Fields(lines[4])
	if i := slices.Index(naive, "-90"); i < 0 || !slices.Equal(naive[i+1:i+9], strings.Fields(strings.Repeat("- ", 8))) {
		t.Errorf("the row without a payment window has no dashes under the lifecycle columns:\n%s", buf.String())
	}
}

// TestWriteJSONLifecycle checks the keys of a run's lifecycle.
func TestWriteJSONLifecycle(t *testing.T) {
	var buf bytes.Buffer
	if err := lab.WriteJSON(&buf, lab.Report{Setup: sampleSetup(), Runs: lifecycleRows()}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Lifecycle map[string]any `json:"lifecycle"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want := []string{"payments", "payment_units", "cancels", "late", "abandoned", "refused", "errors", "ended", "waves",
		"paid_units", "cancelled", "expired", "returned_units", "resold_units", "unpaid_units", "paid_after_close"}
	if got := slices.Sorted(maps.Keys(doc.Runs[0].Lifecycle)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("a lifecycle has keys %v, want %v", got, want)
	}
	if doc.Runs[2].Lifecycle["paid_after_close"] != 1.0 || doc.Runs[0].Lifecycle["ended"] != lab.EndedSale {
		t.Errorf("lifecycles %v", doc.Runs)
	}
}
