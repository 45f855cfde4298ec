package store

import (
	"context"
	"fmt"
	"strconv"
	"testing"
)

// BenchmarkBuyerNumbers numbers new subjects in batches of each size, as
// auth's numbering does for buyers new to flashsale, and reports
// subjects/s.
func BenchmarkBuyerNumbers(b *testing.B) {
	for _, size := range []int{1, 8, 32, 256} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			db := openDB(b, dialects[0].url(b))
			ctx := context.Background()
			subjects := make([]string, size)
			next := 0
			for b.Loop() {
				for i := range subjects {
					next++
					subjects[i] = "buyer-" + strconv.Itoa(next)
				}
				if _, err := db.BuyerNumbers(ctx, "https://idp.example", subjects); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(next)/b.Elapsed().Seconds(), "subjects/s")
		})
	}
}
