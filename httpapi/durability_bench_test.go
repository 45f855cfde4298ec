package httpapi_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkDurability measures async order attempts per second through
// HTTP in each durability mode, each on a private Redis of its own: memory
// on a plain one, aof on one with appendonly yes and appendfsync always,
// replica on a primary with one replica (WAIT for 1). Shapes, each with
// the same server's GET /healthz measured before it for the ratio:
//
//   - sale: stock 5,000 and a new buyer every attempt;
//   - accept: stock for every attempt and a new buyer each time, so every
//     attempt is an accepted order (orders/s).
//
// The modes alternate, durabilityPasses times, so their medians come from
// the same stretch of time on a shared machine.
func BenchmarkDurability(b *testing.B) {
	primary := testenv.StartRedis(b)
	replica := testenv.StartRedis(b, testenv.WithConfig("replicaof", strings.Replace(primary.Addr(), ":", " ", 1)))
	modes := []struct {
		mode  async.Durability
		redis *testenv.RedisServer
	}{
		{async.DurabilityMemory, testenv.StartRedis(b)},
		{async.DurabilityAOF, testenv.StartRedis(b, testenv.WithAOF())},
		{async.DurabilityReplica, primary},
	}
	waitReplica(b, replica)
	shapes := []struct {
		name  string
		stock func(n int) int
	}{
		{"sale", func(int) int { return 5000 }},
		{"accept", func(n int) int { return n }},
	}
	for range durabilityPasses {
		for _, s := range shapes {
			for _, m := range modes {
				b.Run(s.name+"/"+string(m.mode), func(b *testing.B) {
					rc := m.redis.Client(b)
					cfg := async.DurabilityConfig{Mode: m.mode}
					if err := async.CheckDurability(context.Background(), rc, cfg, slog.New(slog.DiscardHandler)); err != nil {
						b.Fatal(err)
					}
					benchOrders(b, newTestAPI(b, apiOptions{strategy: "async", redis: rc, durability: cfg}), s.stock(b.N), b.N)
				})
			}
		}
	}
}

// durabilityPasses is how many times BenchmarkDurability runs every mode
// and shape, alternating (a repeated name gets #01, #02 …); take medians.
const durabilityPasses = 3

// waitReplica waits until the replica's link to its primary is up.
func waitReplica(b *testing.B, replica *testenv.RedisServer) {
	rc := replica.Client(b)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		text, err := rc.Do(context.Background(), rc.B().Info().Section("replication").Build()).ToString()
		if err == nil && strings.Contains(text, "master_link_status:up") {
			return
		}
	}
	b.Fatal("the replica did not connect")
}
