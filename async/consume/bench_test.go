package consume_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
)

// BenchmarkConsumer measures how fast one consumer persists a backlog of
// b.N accepted orders of one voucher into MariaDB: the orders are put in
// the stream first (untimed), then the consumer drains it.
func BenchmarkConsumer(b *testing.B) {
	for _, batch := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := newEnv(b)
			cfg := e.ConsumerConfig()
			cfg.BatchSize = batch
			drainBacklog(b, e, cfg)
		})
	}
}

// drainBacklog puts b.N accepted orders of a new voucher in its stream
// (untimed) and times a consumer of cfg persisting them.
func drainBacklog(b *testing.B, e *env, cfg consume.Config) {
	v := e.Voucher(max(b.N, 1))
	preload(b, e, v.ID, b.N)
	c := consume.New(e.Client, e.DB, cfg)
	b.ResetTimer()
	stop := e.Run(c)
	for c.Stats().Persisted < uint64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}

// preload has n new users of the voucher each place an order, from 32
// goroutines (the gate batches them).
func preload(b *testing.B, e *env, voucherID int64, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for u := next.Add(1); u <= int64(n); u = next.Add(1) {
				if _, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: u}); err != nil {
					b.Errorf("PlaceOrder: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkConsumerReplicas is BenchmarkConsumer (batch 500) on a primary
// with one replica, the consumer waiting for wait replicas before each
// batch (Config.MinReplicas: durability replica) or not. Run the two
// alternately (docs/benchmarks.md).
func BenchmarkConsumerReplicas(b *testing.B) {
	for _, wait := range []int{0, 1} {
		b.Run(fmt.Sprintf("wait=%d", wait), func(b *testing.B) {
			e, _ := replicatedEnv(b)
			cfg := e.ConsumerConfig()
			cfg.MinReplicas = wait
			drainBacklog(b, e, cfg)
		})
	}
}
