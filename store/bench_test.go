package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// benchURLs are the databases the benchmarks run against: MariaDB/MySQL with
// and without client-side interpolation of placeholders, and SQLite for
// comparison.
var benchURLs = []struct {
	name string
	url  func(b testing.TB) string
}{
	{"mysql", func(b testing.TB) string { return dialects[0].url(b) }},
	{"mysql-prepared", func(b testing.TB) string { return dialects[0].url(b) + "?interpolateParams=false" }},
	{"sqlite", sqliteURL},
}

// BenchmarkPersistOrders persists batches of new orders for one voucher, as
// the async consumer does, and reports orders/s.
func BenchmarkPersistOrders(b *testing.B) {
	for _, d := range benchURLs {
		for _, size := range []int{100, 500} {
			b.Run(fmt.Sprintf("%s/batch=%d", d.name, size), func(b *testing.B) {
				db := openDB(b, d.url(b))
				createVoucher(b, db, 1, flashsale.MaxStock)
				next := int64(0)
				orders := make([]flashsale.Order, size)
				ctx := context.Background()
				b.ResetTimer()
				for b.Loop() {
					for i := range orders {
						next++
						// Buyers arrive in no particular order: spread the
						// user ids over the unique key.
						user := next * 2654435761 % (1 << 40)
						orders[i] = flashsale.Order{ID: next, VoucherID: 1, UserID: user, Status: flashsale.StatusPending}
					}
					res, err := db.PersistOrders(ctx, orders)
					if err != nil || res.Inserted != size {
						b.Fatalf("PersistOrders = %+v, %v", res, err)
					}
				}
				b.ReportMetric(float64(next)/b.Elapsed().Seconds(), "orders/s")
			})
		}
	}
}

// BenchmarkPersistOutbox is BenchmarkPersistOrders on MySQL with and
// without the outbox's events (issue 35): what writing them costs the
// async consumer.
func BenchmarkPersistOutbox(b *testing.B) {
	for _, size := range []int{100, 500} {
		for _, outbox := range []string{"on", "off"} {
			b.Run(fmt.Sprintf("batch=%d/outbox=%s", size, outbox), func(b *testing.B) {
				db := openDB(b, dialects[0].url(b))
				if outbox == "off" {
					db = db.WithoutOutbox()
				}
				createVoucher(b, db, 1, flashsale.MaxStock)
				next := int64(0)
				orders := make([]flashsale.Order, size)
				// Ids as the slotted ID generator makes them (idgen: a
				// flag bit, the second, a sequence from bit 14): their
				// digits are what a batch's outbox row holds.
				base := int64(1)<<62 | time.Now().Unix()%(1<<31)<<31
				for b.Loop() {
					for i := range orders {
						next++
						orders[i] = flashsale.Order{ID: base + next<<14, VoucherID: 1, UserID: next * 2654435761 % (1 << 40), Status: flashsale.StatusPending}
					}
					if res, err := db.PersistOrders(context.Background(), orders); err != nil || res.Inserted != size {
						b.Fatalf("PersistOrders = %+v, %v", res, err)
					}
				}
				b.ReportMetric(float64(next)/b.Elapsed().Seconds(), "orders/s")
			})
		}
	}
}

// BenchmarkDecrementRemaining takes one unit at a time from one hot row,
// from many goroutines at once (GOMAXPROCS×32, as under a flash sale), and
// reports decrements/s.
func BenchmarkDecrementRemaining(b *testing.B) {
	for _, d := range benchURLs {
		b.Run(d.name, func(b *testing.B) {
			db := openDB(b, d.url(b))
			createVoucher(b, db, 1, flashsale.MaxStock)
			var done atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					ok, err := db.DecrementRemaining(ctx, 1, 1)
					if err != nil || !ok {
						b.Errorf("DecrementRemaining = %v, %v", ok, err)
						return
					}
					done.Add(1)
				}
			})
			b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "decrements/s")
		})
	}
}

// BenchmarkFindVoucherOrders reads a voucher of 50,000 orders, as GET
// /api/vouchers/{id} does: its live orders kept in its row (FindVoucher),
// against the count over its orders that it ran before issue 33, in the
// same run.
func BenchmarkFindVoucherOrders(b *testing.B) {
	db := openDB(b, dialects[0].url(b))
	createVoucher(b, db, 1, flashsale.MaxStock)
	const orders = 50000
	for first := int64(1); first <= orders; first += 1000 {
		users := make([]int64, 1000)
		for i := range users {
			users[i] = first + int64(i)
		}
		if _, err := db.PersistOrders(context.Background(), batch(1, users...)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			if v, err := db.FindVoucher(context.Background(), 1); err != nil || v.Orders != orders {
				b.Fatalf("FindVoucher = %+v, %v", v, err)
			}
		}
	})
	b.Run("counted", func(b *testing.B) {
		for b.Loop() {
			var n int
			if err := db.r.QueryRowContext(context.Background(), "SELECT "+voucherColumns+", (SELECT COUNT(*) FROM orders o WHERE o.voucher_id = v.id AND o."+liveOrders+
				") FROM vouchers v WHERE v.id = ?", 1).Scan(new(int64), new(string), new(int64), new(int64), new(int), new(int), new(int), new(int), new(int), new(string), new(int), scanTime{new(time.Time)}, scanTime{new(time.Time)}, scanTime{new(time.Time)}, &n); err != nil || n != orders {
				b.Fatalf("count = %d, %v", n, err)
			}
		}
	})
}
