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
// ratios (docs/benchmarks.md); outbox=off writes no events, to measure
// what the outbox costs (issue 35).
func BenchmarkHotVoucherOrders(b *testing.B) {
	for _, name := range []string{"conditional", "lock", "stocklock", "batch"} {
		for _, outbox := range []string{"on", "off"} {
			b.Run(name+"/outbox="+outbox, func(b *testing.B) { hotVoucherOrders(b, name, outbox == "off") })
		}
	}
}

// hotVoucherOrders is one run of BenchmarkHotVoucherOrders.
func hotVoucherOrders(b *testing.B, name string, noOutbox bool) {
	f := newFixtureOn(b, testenv.MySQLURL(b))
	if noOutbox {
		f.db = f.db.WithoutOutbox()
	}
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
}
