package lock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestTryLockExcludesAndReleases(t *testing.T) {
	c, _, prefix := newTestClient(t)
	other := sibling(t, prefix)
	ctx := context.Background()
	m := c.Mutex("a")

	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantNotObtained(t, m)
	wantNotObtained(t, other.Mutex("a"))
	if l2, err := c.Mutex("b").TryLock(ctx); err != nil {
		t.Fatalf("another name must be independent: %v", err)
	} else {
		mustUnlock(t, l2)
	}
	if !strings.HasPrefix(l.Token(), c.id+":") {
		t.Errorf("Token() = %q, want the client id %q as prefix", l.Token(), c.id)
	}
	mustUnlock(t, l)
	if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}
	select {
	case <-l.Context().Done():
	default:
		t.Error("Context() not cancelled after Unlock")
	}
	select {
	case <-l.Lost():
		t.Error("Lost() closed after a normal Unlock")
	default:
	}

	l3, err := other.Mutex("a").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	if l3.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d, want increasing", l3.Fence(), l.Fence())
	}
	mustUnlock(t, l3)
}

func TestUnlockByNonOwnerIsRejected(t *testing.T) {
	c, rc, _ := newTestClient(t)
	ctx := context.Background()
	m := c.Mutex("a")
	owner := mustLock(t, timeout(t, 5*time.Second), m)

	// A handle with another token: what a confused or stale caller has.
	forged := m.newLock(ctx, c.newToken(), grant{fence: 1, ttl: time.Minute}, time.Now())
	if err := forged.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unlock by non-owner = %v, want ErrNotHeld", err)
	}
	if err := forged.Extend(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Extend by non-owner = %v, want ErrNotHeld", err)
	}
	n, err := rc.Do(ctx, rc.B().Hget().Key(m.keyList[0]).Field(owner.Token()).Build()).AsInt64()
	if err != nil || n != 1 {
		t.Fatalf("owner's hold count = %d, %v; want 1", n, err)
	}
	wantNotObtained(t, m)
	mustUnlock(t, owner)
}

func TestLeaseExpiryLetsOthersIn(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	other := sibling(t, prefix)
	ctx := context.Background()
	stale := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a", WithLease(200*time.Millisecond)))

	// The waiter gets in once the lease has passed (found by its fallback
	// re-check, since nobody released).
	m := other.Mutex("a", WithLease(time.Minute))
	fresh := mustLock(t, timeout(t, 10*time.Second), m)
	if fresh.Fence() <= stale.Fence() {
		t.Errorf("fence %d after %d, want increasing", fresh.Fence(), stale.Fence())
	}
	select {
	case <-stale.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() not closed after the fixed lease ran out")
	}
	if err := stale.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale Unlock = %v, want ErrNotHeld", err)
	}
	if err := stale.Extend(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale Extend = %v, want ErrNotHeld", err)
	}
	ok, err := rc.Do(ctx, rc.B().Hexists().Key(m.keyList[0]).Field(fresh.Token()).Build()).AsBool()
	if err != nil || !ok {
		t.Fatalf("new holder's lock gone after the stale Unlock: %v %v", ok, err)
	}
	wantNotObtained(t, c.Mutex("a"))
	mustUnlock(t, fresh)
}

func TestExtendKeepsFixedLease(t *testing.T) {
	c, rc, _ := newTestClient(t)
	ctx := context.Background()
	m := c.Mutex("a", WithLease(time.Second))
	l := mustLock(t, timeout(t, 5*time.Second), m)
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	pttl, err := rc.Do(ctx, rc.B().Pttl().Key(m.keyList[0]).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= int64(time.Second/time.Millisecond) {
		t.Errorf("PTTL after Extend(1m) = %dms", pttl)
	}
	mustUnlock(t, l)
}

func TestWatchdogKeepsLockAcrossLeases(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	other := sibling(t, prefix)
	ctx := context.Background()
	m := c.Mutex("a", WithWatchdog(300*time.Millisecond))
	l := mustLock(t, timeout(t, 5*time.Second), m)

	end := time.Now().Add(2 * time.Second) // more than six leases
	for time.Now().Before(end) {
		time.Sleep(250 * time.Millisecond)
		wantNotObtained(t, other.Mutex("a"))
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost() closed while the watchdog was renewing")
	default:
	}
	mustUnlock(t, l)
	exists, err := rc.Do(ctx, rc.B().Exists().Key(m.keyList[0]).Build()).AsInt64()
	if err != nil || exists != 0 {
		t.Fatalf("lock key exists = %d, %v after Unlock", exists, err)
	}
	l2, err := other.Mutex("a").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	mustUnlock(t, l2)
}

func TestRenewalFailureReportsLoss(t *testing.T) {
	c, rc, _ := newTestClient(t)
	ctx := context.Background()
	m := c.Mutex("a", WithWatchdog(300*time.Millisecond))
	l := mustLock(t, timeout(t, 5*time.Second), m)
	work := l.Context()

	if err := rc.Do(ctx, rc.B().Del().Key(m.keyList[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() not closed after the lock key was deleted")
	}
	<-work.Done()
	if cause := context.Cause(work); !errors.Is(cause, ErrLost) {
		t.Errorf("Cause(Context()) = %v, want ErrLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Unlock of a lost lock = %v, want ErrNotHeld", err)
	}
}

func TestReentryCountsHolds(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	other := sibling(t, prefix)
	ctx := timeout(t, 5*time.Second)
	m := c.Mutex("a")
	l := mustLock(t, ctx, m)

	again, err := c.Mutex("a").Lock(l.Context()) // another Mutex value, same client and name
	if err != nil || again != l {
		t.Fatalf("Lock(l.Context()) = %p, %v; want the same handle %p", again, err, l)
	}
	// Through another lock's context that was obtained inside this one.
	inner := mustLock(t, l.Context(), c.Mutex("b"))
	if again, err := m.TryLock(inner.Context()); err != nil || again != l {
		t.Fatalf("TryLock(inner.Context()) = %p, %v; want %p", again, err, l)
	}
	if err := l.Reenter(ctx); err != nil {
		t.Fatal(err)
	}
	holds, err := rc.Do(ctx, rc.B().Hget().Key(m.keyList[0]).Field(l.Token()).Build()).AsInt64()
	if err != nil || holds != 4 {
		t.Fatalf("hold count in Redis = %d, %v; want 4", holds, err)
	}
	mustUnlock(t, inner)

	for i := 0; i < 3; i++ {
		mustUnlock(t, l)
		wantNotObtained(t, other.Mutex("a"))
		if l.Context().Err() != nil {
			t.Fatalf("Context() cancelled after %d of 4 Unlocks", i+1)
		}
	}
	mustUnlock(t, l)
	if l.Context().Err() == nil {
		t.Fatal("Context() not cancelled after the last Unlock")
	}
	if err := l.Reenter(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Reenter after release = %v, want ErrNotHeld", err)
	}
	l2, err := other.Mutex("a").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the last Unlock: %v", err)
	}
	mustUnlock(t, l2)
}

func TestCancelWhileWaitingLeavesNoEntry(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	other := sibling(t, prefix)
	m := c.Mutex("a")
	holder := mustLock(t, timeout(t, 5*time.Second), m)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := other.Mutex("a").Lock(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with expiring ctx = %v, want context.DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := other.Mutex("a").Lock(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with cancelled ctx = %v, want context.Canceled", err)
	}
	if q := queued(t, rc, m); q != 0 {
		t.Fatalf("queue has %d entries after cancellation, want 0", q)
	}
	mustUnlock(t, holder)
	l, err := other.Mutex("a").TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock after the cancelled waiter: %v", err)
	}
	mustUnlock(t, l)
}

func TestCloseFailsWaiters(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	holder := mustLock(t, timeout(t, 5*time.Second), sibling(t, prefix).Mutex("a"))
	m := c.Mutex("a")
	errc := make(chan error, 1)
	go func() {
		_, err := m.Lock(timeout(t, 10*time.Second))
		errc <- err
	}()
	// Wait until the waiter is queued, then close its client.
	for queued(t, rc, m) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	c.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter after Close = %v, want ErrClosed", err)
	}
	if _, err := m.TryLock(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryLock after Close = %v, want ErrClosed", err)
	}
	if q := queued(t, rc, m); q != 0 {
		t.Fatalf("queue has %d entries after Close, want 0", q)
	}
	mustUnlock(t, holder)
}

// TestFairnessNobodyStarves has goroutines of several clients take one lock
// in a loop until a shared number of acquisitions is reached. Turns are
// FIFO-like (clients in queue order, goroutines in line order), so every
// goroutine gets about the same share; a lock where the fastest re-locker
// wins would starve some.
func TestFairnessNobodyStarves(t *testing.T) {
	c, _, prefix := newTestClient(t)
	clients := []*Client{c, sibling(t, prefix), sibling(t, prefix)}
	const perClient, total = 5, 600
	var left atomic.Int64
	left.Store(total)
	counts := make([]int, len(clients)*perClient)
	var wg sync.WaitGroup
	ctx := timeout(t, 60*time.Second)
	for i := range counts {
		m := clients[i%len(clients)].Mutex("fair")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				counts[i]++
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var sum, sumSq float64
	for _, n := range counts {
		sum += float64(n)
		sumSq += float64(n * n)
	}
	jain := sum * sum / (float64(len(counts)) * sumSq)
	if slices.Min(counts) < total/len(counts)/2 || jain < 0.95 {
		t.Fatalf("acquisitions per goroutine %v (Jain's index %.3f): some goroutines starved", counts, jain)
	}
}

// TestCancellationStress has waiters give up at random moments while the
// lock is handed around, including the moment it is handed to them. No
// acquisition may be lost (the lock stays usable) and no entry may be left.
func TestCancellationStress(t *testing.T) {
	c, rc, prefix := newTestClient(t, WithFallback(5*time.Millisecond, 20*time.Millisecond))
	clients := []*Client{c, sibling(t, prefix, WithFallback(5*time.Millisecond, 20*time.Millisecond))}
	var holders atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		m := clients[i%2].Mutex("a")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 40 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(j%7)*300*time.Microsecond)
				l, err := m.Lock(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
					}
					continue
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				holders.Add(-1)
				if err := l.Unlock(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	m := c.Mutex("a")
	l := mustLock(t, timeout(t, 5*time.Second), m) // nothing stuck
	mustUnlock(t, l)
	if q := queued(t, rc, m); q != 0 {
		t.Fatalf("%d queue entries left", q)
	}
	for _, c := range clients {
		if n := c.queuedLocally(m); n != 0 {
			t.Fatalf("%d local waiters left", n)
		}
	}
}

// hashTagOf returns the part of key Redis Cluster hashes.
func hashTagOf(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

func TestKeysShareOneHashTag(t *testing.T) {
	c, _, _ := newTestClient(t)
	for _, name := range []string{"order:42", "", "{", "}", "a{b}c", "{}x", "x}{y"} {
		m := c.Mutex(name)
		tag := hashTagOf(m.keyList[0])
		if tag == "" || tag == m.keyList[0] {
			t.Errorf("name %q: key %q has no hash tag", name, m.keyList[0])
		}
		for _, k := range m.keyList[1:] {
			if hashTagOf(k) != tag {
				t.Errorf("name %q: key %q is not in the slot of %q", name, k, m.keyList[0])
			}
		}
		l, err := m.TryLock(context.Background())
		if err != nil {
			t.Fatalf("name %q: %v", name, err)
		}
		mustUnlock(t, l)
	}
	if c.Mutex("a{b}c").keyList[0] == c.Mutex("a{b}d").keyList[0] {
		t.Error("two names map to one lock")
	}
}

func TestPrefixWithBracePanics(t *testing.T) {
	rc, _ := testenv.Redis(t)
	defer func() {
		if recover() == nil {
			t.Error("New accepted a prefix with a brace")
		}
	}()
	New(rc, WithPrefix("app:{x}:"))
}
