package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkServeShards sells one hot voucher of K shards through a real
// `flashsale serve --strategy async` process (its consumer on MariaDB, its
// background work running) on a private Redis Cluster without replicas,
// and reports what Redis spent per order, all in, and how evenly the
// masters shared it: b.N buyers, 64 at a time through HTTP, each a new
// buyer with one order (stock 2·b.N, every order accepted), measured from
// the voucher's creation until MySQL holds every order. The cases are
// K = 1, 3 and 6 on 6 masters, K = 1 and 4 on 4 masters (a
// cluster per count of masters, a serve process, key prefix and database
// per case).
//
//   - "redis-µs/order": the CPU of every master (INFO cpu, user + system)
//     over the sale, divided by the orders; the target for K > 1 is
//     ≤ 1.1x that of K = 1 on the same masters;
//   - "%cpu-max": the busiest master's share of that CPU, the target
//     100/K + 5 (for K = masters);
//   - "%time-max": the same of the command time (INFO commandstats usec),
//     which a server descheduled mid-command inflates on a machine with
//     fewer cores than masters.
//
// With -v it logs each master's costliest commands (µs and calls).
//
//	go test -run '^$' -bench ServeShards -benchtime 20000x -timeout 30m ./cmd/flashsale/
func BenchmarkServeShards(b *testing.B) {
	for _, tc := range []struct{ masters, shards []int }{{[]int{6}, []int{1, 3, 6}}, {[]int{4}, []int{1, 4}}} {
		b.Run(fmt.Sprintf("masters=%d", tc.masters[0]), func(b *testing.B) {
			c := testenv.StartCluster(b, testenv.WithoutReplicas(), testenv.WithMasters(tc.masters[0]))
			for _, k := range tc.shards {
				b.Run(fmt.Sprintf("shards=%d", k), func(b *testing.B) { sellThroughServe(b, c, k) })
			}
		})
	}
}

// sellThroughServe is one case of BenchmarkServeShards: a voucher of k
// shards sold through a new serve process on c.
func sellThroughServe(b *testing.B, c *testenv.Cluster, k int) {
	r := newSaleRig(b, testenv.MySQLURL(b))
	r.redisURL = c.URL()
	r.redis, r.prefix = c.PrefixedClient(b)
	srv := r.serve(true)
	r.createShards(srv.URL, min(2*b.N+64, 100_000_000), k)
	masters := c.Masters()
	before := redisUsage(b, masters)
	b.ResetTimer()
	r.buyNew(srv.URL, b.N, 64)
	r.waitPersisted(b.N)
	b.StopTimer()
	after := redisUsage(b, masters)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
	reportUsage(b, before, after)
}

// buyNew places one order for each of n new buyers (users 1..n) through
// the server at url, concurrency at a time; any refusal fails the run.
func (r *saleRig) buyNew(url string, n, concurrency int) {
	r.t.Helper()
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for u := next.Add(1); u <= int64(n); u = next.Add(1) {
				tok, err := r.auth.UserToken(u, time.Hour)
				if err != nil {
					r.t.Error(err)
					return
				}
				r.click(s, u, tok, url)
			}
		})
	}
	wg.Wait()
	if len(s.accepted) != n {
		r.t.Fatalf("%d of %d orders accepted; refusals %v, transport errors %d", len(s.accepted), n, s.codes, s.failures)
	}
}

// waitPersisted waits until MySQL holds n orders of the rig's voucher.
func (r *saleRig) waitPersisted(n int) {
	r.t.Helper()
	db := r.openStore()
	defer db.Close()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		a, err := db.AuditVoucher(context.Background(), r.voucher)
		if err == nil && a.Orders == n {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("MySQL after 5 minutes: %+v, %v; want %d orders", a, err, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// masterUsage is one master's INFO figures: per command "usec:<cmd>" and
// "calls:<cmd>", and cpuUsec (user + system, µs).
type masterUsage map[string]float64

const cpuUsec = "cpu"

// redisUsage reads INFO cpu and commandstats of every master.
func redisUsage(t testing.TB, masters []*testenv.RedisServer) []masterUsage {
	t.Helper()
	out := make([]masterUsage, len(masters))
	for i, m := range masters {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		client := m.Client(t)
		text, err := client.Do(ctx, client.B().Info().Section("commandstats").Section("cpu").Build()).ToString()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = masterUsage{}
		for line := range strings.Lines(text) {
			name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
			if name == "used_cpu_user" || name == "used_cpu_sys" {
				f, _ := strconv.ParseFloat(stats, 64)
				out[i][cpuUsec] += f * 1e6
			}
			cmd, ok := strings.CutPrefix(name, "cmdstat_")
			if !ok {
				continue
			}
			for f := range strings.SplitSeq(stats, ",") {
				if k, v, _ := strings.Cut(f, "="); k == "usec" || k == "calls" {
					n, _ := strconv.ParseFloat(v, 64)
					out[i][k+":"+cmd] = n
				}
			}
		}
	}
	return out
}

// reportUsage reports the Redis CPU per order, the busiest master's share
// of the CPU and of the command time between two readings, and logs each
// master's costliest commands.
func reportUsage(b *testing.B, before, after []masterUsage) {
	var cpu, cmdTime, cpuMax, timeMax float64
	cpus, times := make([]float64, len(after)), make([]float64, len(after))
	var lines []string
	for i := range after {
		cpus[i] = after[i][cpuUsec] - before[i][cpuUsec]
		var top []string
		for k, v := range after[i] {
			if cmd, ok := strings.CutPrefix(k, "usec:"); ok {
				d := v - before[i][k]
				times[i] += d
				calls := after[i]["calls:"+cmd] - before[i]["calls:"+cmd]
				top = append(top, fmt.Sprintf("%s %.1f ms/%.0f", cmd, d/1000, calls))
			}
		}
		slices.SortFunc(top, func(x, y string) int { return cmp.Compare(msIn(y), msIn(x)) })
		lines = append(lines, fmt.Sprintf("m%d cpu %.0f ms: %s", i, cpus[i]/1000, strings.Join(top[:min(8, len(top))], ", ")))
		cpu += cpus[i]
		cmdTime += times[i]
	}
	for i := range after {
		cpuMax = max(cpuMax, 100*cpus[i]/max(cpu, 1))
		timeMax = max(timeMax, 100*times[i]/max(cmdTime, 1))
	}
	b.ReportMetric(cpu/float64(b.N), "redis-µs/order")
	b.ReportMetric(cpuMax, "%cpu-max")
	b.ReportMetric(timeMax, "%time-max")
	if b.N > 1 { // the run that sizes b.N would crowd out the real one's lines
		b.Logf("per master (command ms/calls):\n%s", strings.Join(lines, "\n"))
	}
}

// msIn reads the ms back from "<command> <ms> ms/<calls>".
func msIn(s string) float64 {
	f := strings.Fields(s)
	n, _ := strconv.ParseFloat(f[len(f)-2], 64)
	return n
}
