package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// proxied returns a lock Client that reaches Redis through a proxy the
// test can freeze, the proxy, and a direct client to look at the keys.
func proxied(t *testing.T) (*Client, *testenv.Proxy, *Mutex) {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	p := testenv.StartProxy(t)
	c := New(p.Client(t), WithPrefix(prefix))
	t.Cleanup(func() { c.Close() })
	direct := New(rc, WithPrefix(prefix))
	t.Cleanup(func() { direct.Close() })
	return c, p, direct.Mutex("a")
}

// lockKeyExists reports whether m's lock hash is in Redis.
func lockKeyExists(t *testing.T, m *Mutex) bool {
	t.Helper()
	rc := m.client.rc
	n, err := rc.Do(context.Background(), rc.B().Exists().Key(m.keyList[0]).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestReenterWhoseReplyIsLostLeavesNoHoldBehind(t *testing.T) {
	c, p, direct := proxied(t)
	l := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a"))
	if err := l.Reenter(context.Background()); err != nil { // the script is loaded: EVALSHA runs
		t.Fatal(err)
	}
	mustUnlock(t, l)

	p.FreezeReplies()
	result := make(chan error, 1)
	go func() { result <- l.Reenter(context.Background()) }()
	// The script runs in Redis; its reply is lost with the connection.
	deadline := time.Now().Add(5 * time.Second)
	for holds(t, direct, l) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the reenter script did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Cut()
	err := <-result
	// The caller follows the contract: one more Unlock only if Reenter
	// succeeded. Either way the lock must end up free.
	unlocks := 1
	if err == nil {
		unlocks = 2
	}
	for range unlocks {
		unlockRetrying(t, l)
	}
	if lockKeyExists(t, direct) {
		t.Fatalf("Reenter returned %v and %d Unlocks left the lock held in Redis", err, unlocks)
	}
}

// unlockRetrying unlocks l, trying again while the connection that broke
// is replaced, as the Unlock documentation says to.
func unlockRetrying(t *testing.T, l *Lock) {
	t.Helper()
	var err error
	for range 20 {
		if err = l.Unlock(context.Background()); err == nil || errors.Is(err, ErrNotHeld) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// holds returns l's hold count in Redis, read by m's client.
func holds(t *testing.T, m *Mutex, l *Lock) int64 {
	t.Helper()
	rc := m.client.rc
	n, err := rc.Do(context.Background(), rc.B().Hget().Key(m.keyList[0]).Field(l.t.token).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFailedReleaseReportsLossWhenTheLeaseEnds(t *testing.T) {
	c, p, direct := proxied(t)
	const lease = 900 * time.Millisecond
	l := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a", WithWatchdog(lease)))
	work := l.Context()

	// The release script never reaches Redis: the connection breaks first.
	p.Freeze()
	result := make(chan error, 1)
	go func() { result <- l.Unlock(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	p.Cut()
	if err := <-result; err == nil {
		t.Fatal("Unlock over a broken connection succeeded")
	}
	// Renewals are stopped and the lock is still in Redis: when the lease
	// runs out the holder must be told it no longer holds the lock.
	select {
	case <-l.Lost():
	case <-time.After(lease + 3*time.Second):
		t.Fatal("Lost() not closed after the lease of a failed release ran out")
	}
	if cause := context.Cause(work); !errors.Is(cause, ErrLost) {
		t.Errorf("Cause(Context()) = %v, want ErrLost", cause)
	}
	deadline := time.Now().Add(5 * time.Second)
	for lockKeyExists(t, direct) {
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held long after its lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLateGrantIsConfirmedBeforeLockReturns(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	p := testenv.StartProxy(t)
	// Client a learns of grants only by push: its fallback check is far off.
	// b's releases hand the lock on with a 10ms lease.
	a := New(p.Client(t), WithPrefix(prefix), WithFallback(time.Minute, time.Minute))
	t.Cleanup(func() { a.Close() })
	b := New(rc, WithPrefix(prefix), WithHandoffLease(10*time.Millisecond))
	t.Cleanup(func() { b.Close() })

	first := mustLock(t, timeout(t, 5*time.Second), b.Mutex("a"))
	type result struct {
		l   *Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := a.Mutex("a").Lock(timeout(t, 20*time.Second))
		got <- result{l, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for queued(t, rc, first.m) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a's waiter was not queued")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The release hands the lock to a's waiter with a 10ms lease, and the
	// push that tells it so is held up until long after that lease.
	p.FreezeReplies()
	mustUnlock(t, first)
	time.Sleep(100 * time.Millisecond)
	second, err := b.Mutex("a").TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock after the handoff lease ran out: %v", err)
	}
	p.Thaw()

	select {
	case r := <-got:
		t.Fatalf("a's Lock returned (%v) on a stale push while fence %d holds the lock", r.err, second.Fence())
	case <-time.After(500 * time.Millisecond):
	}
	mustUnlock(t, second)
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("a's Lock: %v", r.err)
		}
		if r.l.Fence() <= second.Fence() {
			t.Errorf("fence %d after %d", r.l.Fence(), second.Fence())
		}
		mustUnlock(t, r.l)
	case <-time.After(5 * time.Second):
		t.Fatal("a's Lock did not return after the lock was free again")
	}
}
