package async_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkShardedGate measures one hot voucher's gate decisions per
// second through async.Service.PlaceOrder on a private 3-master cluster (no
// replicas), with the voucher in 1 and in 3 shards, and reads from each
// master's INFO how the gate calls (EVALSHA/EVAL) spread over them and
// the Redis CPU (user + system) each spent per decision of the whole run
// (its gate calls, the order pointers that land on it, the cluster bus). The stock is twice the
// calls, so no shard runs dry and every decision is an accepted order.
//
//	go test -run '^$' -bench BenchmarkShardedGate -benchtime 20000x -count 5 ./async/
func BenchmarkShardedGate(b *testing.B) {
	c := testenv.StartCluster(b, testenv.WithoutReplicas())
	e := envOnCluster(b, c)
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", k), func(b *testing.B) {
			v := &flashsale.Voucher{Title: "bench", Stock: min(2*b.N+64, flashsale.MaxStock), Shards: k,
				BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.Svc.CreateVoucher(ctx, v); err != nil {
				b.Fatal(err)
			}
			masters := c.Masters()
			before := make([]nodeStats, len(masters))
			for i, m := range masters {
				before[i] = readNodeStats(b, m)
			}
			benchOrders(b, e.Svc, v.ID, "")
			b.StopTimer()
			var calls []float64
			var total float64
			for i, m := range masters {
				d := readNodeStats(b, m).minus(before[i])
				calls = append(calls, d.gateCalls)
				total += d.gateCalls
				b.Logf("master %s: %.0f gate calls, %.1f µs in the script per call, %.1f µs Redis CPU per decision", m.Addr(),
					d.gateCalls, d.gateMicros/max(d.gateCalls, 1), d.cpuMicros/float64(b.N))
				b.ReportMetric(d.cpuMicros/float64(b.N), "cpu-µs/decision-m"+strconv.Itoa(i))
			}
			for i, n := range calls {
				b.ReportMetric(100*n/max(total, 1), "%calls-m"+strconv.Itoa(i))
			}
		})
	}
}

// nodeStats is what one Redis node's INFO says of the gate calls and CPU.
type nodeStats struct {
	gateCalls, gateMicros, cpuMicros float64
}

func (s nodeStats) minus(o nodeStats) nodeStats {
	return nodeStats{s.gateCalls - o.gateCalls, s.gateMicros - o.gateMicros, s.cpuMicros - o.cpuMicros}
}

// readNodeStats reads INFO commandstats and cpu of one node: the calls
// and time of EVALSHA and EVAL (the gate; a few other scripts), and the
// CPU the server used (user + system).
func readNodeStats(b *testing.B, m *testenv.RedisServer) nodeStats {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := m.Client(b)
	text, err := client.Do(ctx, client.B().Info().Section("commandstats").Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var s nodeStats
	for line := range strings.SplitSeq(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "cmdstat_evalsha", "cmdstat_eval":
			for f := range strings.SplitSeq(v, ",") {
				name, val, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseFloat(val, 64)
				switch name {
				case "calls":
					s.gateCalls += n
				case "usec":
					s.gateMicros += n
				}
			}
		case "used_cpu_user", "used_cpu_sys":
			n, _ := strconv.ParseFloat(v, 64)
			s.cpuMicros += n * 1e6
		}
	}
	return s
}
