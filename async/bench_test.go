package async

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/redis/rueidis"
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
		v := e.voucher(max(b.N, 1))
		benchOrders(b, e.svc, v.ID, "")
	})
	b.Run("soldout-local", func(b *testing.B) {
		e := newEnv(b)
		v := e.voucher(1)
		e.buy(v.ID, 1)
		benchOrders(b, e.svc, v.ID, flashsale.ESoldOut)
	})
	b.Run("soldout-redis", func(b *testing.B) {
		e := newEnv(b)
		svc, err := NewService(e.client, e.db, Config{Prefix: e.prefix, OrderIDs: e.ids, Logger: e.log, VerdictTTL: time.Nanosecond})
		if err != nil {
			b.Fatal(err)
		}
		v := e.voucher(1)
		e.buy(v.ID, 1)
		benchOrders(b, svc, v.ID, flashsale.ESoldOut)
	})
}

// benchOrders runs b.N PlaceOrder calls from 32 goroutines, each for a new
// user, expecting the error code want, and reports decisions/s.
func benchOrders(b *testing.B, svc *Service, voucherID int64, want string) {
	var user atomic.Int64
	user.Store(1_000_000)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := svc.PlaceOrder(context.Background(), voucherID, user.Add(1))
			if code(err) != want {
				b.Errorf("PlaceOrder: %v, want code %q", err, want)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkConsumer measures how fast one consumer persists a backlog of
// b.N accepted orders of one voucher into MariaDB: the orders are put in
// the stream first (untimed), then the consumer drains it.
func BenchmarkConsumer(b *testing.B) {
	for _, batch := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := newEnv(b)
			v := e.voucher(max(b.N, 1))
			preload(b, e, v.ID, b.N)
			cfg := e.consumerConfig()
			cfg.BatchSize = batch
			c := NewConsumer(e.client, e.db, cfg)
			b.ResetTimer()
			stop := e.run(c)
			for c.Stats().Persisted < uint64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			stop()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
		})
	}
}

// preload runs the gate for n new users of the voucher, pipelined.
func preload(b *testing.B, e *env, voucherID int64, n int) {
	ctx := context.Background()
	gateKeys := e.svc.keys.newLocal(voucherID).gateKeys
	for start := 0; start < n; start += 1000 {
		execs := make([]rueidis.LuaExec, 0, 1000)
		for u := start; u < min(start+1000, n); u++ {
			id, err := e.ids.NextID(ctx)
			if err != nil {
				b.Fatal(err)
			}
			execs = append(execs, rueidis.LuaExec{Keys: gateKeys, Args: []string{itoa(int64(u + 1)), itoa(id)}})
		}
		for _, r := range gateScript.ExecMulti(ctx, e.client, execs...) {
			if res, err := r.ToArray(); err != nil || len(res) != 1 {
				b.Fatalf("gate: %v %v", res, err)
			}
		}
	}
}
