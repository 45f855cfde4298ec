package lock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func mustRWLock(t testing.TB, take func(context.Context) (*RWLock, error), ctx context.Context) *RWLock {
	t.Helper()
	l, err := take(ctx)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	return l
}

func mustUnlockRW(t testing.TB, l *RWLock) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock(%s): %v", l.Name(), err)
	}
}

// wantNotObtainedRW asserts that take fails at once with ErrNotObtained.
func wantNotObtainedRW(t testing.TB, take func(context.Context) (*RWLock, error)) {
	t.Helper()
	l, err := take(context.Background())
	if !errors.Is(err, ErrNotObtained) {
		if err == nil {
			l.Unlock(context.Background())
		}
		t.Fatalf("try = %v, want ErrNotObtained", err)
	}
}

// sharedQueued returns the number of waiters queued in Redis for s.
func sharedQueued(t testing.TB, rc rueidis.Client, s *sharedLock) int64 {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Zcard().Key(s.keys[2]).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitSharedQueued waits until n waiters are queued for s.
func waitSharedQueued(t testing.TB, rc rueidis.Client, s *sharedLock, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for sharedQueued(t, rc, s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d waiters queued", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	c, _, prefix := newTestClient(t)
	other := sibling(t, prefix).RWMutex("a")
	rw := c.RWMutex("a")
	ctx := timeout(t, 5*time.Second)

	r1 := mustRWLock(t, rw.RLock, ctx)
	r2 := mustRWLock(t, other.RLock, ctx)
	r3 := mustRWLock(t, rw.TryRLock, ctx)
	if r1.Writer() || r1.Token() == r3.Token() {
		t.Fatalf("read locks: writer %v, tokens %s %s", r1.Writer(), r1.Token(), r3.Token())
	}
	wantNotObtainedRW(t, other.TryLock)
	for _, r := range []*RWLock{r1, r2, r3} {
		mustUnlockRW(t, r)
	}

	w := mustRWLock(t, other.TryLock, ctx)
	if !w.Writer() {
		t.Fatal("write lock says it is not the writer")
	}
	wantNotObtainedRW(t, rw.TryLock)
	wantNotObtainedRW(t, rw.TryRLock)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := rw.RLock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RLock under a writer: %v, want DeadlineExceeded", err)
	}
	mustUnlockRW(t, w)
	if err := w.Unlock(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	mustUnlockRW(t, mustRWLock(t, rw.TryLock, ctx))
}

// TestRWMutexConcurrentExclusion has 32 goroutines of two Clients mix
// reads and writes: writers must be alone, readers must overlap.
func TestRWMutexConcurrentExclusion(t *testing.T) {
	c, _, prefix := newTestClient(t)
	locks := []*RWMutex{c.RWMutex("a"), sibling(t, prefix).RWMutex("a")}
	var readers, writers, maxReaders, bad atomic.Int64
	var counter int64 // written only under the write lock
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw := locks[g%2]
			for i := range 10 {
				ctx := timeout(t, 20*time.Second)
				if (g+i)%8 == 0 {
					l := mustRWLockE(t, rw.Lock, ctx)
					if writers.Add(1) != 1 || readers.Load() != 0 {
						bad.Add(1)
					}
					v := counter
					time.Sleep(100 * time.Microsecond)
					counter = v + 1
					writers.Add(-1)
					unlockE(t, l)
					continue
				}
				l := mustRWLockE(t, rw.RLock, ctx)
				n := readers.Add(1)
				if writers.Load() != 0 {
					bad.Add(1)
				}
				for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
				}
				time.Sleep(time.Millisecond)
				readers.Add(-1)
				unlockE(t, l)
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d holds overlapped a writer", bad.Load())
	}
	if want := int64(32 * 10 / 8); counter != want {
		t.Fatalf("counter %d after %d writes", counter, want)
	}
	if maxReaders.Load() < 2 {
		t.Errorf("at most %d reader at once", maxReaders.Load())
	}
}

// mustRWLockE and unlockE report with t.Error, for goroutines.
func mustRWLockE(t *testing.T, take func(context.Context) (*RWLock, error), ctx context.Context) *RWLock {
	l, err := take(ctx)
	if err != nil {
		t.Error(err)
		runtime.Goexit()
	}
	return l
}

func unlockE(t *testing.T, l interface{ release(context.Context) error }) {
	if err := l.release(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestRWMutexWaitingWriterIsNotStarved runs a stream of overlapping
// readers, so that the lock is never free of readers, and queues a writer
// in it: the writer must get the lock, and no reader that asked after the
// writer queued may get in before the writer is done.
func TestRWMutexWaitingWriterIsNotStarved(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	rw, other := c.RWMutex("a"), sibling(t, prefix).RWMutex("a")
	stop := make(chan struct{})
	var queuedAt, writerDone atomic.Int64 // unix ns
	var late, overtook atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(g) * 20 * time.Millisecond / 8) // staggered: some reader always holds
			for {
				select {
				case <-stop:
					return
				default:
				}
				asked := time.Now().UnixNano()
				l := mustRWLockE(t, []*RWMutex{rw, other}[g%2].RLock, timeout(t, 20*time.Second))
				got := time.Now().UnixNano()
				if q := queuedAt.Load(); q != 0 && asked > q {
					late.Add(1)
					if d := writerDone.Load(); d == 0 || got < d {
						overtook.Add(1)
					}
				}
				time.Sleep(20 * time.Millisecond)
				unlockE(t, l)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the stream is flowing
	wantNotObtainedRW(t, rw.TryLock)
	result := make(chan *RWLock, 1)
	start := time.Now()
	go func() { result <- mustRWLockE(t, other.Lock, timeout(t, 10*time.Second)) }()
	waitSharedQueued(t, rc, &rw.s, 1)
	queuedAt.Store(time.Now().UnixNano())
	w := <-result
	waited := time.Since(start)
	time.Sleep(10 * time.Millisecond)
	writerDone.Store(time.Now().UnixNano())
	mustUnlockRW(t, w)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if overtook.Load() != 0 {
		t.Fatalf("%d of %d readers that asked after the writer queued got in before it", overtook.Load(), late.Load())
	}
	if late.Load() == 0 {
		t.Fatal("no reader asked while the writer waited: the stream did not run")
	}
	if waited > 2*time.Second {
		t.Errorf("writer waited %v behind readers holding 20ms each", waited)
	}
	t.Logf("writer waited %v; %d readers queued behind it", waited, late.Load())
}

func TestRWMutexFencesIncrease(t *testing.T) {
	c, _, prefix := newTestClient(t)
	locks := []*RWMutex{c.RWMutex("a"), sibling(t, prefix).RWMutex("a")}
	ctx := timeout(t, 5*time.Second)
	var last int64
	for i := range 6 {
		w := mustRWLock(t, locks[i%2].Lock, ctx)
		if w.Fence() <= last {
			t.Fatalf("write #%d fence %d after %d", i, w.Fence(), last)
		}
		last = w.Fence()
		mustUnlockRW(t, w)
		r := mustRWLock(t, locks[(i+1)%2].RLock, ctx)
		if r.Fence() != last {
			t.Fatalf("read lock's fence %d, want the last writer's %d", r.Fence(), last)
		}
		mustUnlockRW(t, r)
	}
}

func TestRWMutexReentrant(t *testing.T) {
	c, _, prefix := newTestClient(t)
	rw, other := c.RWMutex("a"), sibling(t, prefix).RWMutex("a")
	ctx := timeout(t, 5*time.Second)

	w := mustRWLock(t, rw.Lock, ctx)
	if err := w.Reenter(ctx); err != nil {
		t.Fatal(err)
	}
	for _, take := range []func(context.Context) (*RWLock, error){rw.Lock, rw.RLock, rw.TryLock} {
		if again := mustRWLock(t, take, w.Context()); again != w {
			t.Fatal("locking with the holder's context did not re-enter")
		}
	}
	for i := range 4 { // five holds: four Unlocks keep it
		mustUnlockRW(t, w)
		wantNotObtainedRW(t, other.TryRLock)
		if err := w.Context().Err(); err != nil {
			t.Fatalf("after %d of 5 Unlocks the context is %v", i+1, err)
		}
	}
	mustUnlockRW(t, w)
	if context.Cause(w.Context()) != context.Canceled {
		t.Fatalf("context cause %v after the last Unlock", context.Cause(w.Context()))
	}
	if err := w.Reenter(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Reenter after release: %v", err)
	}

	r := mustRWLock(t, rw.RLock, ctx)
	if again := mustRWLock(t, rw.RLock, r.Context()); again != r {
		t.Fatal("RLock with a reader's context did not re-enter")
	}
	if _, err := rw.Lock(r.Context()); !errors.Is(err, ErrUpgrade) {
		t.Fatalf("Lock under a read lock: %v, want ErrUpgrade", err)
	}
	mustUnlockRW(t, r)
	mustUnlockRW(t, r)
	mustUnlockRW(t, mustRWLock(t, other.TryLock, ctx))
}

func TestRWMutexLostAndWatchdog(t *testing.T) {
	c, _, prefix := newTestClient(t)
	ctx := timeout(t, 10*time.Second)

	fixed := mustRWLock(t, c.RWMutex("a", WithLease(100*time.Millisecond)).Lock, ctx)
	select {
	case <-fixed.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("Lost not closed after a fixed lease ran out")
	}
	if context.Cause(fixed.Context()) != ErrLost {
		t.Fatalf("context cause %v, want ErrLost", context.Cause(fixed.Context()))
	}
	if err := fixed.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unlock after loss: %v", err)
	}

	other := sibling(t, prefix).RWMutex("b")
	kept := mustRWLock(t, c.RWMutex("b", WithWatchdog(300*time.Millisecond)).Lock, ctx)
	for range 5 { // five times the lease
		time.Sleep(300 * time.Millisecond)
		wantNotObtainedRW(t, other.TryRLock)
	}
	select {
	case <-kept.Lost():
		t.Fatal("watchdog let the lock go")
	default:
	}
	if err := kept.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	mustUnlockRW(t, kept)
}

func TestRWMutexWaitHonoursContextAndLeavesNoEntry(t *testing.T) {
	c, rc, _ := newTestClient(t)
	rw := c.RWMutex("a")
	w := mustRWLock(t, rw.Lock, timeout(t, 5*time.Second))
	short, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := rw.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Lock returned %v after its deadline of 150ms", d)
	}
	if n := sharedQueued(t, rc, &rw.s); n != 0 {
		t.Fatalf("%d entries left in the queue", n)
	}
	mustUnlockRW(t, w)
	mustUnlockRW(t, mustRWLock(t, rw.TryRLock, context.Background()))
}
