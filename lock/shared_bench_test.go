package lock

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRWMutex has 64 goroutines of one process take one RWMutex,
// read-heavy (1 write in 20) and write-heavy (19 writes in 20), and, as
// baselines, a Mutex (every acquisition exclusive) with its default turns
// (the lock passes between goroutines of the process without Redis for up
// to 2ms) and without turns (every handoff through Redis, as RWMutex's).
// No Go peer (redsync, bsm/redislock, rueidislock) has a readers-writer
// lock. Holds are released at once; b.N is the total of acquisitions.
func BenchmarkRWMutex(b *testing.B) {
	for _, bc := range []struct {
		name   string
		writes int64 // per 20 acquisitions
	}{{"read-heavy", 1}, {"write-heavy", 19}} {
		b.Run(bc.name, func(b *testing.B) {
			c, _, _ := newTestClient(b)
			rw := c.RWMutex("hot")
			runContended(b, 64, func(ctx context.Context, n int64) (func(context.Context) error, error) {
				take := rw.RLock
				if n%20 < bc.writes {
					take = rw.Lock
				}
				l, err := take(ctx)
				if err != nil {
					return nil, err
				}
				return l.Unlock, nil
			})
		})
	}
	for _, bc := range []struct {
		name string
		turn time.Duration
	}{{"mutex", 2 * time.Millisecond}, {"mutex-no-turns", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			c, _, _ := newTestClient(b, WithTurnDuration(bc.turn))
			runContended(b, 64, lockMutex(c.Mutex("hot")))
		})
	}
}

// BenchmarkSemaphore has 64 goroutines of one process share a Semaphore
// of 8 permits, and of 1 (to set beside BenchmarkRWMutex/mutex). No Go
// peer has a distributed semaphore.
func BenchmarkSemaphore(b *testing.B) {
	for _, bc := range []struct {
		name    string
		permits int
	}{{"permits=8", 8}, {"permits=1", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			c, _, _ := newTestClient(b)
			s := c.Semaphore("hot", bc.permits)
			runContended(b, 64, func(ctx context.Context, _ int64) (func(context.Context) error, error) {
				p, err := s.Acquire(ctx)
				if err != nil {
					return nil, err
				}
				return p.Release, nil
			})
		})
	}
}
