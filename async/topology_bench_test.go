package async

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// BenchmarkPlaceOrderTopology measures accepted gate decisions per second
// on one hot voucher through the Go API (as BenchmarkPlaceOrder/accept) on
// a private single node and on a private 3-master cluster without
// replicas, each started once for its runs. Per node it reports the share
// of the gate calls (EVALSHA in INFO commandstats) and the Redis CPU
// (used_cpu_user + used_cpu_sys) per decision, in µs. On the cluster the
// voucher's slot puts every gate call on one master; the order pointers
// ({o<id>}) spread over all three, the ID generator's key sits on one.
func BenchmarkPlaceOrderTopology(b *testing.B) {
	single := testenv.StartRedis(b)
	cluster := testenv.StartCluster(b, testenv.WithoutReplicas())
	b.Run("single", func(b *testing.B) {
		benchTopology(b, single.Client(b), []*testenv.RedisServer{single})
	})
	b.Run("cluster", func(b *testing.B) {
		benchTopology(b, cluster.Client(b), cluster.Masters())
	})
}

func benchTopology(b *testing.B, client rueidis.Client, nodes []*testenv.RedisServer) {
	dsn, url := mysqlDatabase(b)
	e := newEnvOn(b, client, "bench:"+testenv.Unique()+":", dsn, url)
	v := e.voucher(max(b.N, 1))
	admins := make([]rueidis.Client, len(nodes))
	before := make([]nodeStats, len(nodes))
	for i, n := range nodes {
		admins[i] = n.Client(b)
		before[i] = readNodeStats(b, admins[i])
	}
	benchOrders(b, e.svc, v.ID, "")
	b.StopTimer()
	for i := range nodes {
		after := readNodeStats(b, admins[i])
		gates := after.evalsha - before[i].evalsha
		b.ReportMetric(100*float64(gates)/float64(b.N), fmt.Sprintf("n%d-gate%%", i+1))
		b.ReportMetric((after.cpu-before[i].cpu)*1e6/float64(b.N), fmt.Sprintf("n%d-cpu-µs/op", i+1))
	}
}

// nodeStats is what INFO tells of one node: EVALSHA calls so far and the
// CPU seconds it used.
type nodeStats struct {
	evalsha int64
	cpu     float64
}

func readNodeStats(b *testing.B, c rueidis.Client) nodeStats {
	b.Helper()
	text, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var s nodeStats
	for line := range strings.SplitSeq(text, "\n") {
		k, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "cmdstat_evalsha":
			calls, _, _ := strings.Cut(strings.TrimPrefix(val, "calls="), ",")
			s.evalsha, _ = strconv.ParseInt(calls, 10, 64)
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(val, 64)
			s.cpu += f
		}
	}
	return s
}
