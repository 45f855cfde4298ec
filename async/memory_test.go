package async_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale"

	"github.com/flashsale/flashsale/async/consume"
)

// BenchmarkRedisMemory measures what a sale costs in Redis memory, on a
// private redis-server, with 20,000 buyers of one voucher (the figures are
// per order; b.N is not used: run it with -benchtime=1x):
//
//   - inflight-B/order: used_memory grown per accepted order while no
//     consumer runs (buyer, stream entry, order pointer);
//   - buyer-B, entry-B, pointer-B: MEMORY USAGE of the buyers hash and
//     of the stream per order, and the rest of the growth per order
//     (pointers: a key each, with its TTL);
//   - persisted-B/order: what stays per order once the consumer has
//     persisted and trimmed everything (buyer and pointer, until the
//     pointer's TTL; retiring the sale frees the buyer).
func BenchmarkRedisMemory(b *testing.B) {
	const n = 20000
	e, _ := privateEnv(b)
	ctx := context.Background()
	v := e.Voucher(n)
	e.Buy(v.ID, n+1) // the ID generator's hash, the stream and the group exist
	base := e.usedMemory()
	var next atomic.Int64
	next.Store(n + 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for u := next.Add(1); u <= 2*n; u = next.Add(1) {
				if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	sold := float64(n - 1)
	grown := float64(e.usedMemory() - base)
	vk := e.Keys.Voucher(v.ID)
	usage := func(key string) float64 {
		m, err := e.Do(e.Client.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
		if err != nil {
			b.Fatal(err)
		}
		return float64(m)
	}
	buyers, stream := usage(vk.Buyers), usage(vk.Orders)
	b.ReportMetric(grown/sold, "inflight-B/order")
	b.ReportMetric(buyers/float64(n), "buyer-B")
	b.ReportMetric(stream/float64(n), "entry-B")
	b.ReportMetric((grown-(buyers+stream)*sold/float64(n))/sold, "pointer-B")

	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, n)
	b.ReportMetric(float64(e.usedMemory()-base)/sold, "persisted-B/order")
	b.Logf("%d orders: used_memory +%.0f B in flight; buyers hash %.0f B, stream %.0f B; stream after draining %s B",
		n, grown, buyers, stream, strconv.FormatFloat(usage(vk.Orders), 'f', 0, 64))
}
