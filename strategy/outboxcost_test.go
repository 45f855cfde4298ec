package strategy_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

var outboxRounds = flag.Int("outbox-rounds", 6, "BenchmarkOutboxCost: rounds of one outbox=on and one outbox=off phase")

// BenchmarkOutboxCost measures what writing the outbox costs a strategy
// (issue 35: at most 5% of its orders/s), with the outbox on and off
// alternated in one process — on one database, its own voucher per
// phase, the order of the two reversed every other round (ABBA), and
// -outbox-rounds rounds of b.N orders per phase from 64 goroutines, every
// call a new buyer. It reports medians: orders/s on and off and the on/off
// ratio of each round, and per order the MySQL statements (Questions),
// rows written (Handler_write), InnoDB row lock time, the server's CPU
// (from /proc when the server is local) and this process's CPU. The
// counters are the server's: run it against a private server.
func BenchmarkOutboxCost(b *testing.B) {
	for _, name := range []string{"conditional", "lock", "batch"} {
		b.Run(name, func(b *testing.B) { outboxCost(b, name) })
	}
}

// outboxPhase is what one phase measured, per order where it says so.
type outboxPhase struct {
	ordersPerSec, statements, rowsWritten, lockMicros, serverMicros, clientMicros float64
}

// outboxCost is one run of BenchmarkOutboxCost.
func outboxCost(b *testing.B, name string) {
	if b.N < 100 {
		return // the framework's probe run (run with -test.benchtime Nx)
	}
	dsn := testenv.MySQL(b)
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Close() })
	userinfo, rest, _ := strings.Cut(dsn, "@tcp(")
	hostport, rest, _ := strings.Cut(rest, ")/")
	dbName, _, _ := strings.Cut(rest, "?")
	f := newFixtureOn(b, fmt.Sprintf("mysql://%s@%s/%s", userinfo, hostport, dbName))
	services := map[bool]flashsale.OrderService{
		true:  f.strategy(b, name, 0),
		false: (&fixture{db: f.db.WithoutOutbox(), ids: f.ids, locks: f.locks}).strategy(b, name, 0),
	}
	var user atomic.Int64
	for _, on := range []bool{true, false} { // warm up: pools, statements, pages
		runOrders(b, services[on], f.voucher(b, flashsale.MaxStock), 200, &user)
	}
	pid := serverPID(b, admin)
	phases := map[bool][]outboxPhase{}
	b.ResetTimer()
	for round := range *outboxRounds {
		order := []bool{true, false}
		if round%2 == 1 {
			order = []bool{false, true}
		}
		for _, on := range order {
			vid := f.voucher(b, flashsale.MaxStock)
			phases[on] = append(phases[on], measurePhase(b, admin, pid, b.N, func() { runOrders(b, services[on], vid, b.N, &user) }))
		}
		on, off := phases[true][round], phases[false][round]
		// One line a round: the framework keeps 10 lines of a benchmark's log.
		b.Logf("%s round %d (%s first), on/off: %.0f/%.0f orders/s (%.2f); per order %.2f/%.2f statements, %.2f/%.2f rows written, %.0f/%.0f µs row lock waits, %.0f/%.0f µs server CPU, %.0f/%.0f µs client CPU",
			name, round, map[bool]string{true: "on", false: "off"}[order[0]], on.ordersPerSec, off.ordersPerSec, on.ordersPerSec/off.ordersPerSec,
			on.statements, off.statements, on.rowsWritten, off.rowsWritten, on.lockMicros, off.lockMicros, on.serverMicros, off.serverMicros, on.clientMicros, off.clientMicros)
	}
	reportOutboxCost(b, phases)
}

// reportOutboxCost reports the medians of the phases.
func reportOutboxCost(b *testing.B, phases map[bool][]outboxPhase) {
	var ratios []float64
	for i := range phases[true] {
		ratios = append(ratios, phases[true][i].ordersPerSec/phases[false][i].ordersPerSec)
	}
	b.ReportMetric(median(ratios), "on/off")
	for _, on := range []bool{true, false} {
		suffix := map[bool]string{true: "-on", false: "-off"}[on]
		med := func(get func(outboxPhase) float64) float64 {
			var v []float64
			for _, p := range phases[on] {
				v = append(v, get(p))
			}
			return median(v)
		}
		b.ReportMetric(med(func(p outboxPhase) float64 { return p.ordersPerSec }), "orders/s"+suffix)
		b.ReportMetric(med(func(p outboxPhase) float64 { return p.statements }), "stmts/order"+suffix)
		b.ReportMetric(med(func(p outboxPhase) float64 { return p.rowsWritten }), "rows/order"+suffix)
		b.ReportMetric(med(func(p outboxPhase) float64 { return p.lockMicros }), "lock-µs/order"+suffix)
		b.ReportMetric(med(func(p outboxPhase) float64 { return p.serverMicros }), "server-µs/order"+suffix)
		b.ReportMetric(med(func(p outboxPhase) float64 { return p.clientMicros }), "client-µs/order"+suffix)
	}
}

// runOrders places n orders on voucher vid from 64 goroutines, a new
// buyer each.
func runOrders(b *testing.B, s flashsale.OrderService, vid int64, n int, user *atomic.Int64) {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := s.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: vid, UserID: user.Add(1)}); err != nil {
					b.Errorf("PlaceOrder: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// measurePhase runs fn, which places n orders, and returns its figures.
func measurePhase(b *testing.B, admin *sql.DB, pid string, n int, fn func()) outboxPhase {
	status0, server0, client0 := serverStatus(b, admin), serverCPU(pid), clientCPU()
	start := time.Now()
	fn()
	elapsed := time.Since(start)
	status1, server1, client1 := serverStatus(b, admin), serverCPU(pid), clientCPU()
	per := func(d float64) float64 { return d / float64(n) }
	return outboxPhase{
		ordersPerSec: float64(n) / elapsed.Seconds(),
		// The two status reads are statements too.
		statements:   per(status1["Questions"] - status0["Questions"] - 1),
		rowsWritten:  per(status1["Handler_write"] - status0["Handler_write"]),
		lockMicros:   per(1000 * (status1["Innodb_row_lock_time"] - status0["Innodb_row_lock_time"])),
		serverMicros: per(float64((server1 - server0).Microseconds())),
		clientMicros: per(float64((client1 - client0).Microseconds())),
	}
}

// serverStatus returns the server's global status counters this benchmark
// reads.
func serverStatus(b *testing.B, admin *sql.DB) map[string]float64 {
	rows, err := admin.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Handler_write', 'Innodb_row_lock_time')")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	status := map[string]float64{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			b.Fatal(err)
		}
		status[name], _ = strconv.ParseFloat(value, 64)
	}
	return status
}

// serverPID returns the MySQL server's process id, or "" when its pid
// file is not readable here (a remote server).
func serverPID(b *testing.B, admin *sql.DB) string {
	var pidFile string
	if err := admin.QueryRow("SELECT @@pid_file").Scan(&pidFile); err != nil {
		b.Fatal(err)
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(pid))
}

// serverCPU returns the CPU time (user and system) of the local process
// pid, the MySQL server, from /proc; 0 when there is none.
func serverCPU(pid string) time.Duration {
	if pid == "" {
		return 0
	}
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields 14 and 15 (utime, stime) in clock ticks, counted after the
	// command's closing parenthesis (field 2 may hold spaces).
	_, after, _ := strings.Cut(string(stat), ") ")
	fields := strings.Fields(after)
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// clientCPU returns this process's CPU time (user and system).
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// median returns the median of v (the mean of the middle two for an even
// count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
