package lock

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkUncontended measures acquire+release pairs on keys nobody else
// wants: one goroutine (round-trip bound), and many goroutines on distinct
// keys (where rueidis pipelines the scripts of all of them).
func BenchmarkUncontended(b *testing.B) {
	b.Run("sequential", func(b *testing.B) { benchSequential(b, "seq", context.Background()) })
	// With a context that can end, each script is sent with a context of
	// its own (bound.go, direct.go).
	b.Run("sequential-deadline", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		benchSequential(b, "seqd", ctx)
	})
	b.Run("parallel", func(b *testing.B) {
		c, _, _ := newTestClient(b)
		ctx := context.Background()
		var next atomic.Int64
		b.SetParallelism(32) // 64 goroutines on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			m := c.Mutex("par" + strconv.FormatInt(next.Add(1), 10))
			for pb.Next() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}

// BenchmarkContended has 64 goroutines of one process take turns on one
// key; b.N is the total number of acquisitions. It reports acquisitions per
// second and the wait of each Lock call.
func BenchmarkContended(b *testing.B) {
	c, _, _ := newTestClient(b)
	runContended(b, 64, lockMutex(c.Mutex("hot")))
}

// lockMutex returns the take function of runContended for m.
func lockMutex(m *Mutex) func(context.Context, int64) (func(context.Context) error, error) {
	return func(ctx context.Context, _ int64) (func(context.Context) error, error) {
		l, err := m.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	}
}

// runContended has workers goroutines call take b.N times in all (the
// n-th call gets n) and release at once what they took. It reports
// acquisitions per second and the quantiles of the wait in take.
func runContended(b *testing.B, workers int, take func(ctx context.Context, n int64) (release func(context.Context) error, err error)) {
	ctx := context.Background()
	var (
		left  atomic.Int64
		mu    sync.Mutex
		waits []time.Duration
		wg    sync.WaitGroup
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for n := left.Add(-1); n >= 0; n = left.Add(-1) {
				t0 := time.Now()
				release, err := take(ctx, n)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
				if err := release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(waits)
	b.ReportMetric(float64(len(waits))/b.Elapsed().Seconds(), "acq/s")
	b.ReportMetric(msAt(waits, 0.50), "p50-ms")
	b.ReportMetric(msAt(waits, 0.99), "p99-ms")
}

// msAt returns the q-quantile of sorted durations in milliseconds.
func msAt(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// BenchmarkContendedProcesses is the worst case the lock is built for: 64 goroutines spread over 3 processes (22+21+21) on one key, for
// LOCK_CONTENDED_DURATION (default 5s) whatever b.N is. It reports
// acquisitions per second, the wait in Lock, Jain's fairness index and
// overlapping holds (which fail it).
func BenchmarkContendedProcesses(b *testing.B) {
	c := contend(b, []int{22, 21, 21}, envDuration("LOCK_CONTENDED_DURATION", 5*time.Second))
	if c.violations != 0 {
		b.Fatalf("%d overlapping holds", c.violations)
	}
	b.ReportMetric(c.perSecond, "acq/s")
	b.ReportMetric(float64(c.p50)/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(c.p99)/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(c.jain, "fairness")
	b.ReportMetric(float64(c.violations), "violations")
	b.ReportMetric(0, "ns/op")
}

// benchSequential locks and unlocks the mutex name with ctx, one pair
// after another.
func benchSequential(b *testing.B, name string, ctx context.Context) {
	c, _, _ := newTestClient(b)
	m := c.Mutex(name)
	b.ResetTimer()
	for b.Loop() {
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
