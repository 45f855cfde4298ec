package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// TestStocklockLabShowsBrokenLocksOverselling runs stocklock with the
// lab's pause (longer than the lease) on three child processes per lock,
// against the real Redis and MariaDB: every deliberately broken lock
// oversells, and the fenced lock sells exactly the stock, its stale
// holders' writes refused (busy).
func TestStocklockLabShowsBrokenLocksOverselling(t *testing.T) {
	locks := append([]string{realLock}, brokenLockNames()...)
	_, raw := benchOnServers(t, "--strategy", "stocklock", "--lock", strings.Join(locks, ","), "--instances", "3",
		"--lock-lease", "100ms", "--pause", "300ms", "--pause-every", "5", "--lock-wait", "60s",
		"--stock", "20", "--users", "120", "--concurrency", "40", "--race-window", "1ms")
	var doc struct{ Runs []lab.Row }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != len(locks) {
		t.Fatalf("%d runs, want one per lock (%v)", len(doc.Runs), locks)
	}
	for _, r := range doc.Runs {
		switch {
		case r.Strategy == "stocklock":
			if !r.Exact() || r.Orders != 20 || r.Rejected["busy"] == 0 {
				t.Errorf("fenced lock: %+v; want exactly 20 orders and stale writes refused (busy)", r)
			}
		case strings.HasPrefix(r.Strategy, "stocklock:"):
			if r.Oversold <= 0 {
				t.Errorf("%s: oversold %d with holders paused past their lease; want > 0", r.Strategy, r.Oversold)
			}
		default:
			t.Errorf("unexpected run %q", r.Strategy)
		}
	}
}
