package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

var duration = flag.Duration("duration", 5*time.Second, "how long BenchmarkContended runs each library")

// contendedSplit is how BenchmarkContended spreads its 64 goroutines over
// worker processes.
var contendedSplit = []int{22, 21, 21}

// TestWorker is the entry point of the worker processes the contended
// benchmark starts; run directly, it has nothing to do.
func TestWorker(t *testing.T) {
	c, ok, err := workerConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("not a worker process: BenchmarkContended starts these")
	}
	if err := work(c, testenv.RedisAddr()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkUncontended measures acquire+release pairs per second with every
// goroutine on its own key: one goroutine (latency-bound) and 64.
func BenchmarkUncontended(b *testing.B) {
	shapes := []struct {
		name       string
		goroutines int
	}{
		{"serial", 1},
		{"parallel64", 64},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			for _, lib := range libraries {
				b.Run(lib.name, func(b *testing.B) { benchUncontended(b, lib, shape.goroutines) })
			}
		})
	}
}

func benchUncontended(b *testing.B, lib library, goroutines int) {
	l, err := lib.open(testenv.RedisAddr(), newPrefix(b, lib.name))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	// A warm-up round dials the connections outside the timer.
	if err := hammer(l, goroutines, goroutines); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	err = hammer(l, goroutines, b.N)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// hammerTimeout bounds one hammer call, so that a lock that never returns
// fails the benchmark instead of hanging it.
const hammerTimeout = 5 * time.Minute

// hammer has goroutines goroutines, each on its own key, lock and unlock n
// times in total.
func hammer(l locker, goroutines, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), hammerTimeout)
	defer cancel()
	var next atomic.Int64
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			key := fmt.Sprintf("u%d", i)
			for next.Add(1) <= int64(n) {
				unlock, err := l.Lock(ctx, key)
				if err != nil {
					errs[i] = fmt.Errorf("lock %s: %w", key, err)
					return
				}
				if err := unlock(ctx); err != nil {
					errs[i] = fmt.Errorf("unlock %s: %w", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkContended has 64 goroutines in 3 processes contend for one key
// for -duration. It runs once whatever b.N is: the run has a fixed length.
func BenchmarkContended(b *testing.B) {
	for _, lib := range libraries {
		b.Run(lib.name, func(b *testing.B) {
			s := contended(b, lib.name, contendedSplit, *duration)
			if s.Violations > 0 {
				b.Fatalf("%d mutual-exclusion violations in %d holds", s.Violations, s.Holds)
			}
			b.ReportMetric(s.PerSecond, "acq/s")
			b.ReportMetric(float64(s.P50)/float64(time.Millisecond), "p50-wait-ms")
			b.ReportMetric(float64(s.P99)/float64(time.Millisecond), "p99-wait-ms")
			b.ReportMetric(s.Fairness, "fairness")
			b.ReportMetric(float64(s.Violations), "violations")
			b.ReportMetric(float64(s.Retries), "retries")
		})
	}
}

// contended runs lib contended over worker processes, one per entry of
// split, for d and aggregates the result. It fails tb on a worker failure;
// violations are for the caller to judge.
func contended(tb testing.TB, lib string, split []int, d time.Duration) summary {
	tb.Helper()
	prefix := newPrefix(tb, lib)
	ctx, cancel := context.WithTimeout(context.Background(), startDelay+d+2*time.Minute)
	defer cancel()
	results, err := spawn(ctx, os.Args[0], tb.TempDir(), lib, prefix, "contended", split, d)
	if err != nil {
		tb.Fatal(err)
	}
	s := aggregate(results, d)
	if len(s.Errors) > 0 {
		tb.Fatalf("%s: %d goroutines failed, first: %s", lib, len(s.Errors), s.Errors[0])
	}
	return s
}

// newPrefix returns a key prefix for lib unique to this run
// ("bench:<hex>:<lib>:") and deletes its keys when tb ends.
func newPrefix(tb testing.TB, lib string) string {
	tb.Helper()
	prefix := "bench:" + testenv.Unique() + ":" + lib + ":"
	c, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		tb.Fatalf("Redis at %s is not reachable: %v", testenv.RedisAddr(), err)
	}
	tb.Cleanup(func() {
		defer c.Close()
		if err := testenv.DeletePrefix(context.Background(), c, prefix); err != nil {
			tb.Errorf("deleting keys %s*: %v", prefix, err)
		}
	})
	return prefix
}
