package strategy_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkHotVoucherOrders places orders on one hot voucher of MariaDB from
// 64 goroutines (GOMAXPROCS 2 × 32), every call a new buyer and the stock
// never running out, so every call is a committed order; it reports
// orders/s. Run the strategies alternately in one session and compare
// ratios (docs/benchmarks.md).
func BenchmarkHotVoucherOrders(b *testing.B) {
	for _, name := range []string{"conditional", "batch"} {
		b.Run(name, func(b *testing.B) {
			f := newFixtureOn(b, testenv.MySQLURL(b))
			vid := f.voucher(b, flashsale.MaxStock)
			s := f.strategy(b, name, 0)
			var user, done atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: vid, UserID: user.Add(1)}); err != nil {
						b.Errorf("PlaceOrder: %v", err)
						return
					}
					done.Add(1)
				}
			})
			b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "orders/s")
		})
	}
}
