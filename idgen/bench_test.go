package idgen

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkNextID measures IDs per second per process with many goroutines
// calling NextID (b.RunParallel, GOMAXPROCS goroutines by default; use
// -cpu to vary), and the round trips to Redis per 1000 IDs.
func BenchmarkNextID(b *testing.B) {
	for _, batch := range []int64{100, 1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c, prefix := testenv.Redis(b)
			g := newGen(b, c, prefix, "order", WithBatch(batch), WithLogger(slog.New(slog.DiscardHandler)))
			take(b, g, 1) // create the hash outside the timing
			settle(g)
			start := g.Stats()
			b.SetParallelism(8)
			b.ResetTimer()

			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := g.NextID(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})

			b.StopTimer()
			st := g.Stats()
			ids := float64(st.IDs - start.IDs)
			b.ReportMetric(ids/b.Elapsed().Seconds(), "ids/s")
			b.ReportMetric(float64(st.RoundTrips-start.RoundTrips)*1000/ids, "roundtrips/1000ids")
			b.ReportMetric(float64(st.Waits-start.Waits)*1000/ids, "waits/1000ids")
		})
	}
}

// BenchmarkSeedIncr is the seed's scheme for comparison: one INCR, one
// round trip, per ID.
func BenchmarkSeedIncr(b *testing.B) {
	c, prefix := testenv.Redis(b)
	key := prefix + "icr:order"
	b.SetParallelism(8)
	b.ResetTimer()

	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := c.Do(ctx, c.B().Incr().Key(key).Build()).Error(); err != nil {
				b.Error(err)
				return
			}
		}
	})

	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	b.ReportMetric(1000, "roundtrips/1000ids")
}

// BenchmarkSlotsNextIDIn is BenchmarkNextID for Slots (batch 1000): the
// goroutines take IDs of one slot, or of three slots in turn (a voucher
// of three shards), each slot from its own hash.
func BenchmarkSlotsNextIDIn(b *testing.B) {
	for _, slots := range []int{1, 3} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			c, prefix := testenv.Redis(b)
			s := NewSlots(c, "order", WithPrefix(prefix), WithLogger(slog.New(slog.DiscardHandler)))
			b.Cleanup(s.Close)
			for slot := range slots { // create the hashes outside the timing
				if _, err := s.NextIDIn(context.Background(), slot*5461); err != nil {
					b.Fatal(err)
				}
			}
			start := s.Stats()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for i := 0; pb.Next(); i++ {
					if _, err := s.NextIDIn(ctx, i%slots*5461); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := s.Stats()
			ids := float64(st.IDs - start.IDs)
			b.ReportMetric(ids/b.Elapsed().Seconds(), "ids/s")
			b.ReportMetric(float64(st.RoundTrips-start.RoundTrips)*1000/ids, "roundtrips/1000ids")
			b.ReportMetric(float64(st.Waits-start.Waits)*1000/ids, "waits/1000ids")
		})
	}
}
