package async_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/internal/asynctest"
)

// BenchmarkPlaceOrder measures gate decisions per second on one hot
// voucher, many goroutines at once, called directly (no HTTP):
//
//   - accept: stock enough for every call, so every decision is a real
//     one (ID, script, order pointer);
//   - soldout-local: after the sell-out, refused by the local verdict
//     without a Redis call;
//   - soldout-redis: after the sell-out with the local verdict off, so
//     every refusal runs the script.
func BenchmarkPlaceOrder(b *testing.B) {
	b.Run("accept", func(b *testing.B) {
		e := newEnv(b)
		v := e.Voucher(max(b.N, 1))
		benchOrders(b, e.Svc, v.ID, "")
	})
	b.Run("soldout-local", func(b *testing.B) {
		e := newEnv(b)
		v := e.Voucher(1)
		e.Buy(v.ID, 1)
		benchOrders(b, e.Svc, v.ID, flashsale.ESoldOut)
	})
	b.Run("soldout-redis", func(b *testing.B) {
		e := newEnv(b)
		svc, err := async.NewService(e.Client, e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log, VerdictTTL: time.Nanosecond})
		if err != nil {
			b.Fatal(err)
		}
		v := e.Voucher(1)
		e.Buy(v.ID, 1)
		benchOrders(b, svc, v.ID, flashsale.ESoldOut)
	})
}

// benchOrders runs b.N PlaceOrder calls from 32 goroutines, each for a new
// user, expecting the error code want, and reports decisions/s.
func benchOrders(b *testing.B, svc *async.Service, voucherID int64, want string) {
	var user atomic.Int64
	user.Store(1_000_000)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: user.Add(1)})
			if asynctest.Code(err) != want {
				b.Errorf("PlaceOrder: %v, want code %q", err, want)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
