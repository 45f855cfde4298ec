package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
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
// `flashsale serve --strategy async` process (default flags: its consumer
// on MariaDB and its background work running) on a private Redis Cluster
// without replicas, and reports what Redis spent per order, all in, and
// how evenly the masters shared it: b.N buyers, each new with one order
// (stock 2·b.N, every order accepted), 64 requests in flight through HTTP,
// measured from the voucher's creation until MySQL holds every order. The
// cases: K = 1, 3 and 6 on 6 masters; K = 1 and 4 on 4 masters, and K = 1
// with 16 in flight (batches about as small as K = 4's); K = 1 and 3 on 3
// masters. Then the capped clusters, each master held to a share of a
// core (cappedShare, or less for more masters) so that Redis, not this
// machine's two cores, is the bottleneck: K = 1 with 256 in flight against
// K with 256, and with 256·K, as many buyers per shard as K = 1's one
// queue has, for K = 3, 4 and 6. One cluster per count of masters (and
// cap); a serve process, key prefix and database per case.
//
//   - "redis-µs/order": the CPU of every master (INFO cpu, user + system)
//     over the sale, divided by the orders; the target for K > 1 is
//     ≤ 1.1x that of K = 1 on the same masters;
//   - "%cpu-max": the busiest master's share of that CPU, the target
//     100/K + 5 (for K = masters);
//   - "%time-max": the same of the command time (INFO commandstats usec),
//     which a server descheduled mid-command inflates on a machine with
//     fewer cores than masters;
//   - "orders/script-call": the orders per EVALSHA or EVAL, the gate's
//     and the instance's other scripts (the consumer's, background work);
//   - "orders/gate-call": the orders per XADD, that is per gate call
//     (each writes one stream entry, and every order here is accepted):
//     the batches, on which the CPU per order depends;
//   - "redis-µs/order-net": redis-µs/order less the masters' idle CPU
//     over the sale's time (its rate the mean of idleSpell before the
//     sale, the voucher loaded, and after), which a K = 1 sale spreads
//     over fewer orders a second;
//   - "redis-ms/s-idle", "%cpu-idle-max": the same CPU over idleSpell
//     after the sale (redis-ms/s-idle-before: before it), the instance
//     running but idle (its background work and the masters' own cron),
//     per second, and the busiest master's share;
//   - "p50-ms", "p99-ms": an order's latency as the buyers saw it (exact,
//     HTTP included), and "srv-p50-ms", "srv-p99-ms" the serve's own, from
//     its histogram (interpolated within buckets of 1, 2.5, 5, 10 ms…).
//
// With -v it logs each master's costliest commands (ms and calls).
// FLASHSALE_BENCH_SERVE_ARGS, when set, adds its (space-separated)
// arguments to each serve's, e.g. "--shard-linger 0" (issue 34's sweep).
//
//	cd cmd/flashsale && go test -c -o /tmp/fs.test . && \
//	  /tmp/fs.test -test.run '^$' -test.bench ServeShards -test.benchtime 20000x -test.timeout 30m -test.v
func BenchmarkServeShards(b *testing.B) {
	for _, tc := range []struct {
		masters int
		share   float64 // of a core, each master's cap (testenv.LimitCPU); 0: none
		cases   []shardCase
	}{
		{6, 0, []shardCase{{1, 64}, {3, 64}, {6, 64}}},
		{4, 0, []shardCase{{1, 64}, {4, 64}, {1, 16}, {1, 256}, {4, 256}}},
		{3, 0, []shardCase{{1, 64}, {3, 64}}},
		{4, cappedShare, []shardCase{{1, 256}, {4, 256}, {4, 1024}}},
		// At cappedShare four masters take more than this machine sends
		// with 1,024 in flight; at 2 % Redis is the bottleneck again.
		{4, 0.02, []shardCase{{1, 256}, {4, 1024}}},
		{3, cappedShare, []shardCase{{1, 256}, {3, 256}, {3, 768}}},
		// Six masters at cappedShare would take more orders than this
		// machine's serve and load generator send.
		{6, cappedShare / 2, []shardCase{{1, 256}, {6, 256}, {6, 1536}}},
	} {
		name := fmt.Sprintf("masters=%d", tc.masters)
		if tc.share > 0 {
			name += fmt.Sprintf("/capped=%v", tc.share)
		}
		b.Run(name, func(b *testing.B) {
			c := testenv.StartCluster(b, testenv.WithoutReplicas(), testenv.WithMasters(tc.masters))
			args := []string(nil)
			if tc.share > 0 {
				for _, m := range c.Masters() {
					testenv.LimitCPU(b, masterPID(b, m), tc.share)
				}
				// Orders queue for the gate as long as the capped masters
				// need; none is refused busy.
				args = []string{"--max-gate-wait", "5s", "--max-pending", "100000"}
			}
			for _, sc := range tc.cases {
				b.Run(fmt.Sprintf("shards=%d/inflight=%d", sc.shards, sc.inflight), func(b *testing.B) { sellThroughServe(b, c, sc, args...) })
			}
		})
	}
}

// cappedShare is the share of a core each master of BenchmarkServeShards's
// capped cluster gets: little enough that one master, not the serve or
// the load generator on this machine's two cores, bounds a K = 1 sale,
// and that four bound K = 4's too. Redis is then the bottleneck, as on a
// machine whose Redis has a core of its own and as many clients as it can
// take: the regime in which "K shards worth K" is asked.
const cappedShare = 0.03

// masterPID returns the process id of m, by INFO server.
func masterPID(b *testing.B, m *testenv.RedisServer) int {
	client := m.Client(b)
	info, err := client.Do(context.Background(), client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	return infoInt(b, info, "process_id")
}

// shardCase is one case of BenchmarkServeShards: the voucher's shards and
// the buyers in flight at once.
type shardCase struct{ shards, inflight int }

// sellThroughServe is one case of BenchmarkServeShards: a voucher sold
// through a new serve process (default flags, its consumer on) on c, then
// idleSpell with the sale over, whose Redis use is logged.
func sellThroughServe(b *testing.B, c *testenv.Cluster, sc shardCase, args ...string) {
	r := newSaleRig(b, testenv.MySQLURL(b))
	r.redisURL = c.URL()
	r.redis, r.prefix = c.PrefixedClient(b)
	// A connection kept per buyer in flight: with fewer, the rest are
	// opened and closed per order, and the load generator, not the
	// server, bounds how many are in flight.
	r.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: sc.inflight, MaxConnsPerHost: sc.inflight}}
	b.Cleanup(r.client.CloseIdleConnections)
	args = append([]string{"--strategy", "async", "--public-metrics"}, args...)
	srv := r.serveWith(append(args, strings.Fields(os.Getenv("FLASHSALE_BENCH_SERVE_ARGS"))...)...)
	r.createShards(srv.URL, min(2*b.N+64, 100_000_000), sc.shards)
	masters := c.Masters()
	var idleBefore float64 // µs over idleSpell, the voucher loaded
	if b.N > 1 {
		start := redisUsage(b, masters)
		time.Sleep(idleSpell)
		idleBefore = cpuBetween(start, redisUsage(b, masters))
	}
	before := redisUsage(b, masters)
	b.ResetTimer()
	latencies := r.buyNew(srv.URL, b.N, sc.inflight)
	r.waitPersisted(b.N)
	b.StopTimer()
	after := redisUsage(b, masters)
	took := b.Elapsed()
	b.ReportMetric(float64(b.N)/took.Seconds(), "orders/s")
	saleCPU := reportUsage(b, "sale", before, after, float64(b.N))
	slices.Sort(latencies)
	b.ReportMetric(ms(latencies[len(latencies)/2]), "p50-ms")
	b.ReportMetric(ms(latencies[len(latencies)*99/100]), "p99-ms")
	_, p50, p99 := orderLatency(b, srv.URL)
	b.ReportMetric(p50*1000, "srv-p50-ms")
	b.ReportMetric(p99*1000, "srv-p99-ms")
	if b.N > 1 {
		time.Sleep(idleSpell)
		b.ReportMetric(idleBefore/1000/idleSpell.Seconds(), "redis-ms/s-idle-before")
		idle := (idleBefore + reportUsage(b, "idle", after, redisUsage(b, masters), 0)) / 2
		net := saleCPU - idle*took.Seconds()/idleSpell.Seconds()
		b.ReportMetric(net/float64(b.N), "redis-µs/order-net")
	}
}

// idleSpell is how long BenchmarkServeShards watches Redis after a sale,
// the instance idle but for its background work.
const idleSpell = 10 * time.Second

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// buyNew places one order for each of n new buyers (users 1..n) through
// the server at url, concurrency at a time, and returns each order's
// latency; any refusal fails the run.
func (r *saleRig) buyNew(url string, n, concurrency int) []time.Duration {
	r.t.Helper()
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	took := make([]time.Duration, n)
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
				start := time.Now()
				r.click(s, u, tok, url)
				took[u-1] = time.Since(start)
			}
		})
	}
	wg.Wait()
	if len(s.accepted) != n {
		r.t.Fatalf("%d of %d orders accepted; refusals %v, transport errors %d", len(s.accepted), n, s.codes, s.failures)
	}
	return took
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

// reportUsage reports, between two readings, the Redis CPU per order
// (orders > 0) or per second of idleSpell (orders 0), the busiest master's
// share of the CPU and of the command time, and the orders per script
// call (EVALSHA and EVAL) and per gate call (XADD), and logs each
// master's costliest commands. It returns the masters' CPU, µs.
func reportUsage(b *testing.B, phase string, before, after []masterUsage, orders float64) float64 {
	var cpu, cmdTime, cpuMax, timeMax, calls, entries float64
	cpus, times := make([]float64, len(after)), make([]float64, len(after))
	var lines []string
	for i := range after {
		cpus[i] = after[i][cpuUsec] - before[i][cpuUsec]
		var top []string
		for k, v := range after[i] {
			if cmd, ok := strings.CutPrefix(k, "usec:"); ok {
				d := v - before[i][k]
				times[i] += d
				n := after[i]["calls:"+cmd] - before[i]["calls:"+cmd]
				top = append(top, fmt.Sprintf("%s %.1f ms/%.0f", cmd, d/1000, n))
				switch cmd {
				case "evalsha", "eval":
					calls += n
				case "xadd":
					entries += n
				}
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
	if orders == 0 {
		b.ReportMetric(cpu/1000/idleSpell.Seconds(), "redis-ms/s-idle")
		b.ReportMetric(cpuMax, "%cpu-idle-max")
	} else {
		b.ReportMetric(cpu/orders, "redis-µs/order")
		b.ReportMetric(cpuMax, "%cpu-max")
		b.ReportMetric(timeMax, "%time-max")
		b.ReportMetric(orders/max(calls, 1), "orders/script-call")
		b.ReportMetric(orders/max(entries, 1), "orders/gate-call")
	}
	if b.N > 1 { // the run that sizes b.N would crowd out the real one's lines
		b.Logf("%s, per master (command ms/calls):\n%s", phase, strings.Join(lines, "\n"))
	}
	return cpu
}

// cpuBetween is the masters' CPU, µs, between two readings.
func cpuBetween(before, after []masterUsage) (cpu float64) {
	for i := range after {
		cpu += after[i][cpuUsec] - before[i][cpuUsec]
	}
	return cpu
}

// msIn reads the ms back from "<command> <ms> ms/<calls>".
func msIn(s string) float64 {
	f := strings.Fields(s)
	n, _ := strconv.ParseFloat(f[len(f)-2], 64)
	return n
}
