package bench

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// BenchmarkRoundTrip measures the floor under the serial uncontended
// shape: one bare SET after another, with each client, and with rueidis in
// two more settings that change nothing but how busy the client's CPUs
// are: each SET sent from a fresh goroutine the caller waits for (the way
// redsync sends every command), and a goroutine spinning beside the loop.
// If those two are faster, a round trip costs mostly the wake-up of idle
// CPUs, not the client or Redis.
func BenchmarkRoundTrip(b *testing.B) {
	ctx := context.Background()
	rc, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	key := newPrefix(b, "roundtrip") + "k"
	set := func() error { return rc.Do(ctx, rc.B().Set().Key(key).Value("1").Build()).Error() }

	b.Run("rueidis", func(b *testing.B) { loop(b, set) })
	b.Run("rueidis-goroutine-each", func(b *testing.B) {
		loop(b, func() error {
			done := make(chan error, 1)
			go func() { done <- set() }()
			return <-done
		})
	})
	b.Run("rueidis-busy-cpu", func(b *testing.B) {
		var stop atomic.Bool
		spun := make(chan struct{})
		go func() {
			defer close(spun)
			for !stop.Load() {
				runtime.Gosched()
			}
		}()
		loop(b, set)
		stop.Store(true)
		<-spun
	})
	b.Run("go-redis", func(b *testing.B) {
		gc := goredislib.NewClient(&goredislib.Options{Addr: testenv.RedisAddr()})
		defer gc.Close()
		loop(b, func() error { return gc.Set(ctx, key, "1", 0).Err() })
	})
}

// loop runs op b.N times after one untimed call, and reports the mean
// round trip in µs.
func loop(b *testing.B, op func() error) {
	if err := op(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/rtt")
}
