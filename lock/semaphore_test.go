package lock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func mustAcquire(t testing.TB, take func(context.Context) (*Permit, error), ctx context.Context) *Permit {
	t.Helper()
	p, err := take(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return p
}

func mustRelease(t testing.TB, p *Permit) {
	t.Helper()
	if err := p.Release(context.Background()); err != nil {
		t.Fatalf("Release(%s): %v", p.Name(), err)
	}
}

func wantNoPermit(t testing.TB, s *Semaphore) {
	t.Helper()
	p, err := s.TryAcquire(context.Background())
	if !errors.Is(err, ErrNotObtained) {
		if err == nil {
			p.Release(context.Background())
		}
		t.Fatalf("TryAcquire = %v, want ErrNotObtained", err)
	}
}

func TestSemaphoreTryAcquireWhenFullFailsAtOnce(t *testing.T) {
	c, _, prefix := newTestClient(t)
	s, other := c.Semaphore("a", 2), sibling(t, prefix).Semaphore("a", 5) // the creator's 2 hold
	ctx := timeout(t, 5*time.Second)
	p1 := mustAcquire(t, s.TryAcquire, ctx)
	p2 := mustAcquire(t, other.Acquire, ctx)
	start := time.Now()
	wantNoPermit(t, other)
	wantNoPermit(t, s)
	if d := time.Since(start); d > time.Second {
		t.Errorf("two failed TryAcquires took %v", d)
	}
	if n, err := other.Permits(ctx); err != nil || n != 2 {
		t.Fatalf("Permits() = %d, %v; want the creator's 2", n, err)
	}
	mustRelease(t, p1)
	p3 := mustAcquire(t, other.TryAcquire, ctx)
	mustRelease(t, p2)
	mustRelease(t, p3)
	if err := p3.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
}

func TestSemaphoreAcquireHonoursContext(t *testing.T) {
	c, rc, _ := newTestClient(t)
	s := c.Semaphore("a", 1)
	p := mustAcquire(t, s.Acquire, timeout(t, 5*time.Second))
	short, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Acquire returned %v after its deadline of 150ms", d)
	}
	if n := sharedQueued(t, rc, &s.s); n != 0 {
		t.Fatalf("%d entries left in the queue", n)
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if _, err := s.Acquire(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a done context: %v", err)
	}
	mustRelease(t, p)
}

// TestSemaphoreServesWaitersInOrder queues waiters of two Clients one by
// one behind a full semaphore: they must get their permits in that order.
func TestSemaphoreServesWaitersInOrder(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	sems := []*Semaphore{c.Semaphore("a", 1), sibling(t, prefix).Semaphore("a", 1)}
	holder := mustAcquire(t, sems[0].Acquire, timeout(t, 5*time.Second))
	const n = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sems[i%2].Acquire(timeout(t, 20*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := p.Release(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		waitSharedQueued(t, rc, &sems[0].s, int64(i+1))
	}
	mustRelease(t, holder)
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
		t.Fatalf("served in order %v, want %v", order, want)
	}
}

func TestSemaphoreSetPermits(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	s, other := c.Semaphore("a", 1), sibling(t, prefix).Semaphore("a", 1)
	ctx := timeout(t, 10*time.Second)
	first := mustAcquire(t, s.Acquire, ctx)
	got := make(chan *Permit, 3)
	for i := range 3 {
		go func() {
			if p, err := other.Acquire(ctx); err == nil {
				got <- p
			} else {
				t.Error(err)
			}
		}()
		waitSharedQueued(t, rc, &s.s, int64(i+1))
	}
	if err := s.SetPermits(ctx, 3); err != nil { // two waiters fit now
		t.Fatal(err)
	}
	held := []*Permit{first, <-got, <-got}
	if n, err := other.Permits(ctx); err != nil || n != 3 {
		t.Fatalf("Permits() = %d, %v; want 3", n, err)
	}
	if err := s.SetPermits(ctx, 1); err != nil { // three held, one allowed
		t.Fatal(err)
	}
	mustRelease(t, held[0])
	mustRelease(t, held[1])
	select {
	case p := <-got:
		p.Release(ctx)
		t.Fatal("a waiter got a permit while as many were held as SetPermits(1) allows")
	case <-time.After(400 * time.Millisecond): // longer than the fallback check
	}
	mustRelease(t, held[2])
	select {
	case p := <-got:
		mustRelease(t, p)
	case <-time.After(5 * time.Second):
		t.Fatal("the last waiter did not get the permit freed under SetPermits(1)")
	}

	if err := s.SetPermits(ctx, 0); !errors.Is(err, ErrPermits) {
		t.Fatalf("SetPermits(0): %v, want ErrPermits", err)
	}
	if _, err := c.Semaphore("b", 0).TryAcquire(ctx); !errors.Is(err, ErrPermits) {
		t.Fatalf("TryAcquire of a semaphore made with 0 permits: %v, want ErrPermits", err)
	}
}

func TestSemaphoreWatchdogKeepsLongHolder(t *testing.T) {
	c, _, prefix := newTestClient(t)
	s := c.Semaphore("a", 1, WithWatchdog(300*time.Millisecond))
	other := sibling(t, prefix).Semaphore("a", 1)
	p := mustAcquire(t, s.Acquire, timeout(t, 5*time.Second))
	for range 5 { // five times the lease
		time.Sleep(300 * time.Millisecond)
		wantNoPermit(t, other)
	}
	select {
	case <-p.Lost():
		t.Fatal("watchdog let the permit go")
	default:
	}
	mustRelease(t, p)
	mustRelease(t, mustAcquire(t, other.TryAcquire, context.Background()))
}

func TestSemaphoreFixedLeaseIsLost(t *testing.T) {
	c, _, prefix := newTestClient(t)
	p := mustAcquire(t, c.Semaphore("a", 1, WithLease(100*time.Millisecond)).Acquire, timeout(t, 5*time.Second))
	work := p.Context()
	select {
	case <-p.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("Lost not closed after the fixed lease ran out")
	}
	if context.Cause(work) != ErrLost {
		t.Fatalf("context cause %v, want ErrLost", context.Cause(work))
	}
	if err := p.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release after loss: %v, want ErrNotHeld", err)
	}
	mustRelease(t, mustAcquire(t, sibling(t, prefix).Semaphore("a", 1).TryAcquire, context.Background()))
}
