package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestDirectCallsReturnWhenRedisStalls is TestCallsReturnWhenRedisStalls
// for calls sent from the caller's goroutine (see directWindow): Redis is
// killed or stopped under load, while the Client's health sends them
// directly, and every Lock and Unlock made before, during and after must
// return within the bound. More goroutines loop than directInFlight, so
// both kinds of call meet the fault.
func TestDirectCallsReturnWhenRedisStalls(t *testing.T) {
	for _, f := range redisFaults[:2] {
		t.Run(f.name, func(t *testing.T) { runDirectStall(t, f) })
	}
}

func runDirectStall(t *testing.T, f redisFault) {
	s := testenv.StartRedis(t)
	e := &stallEnv{t: t, s: s, prefix: "direct:" + testenv.Unique() + ":"}
	e.c, e.rc = e.client()
	const goroutines = 2 * directInFlight
	var (
		stop            atomic.Bool
		calls, slow     atomic.Int64
		worst           atomic.Int64
		wg              sync.WaitGroup
		started, warmed = make(chan struct{}), sync.WaitGroup{}
	)
	warmed.Add(goroutines)
	for i := range goroutines {
		wg.Go(func() {
			m := e.c.Mutex(fmt.Sprintf("d%d", i), WithWatchdog(stallLease))
			for n := 0; !stop.Load(); n++ {
				took := lockUnlockOnce(m)
				calls.Add(1)
				if took > stallCtx+stallSlack {
					slow.Add(1)
				}
				for w := worst.Load(); int64(took) > w && !worst.CompareAndSwap(w, int64(took)); w = worst.Load() {
				}
				if n == 20 {
					warmed.Done()
					<-started
				}
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	warmed.Wait()
	close(started)
	if !eventually(time.Second, e.c.health.direct) {
		t.Fatal("the Client does not send directly under load: the test does not test it")
	}
	lateness := processLateness()
	f.cause(s)
	time.Sleep(3 * stallCtx)
	f.heal(s)
	time.Sleep(stallCtx)
	stop.Store(true)
	wg.Wait()
	late := lateness()
	t.Logf("%d Lock+Unlock pairs, the slowest took %v; a 1ms sleep overslept by up to %v", calls.Load(), time.Duration(worst.Load()), late)
	if n := slow.Load(); n > 0 {
		t.Errorf("%d Lock+Unlock pairs took longer than %v each (slowest %v); their contexts ended after %v; "+
			"a 1ms sleep overslept by up to %v meanwhile", n, stallCtx+stallSlack, time.Duration(worst.Load()), stallCtx, late)
	}
}

// lockUnlockOnce takes m and releases it with one stallCtx context, and
// returns how long that took.
func lockUnlockOnce(m *Mutex) time.Duration {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), stallCtx)
	defer cancel()
	if l, err := m.Lock(ctx); err == nil {
		_ = l.Unlock(ctx)
	}
	return time.Since(start)
}

// eventually reports whether cond held at some point within d.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// processLateness measures, until the returned function is called, by how
// much a 1ms sleep oversleeps at most: how long the whole process was held
// up (other programs on the CPUs, the collector under -race), which tells
// a slow call's own fault from the machine's.
func processLateness() (stop func() time.Duration) {
	done, worst := make(chan struct{}), make(chan time.Duration, 1)
	go func() {
		var w time.Duration
		for {
			select {
			case <-done:
				worst <- w
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			w = max(w, time.Since(t0)-time.Millisecond)
		}
	}()
	return func() time.Duration { close(done); return <-worst }
}
