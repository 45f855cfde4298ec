package testenv

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// cpuCgroup is where LimitCPU makes its groups: the cgroup v1 cpu
// controller these machines mount.
const cpuCgroup = "/sys/fs/cgroup/cpu"

// LimitCPU caps the CPU time of process pid (all its threads) to share of
// one core, in a cgroup of its own with a 10 ms period (so a throttled
// process stalls for at most 10 ms at a time; below a tenth of a core,
// a period of 1 ms ÷ share), until the test ends. It
// makes a server the bottleneck on purpose: a benchmark of overload on a
// machine whose cores the load generator shares. It needs root and the
// cgroup v1 cpu controller; without them it fails the test.
//
// The group's weight (cpu.shares) is 16 times the default, so on a
// machine busy with other work the process still gets its share at once
// when it has work: the cap is then what holds it back, not its
// neighbours (a benchmark of the same binaries otherwise swings with the
// machine's load).
func LimitCPU(tb testing.TB, pid int, share float64) {
	tb.Helper()
	if share <= 0 || share > 1 {
		tb.Fatalf("LimitCPU: share %v is not in (0, 1]", share)
	}
	dir := filepath.Join(cpuCgroup, fmt.Sprintf("flashsale-test-%d", pid))
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatalf("LimitCPU: %v (needs root and the cgroup v1 cpu controller)", err)
	}
	tb.Cleanup(func() {
		// A group can go only once empty: hand its tasks back to the root.
		if tasks, err := os.ReadFile(filepath.Join(dir, "tasks")); err == nil {
			for _, t := range strings.Fields(string(tasks)) {
				_ = os.WriteFile(filepath.Join(cpuCgroup, "tasks"), []byte(t), 0o644)
			}
		}
		_ = os.Remove(dir)
	})
	// The kernel's least quota is 1 ms: below a tenth of a core the period
	// grows instead, and so do the stalls.
	period := max(10_000, int(math.Ceil(1_000/share))) // µs
	write := func(name, value string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
			tb.Fatalf("LimitCPU: %s: %v", name, err)
		}
	}
	write("cpu.cfs_period_us", strconv.Itoa(period))
	write("cpu.cfs_quota_us", strconv.Itoa(int(math.Round(share*float64(period)))))
	write("cpu.shares", "16384")
	write("cgroup.procs", strconv.Itoa(pid)) // moves every thread of pid
}
