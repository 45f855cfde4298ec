package async_test

import (
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkPlaceOrderTopology measures accepted gate decisions per second
// on one hot voucher through the Go API (as BenchmarkPlaceOrder/accept) on
// a private single node and on a private 3-master cluster without
// replicas, each started once for its runs. Per node it reports the share
// of the gate calls (EVALSHA in INFO commandstats) and the Redis CPU
// (used_cpu_user + used_cpu_sys) per decision, in µs. On the cluster the
// voucher's slot puts every gate call on one master; the order pointers'
// buckets ({p<bucket>}) spread over all three, the ID generator's key sits on one.
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
	dsn, url := asynctest.MySQLDatabase(b)
	e := newEnvOn(b, client, "bench:"+testenv.Unique()+":", dsn, url)
	v := e.Voucher(max(b.N, 1))
	before := make([]nodeStats, len(nodes))
	for i, n := range nodes {
		before[i] = readNodeStats(b, n)
	}
	benchOrders(b, e.Svc, v.ID, "")
	b.StopTimer()
	for i, n := range nodes {
		d := readNodeStats(b, n).minus(before[i])
		b.ReportMetric(100*d.gateCalls/float64(b.N), fmt.Sprintf("n%d-gate%%", i+1))
		b.ReportMetric(d.cpuMicros/float64(b.N), fmt.Sprintf("n%d-cpu-µs/op", i+1))
	}
}
