package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
)

// benchOnServers runs bench with args on child processes of a freshly
// built binary, against the real Redis (a test prefix) and a fresh
// MariaDB database, and returns its stdout and its --json document.
func benchOnServers(t *testing.T, args ...string) (string, []byte) {
	t.Helper()
	stdout, raw, _ := benchOnServersDB(t, args...)
	return stdout, raw
}

// benchOnServersDB is benchOnServers, which also returns the database's
// URL, for a test to read what the sale left there.
func benchOnServersDB(t *testing.T, args ...string) (string, []byte, string) {
	t.Helper()
	bin := buildFlashsale(t)
	dbURL := testenv.MySQLURL(t)
	_, prefix := testenv.Redis(t) // the service's keys, deleted when the test ends
	jsonPath := filepath.Join(t.TempDir(), "runs.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append(append([]string{"bench"}, args...),
		"--redis", "redis://"+testenv.RedisAddr()+"/0", "--redis-prefix", prefix, "--db", dbURL,
		"--server-bin", bin, "--json", jsonPath,
	), &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, stderr.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), raw, dbURL
}

// TestBenchOnRealServers runs a small bench of conditional and async with
// two child processes each on the real Redis and MariaDB, and checks the
// audit and the --json schema.
func TestBenchOnRealServers(t *testing.T) {
	stdout, raw := benchOnServers(t, "--strategy", "conditional,async", "--instances", "2",
		"--stock", "20", "--users", "60", "--concurrency", "20", "--race-window", "1ms")
	var doc struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var rows struct{ Runs []lab.Row }
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2 || len(rows.Runs) != 2 {
		t.Fatalf("%d runs in %s, want 2", len(doc.Runs), raw)
	}
	keys := []string{"strategy", "instances", "requests", "accepted", "rejected", "errors", "orders", "distinct_buyers",
		"duplicate_buyers", "remaining_db", "remaining_redis", "oversold", "lost", "undersold", "stock_drift",
		"rps", "p50_ms", "p90_ms", "p99_ms", "max_ms", "ceiling_rps"}
	for _, run := range doc.Runs {
		for _, k := range keys {
			if _, ok := run[k]; !ok {
				t.Errorf("run %v lacks %q", run["strategy"], k)
			}
		}
	}
	if doc.Runs[0]["remaining_redis"] != nil || doc.Runs[1]["remaining_redis"] != 0.0 {
		t.Errorf("remaining_redis: conditional %v, async %v; want null and 0", doc.Runs[0]["remaining_redis"], doc.Runs[1]["remaining_redis"])
	}
	for _, r := range rows.Runs {
		if !r.Exact() || r.Orders != 20 || r.Accepted != 20 || r.RemainingDB != 0 || r.DistinctBuyers != 20 ||
			r.Requests != 180 || r.Errors != 0 || r.Instances != 2 || r.RPS <= 0 || r.CeilingRPS <= 0 {
			t.Errorf("run %+v; want exactly 20 orders of 20 buyers from 180 requests, none lost or duplicated", r)
		}
	}
	if !strings.Contains(stdout, "mode: processes — 2 `flashsale serve` child processes") {
		t.Error("the output does not say the instances ran as processes")
	}
}

// TestBenchWithAPaymentWindow runs a bench of conditional and async with a
// payment window and orders of one or two units, on two child processes
// each on the real Redis and MariaDB: every unit ends paid, the cancelled
// and expired ones resold, none paid after close; naive, which refuses a
// payment window, is skipped and says so.
func TestBenchWithAPaymentWindow(t *testing.T) {
	stdout, raw := benchOnServers(t, "--strategy", "naive,conditional,async", "--instances", "2", "--stock", "12", "--users", "60",
		"--concurrency", "20", "--payment-window", "1s", "--pay-ratio", "0.6", "--cancel-ratio", "0.2",
		"--quantity-max", "2", "--limit-per-buyer", "2")
	var doc struct {
		Setup lab.Setup
		Runs  []lab.Row
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2 || doc.Setup.PaymentWindowSeconds != 1 || doc.Setup.LimitPerBuyer != 2 || doc.Setup.QuantityMax != 2 {
		t.Fatalf("setup %+v, %d runs; want conditional and async with a 1s window, 1-2 units an order", doc.Setup, len(doc.Runs))
	}
	for _, r := range doc.Runs {
		lc := r.Lifecycle
		if !r.Exact() || r.Errors != 0 || lc == nil {
			t.Fatalf("run %+v is not exact", r)
		}
		if lc.Ended != lab.EndedPaid || lc.PaidUnits != 12 || lc.PaidAfterClose != 0 || lc.Cancelled == 0 || lc.Expired == 0 ||
			lc.Resold != lc.ReturnedUnits || r.MaxBuyerUnits > 2 {
			t.Errorf("%s: lifecycle %+v, most units of a buyer %d; want 12 units paid, the returned ones resold", r.Strategy, *lc, r.MaxBuyerUnits)
		}
	}
	for _, want := range []string{"skipped naive: unsafe by design", "paid after", "returned", "conditional: 12 of 12 units paid in"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

// TestBenchRejectsBadFlags checks the flag combinations bench refuses
// before starting anything.
func TestBenchRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown strategy", []string{"--strategy", "naive,pessimistic"}, `unknown strategy "pessimistic"`},
		{"no strategy", []string{"--strategy", " , "}, "names no strategy"},
		{"too few requests", []string{"--users", "100", "--requests", "50"}, "must be at least --users"},
		{"one in flight", []string{"--concurrency", "1"}, "at least 2"},
		{"no instances", []string{"--instances", "0"}, "--instances must be at least 1"},
		{"targets with nothing else: all that is missing at once", []string{"--target", "http://127.0.0.1:1"},
			"missing: --strategy with one label (the servers' strategy), --jwt-secret or --jwt-secret-file (to mint buyer tokens), --admin-token-file or --admin-token (to create the voucher), --redis, --db (the audit"},
		{"targets without secrets", []string{"--target", "http://127.0.0.1:1", "--strategy", "naive"},
			"missing: --jwt-secret or --jwt-secret-file (to mint buyer tokens), --admin-token-file or --admin-token (to create the voucher), --redis, --db ("},
		{"targets with two labels", []string{"--target", "http://127.0.0.1:1", "--strategy", "naive,mutex", "--jwt-secret", "s", "--admin-token", "a",
			"--redis", "redis://127.0.0.1:1/0", "--db", "mysql://root@127.0.0.1:1/x"}, "missing: --strategy with one label (the servers' strategy) ("},
		{"targets without backends", []string{"--target", "http://127.0.0.1:1", "--strategy", "naive", "--jwt-secret-file", "s", "--admin-token", "a"}, "missing: --redis, --db ("},
		{"prefix with a hash tag", []string{"--redis-prefix", "shop{1}:", "--strategy", "naive"}, "--redis-prefix must hold no braces"},
		{"a quantity past the limit", []string{"--quantity-max", "3", "--limit-per-buyer", "2"}, "--quantity-max must be 1 to --limit-per-buyer"},
		{"a limit past the stock", []string{"--stock", "5", "--limit-per-buyer", "6"}, "--limit-per-buyer must be 1 to 100 and at most --stock"},
		{"a window of part of a second", []string{"--payment-window", "1500ms"}, "--payment-window must be whole seconds"},
		{"ratios past 1", []string{"--payment-window", "2s", "--pay-ratio", "0.8", "--cancel-ratio", "0.3"}, "their sum at most 1"},
		{"only unsafe strategies with a window", []string{"--strategy", "naive,mutex", "--payment-window", "2s"}, "names only unsafe strategies"},
		{"an unknown admission", []string{"--admission", "lottery"}, `--admission must be "open", "queue" or both`},
		{"an unknown admission beside a known one", []string{"--admission", "open,lottery"}, `--admission must be "open", "queue" or both`},
		{"bots at no rate", []string{"--bots", "5", "--bot-rate", "0"}, "--bot-rate must be positive"},
		{"bots with a payment window", []string{"--bots", "5", "--payment-window", "2s"}, "without --payment-window or --rate"},
		{"bots with requests", []string{"--bots", "5", "--requests", "3000"}, "--requests does not apply with --bots"},
		{"a window on targets without their payment secret", []string{"--target", "http://127.0.0.1:1", "--strategy", "async", "--jwt-secret", "s",
			"--admin-token", "a", "--redis", "redis://127.0.0.1:1/0", "--db", "mysql://root@127.0.0.1:1/x", "--payment-window", "2s"}, "give --payment-secret-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"bench"}, tt.args...), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("bench %v = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestBenchDefaults checks the defaults the done-when command relies on.
func TestBenchDefaults(t *testing.T) {
	var cfg benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	got := []int{cfg.stock, cfg.users, cfg.requests, cfg.concurrency, cfg.instances}
	if !slices.Equal(got, []int{200, 1000, 3000, 200, 1}) || !slices.Equal(cfg.strategyList(), strategies()) {
		t.Errorf("defaults stock, users, requests, concurrency, instances = %v, strategies %v", got, cfg.strategyList())
	}
}
