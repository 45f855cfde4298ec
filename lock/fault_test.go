package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
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

// lockResult is what a Lock call in the background returned.
type lockResult struct {
	l   *Lock
	err error
}

// queuedLock calls m.Lock in a goroutine and returns its outcome's
// channel once the waiter is queued in Redis (seen through rc).
func queuedLock(t *testing.T, rc rueidis.Client, m *Mutex) <-chan lockResult {
	t.Helper()
	got := make(chan lockResult, 1)
	go func() {
		l, err := m.Lock(timeout(t, 20*time.Second))
		got <- lockResult{l, err}
	}()
	waitQueued(t, rc, m)
	return got
}

// waitQueued waits until m's Redis queue has an entry.
func waitQueued(t *testing.T, rc rueidis.Client, m *Mutex) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for queued(t, rc, m) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no waiter was queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantLockAfter asserts that the waiter behind got does not return while
// holder holds the lock, and returns with a later fence once it unlocks.
func wantLockAfter(t *testing.T, got <-chan lockResult, holder *Lock) {
	t.Helper()
	select {
	case r := <-got:
		t.Fatalf("the waiter's Lock returned (fence %d, %v) while fence %d holds the lock", fenceOf(r.l), r.err, holder.Fence())
	case <-time.After(500 * time.Millisecond):
	}
	mustUnlock(t, holder)
	wantLockAbove(t, got, holder.Fence())
}

// wantLockAbove asserts that the waiter behind got, now that the lock is
// free, returns with a fence above fence, and unlocks it.
func wantLockAbove(t *testing.T, got <-chan lockResult, fence int64) {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiter's Lock: %v", r.err)
		}
		if r.l.Fence() <= fence {
			t.Errorf("the waiter got fence %d after %d", r.l.Fence(), fence)
		}
		mustUnlock(t, r.l)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter's Lock did not return after the lock was free again")
	}
}

func fenceOf(l *Lock) int64 {
	if l == nil {
		return 0
	}
	return l.Fence()
}

// lateGrantClients returns a client a behind a proxy that checks for its
// grants every fallback, a direct client b whose releases hand the lock on
// with handoffLease, the proxy, and a direct Redis client.
func lateGrantClients(t *testing.T, fallback, handoffLease time.Duration) (a, b *Client, p *testenv.Proxy, rc rueidis.Client) {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	p = testenv.StartProxy(t)
	a = New(p.Client(t), WithPrefix(prefix), WithFallback(fallback, fallback))
	t.Cleanup(func() { a.Close() })
	b = New(rc, WithPrefix(prefix), WithHandoffLease(handoffLease))
	t.Cleanup(func() { b.Close() })
	return a, b, p, rc
}

// TestLateGrantIsConfirmedBeforeLockReturns: b's release hands the lock to
// a's waiter, but a learns of it only after that handoff lease ran out and
// b took the lock again: by a push (a's checks are far off), or by the
// reply of a check that ran in Redis in time (a checks every 20ms). Lock
// must not return the grant.
func TestLateGrantIsConfirmedBeforeLockReturns(t *testing.T) {
	tests := []struct {
		name                   string
		fallback, handoffLease time.Duration
		heldUp                 time.Duration // how long replies and pushes are held up
	}{
		{"push", time.Minute, 10 * time.Millisecond, 100 * time.Millisecond},
		{"check reply", 20 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, p, rc := lateGrantClients(t, tt.fallback, tt.handoffLease)
			first := mustLock(t, timeout(t, 5*time.Second), b.Mutex("a"))
			got := queuedLock(t, rc, a.Mutex("a"))

			p.FreezeReplies()
			mustUnlock(t, first)
			time.Sleep(tt.heldUp)
			second, err := b.Mutex("a").TryLock(context.Background())
			if err != nil {
				t.Fatalf("TryLock after the handoff lease ran out: %v", err)
			}
			p.Thaw()
			wantLockAfter(t, got, second)
		})
	}
}

// TestStalePushAfterARegrantKeepsFencesInOrder: a waiter's push is held up
// past its lease, another client holds the lock, and Redis grants the lock
// to the same waiter again. When the stale push arrives first, the waiter
// must take the new grant's fence, not the stale one's, which is older
// than the other client's.
func TestStalePushAfterARegrantKeepsFencesInOrder(t *testing.T) {
	a, b, p, rc := lateGrantClients(t, time.Minute, 10*time.Millisecond)
	ctx := context.Background()
	first := mustLock(t, timeout(t, 5*time.Second), b.Mutex("a"))
	m := first.m
	got := queuedLock(t, rc, a.Mutex("a"))
	entry, err := rc.Do(ctx, rc.B().Zrange().Key(m.keyList[1]).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(entry) != 1 {
		t.Fatalf("queue = %v, %v; want a's entry", entry, err)
	}

	p.FreezeReplies()
	mustUnlock(t, first) // grant and push 1 to a, 10ms
	time.Sleep(50 * time.Millisecond)
	second, err := b.Mutex("a").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the handoff lease ran out: %v", err)
	}
	// a's entry comes back, as a's fallback check would put it.
	if err := rc.Do(ctx, rc.B().Zadd().Key(m.keyList[1]).ScoreMember().ScoreMember(1, entry[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, second) // grant and push 2 to a, with a fence above second's
	p.Thaw()
	wantLockAbove(t, got, second.Fence())
}

// TestUnlockWhoseReplyIsLostDropsOneHold: an Unlock of an inner hold runs
// in Redis but its reply is lost. Unlock finds out that it ran, so the
// caller, who would call Unlock again after an error, never drops the
// outer hold with it: the lock stays held until the outer Unlock.
func TestUnlockWhoseReplyIsLostDropsOneHold(t *testing.T) {
	c, p, direct := proxied(t)
	l := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a"))
	if err := l.Reenter(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, l) // the release script is loaded: EVALSHA runs
	if err := l.Reenter(context.Background()); err != nil {
		t.Fatal(err)
	}

	p.FreezeReplies()
	result := make(chan error, 1)
	go func() { result <- l.Unlock(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for holds(t, direct, l) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the release script did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Cut()
	if err := <-result; err != nil {
		t.Fatalf("inner Unlock whose script ran = %v; want nil", err)
	}
	wantNotObtained(t, direct)
	select {
	case <-l.Lost():
		t.Fatal("Lost closed while the outer hold is held")
	default:
	}
	unlockRetrying(t, l)
	if lockKeyExists(t, direct) {
		t.Fatal("the lock is held after the outer Unlock")
	}
}

// TestExtendInFlightDoesNotDelayLoss: Redis stops answering while an
// Extend waits for it. The Extend gives up when the lease can no longer be
// known to last, and the holder is told of the loss by then, for a
// watchdog and a fixed lease alike.
func TestExtendInFlightDoesNotDelayLoss(t *testing.T) {
	const lease = 600 * time.Millisecond
	leases := map[string]MutexOption{"watchdog": WithWatchdog(lease), "fixed lease": WithLease(lease)}
	for name, opt := range leases {
		t.Run(name, func(t *testing.T) {
			c, p, _ := proxied(t)
			l := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a", opt))
			if err := l.Extend(context.Background(), lease); err != nil { // the script is loaded
				t.Fatal(err)
			}
			p.Freeze()
			defer p.Thaw()
			extended := make(chan error, 1)
			go func() { extended <- l.Extend(timeout(t, 100*time.Millisecond), lease) }()
			select {
			case <-l.Lost():
			case <-time.After(lease + time.Second):
				t.Fatal("Lost not closed a second after the lease ran out, with an Extend in flight")
			}
			select {
			case err := <-extended:
				if err == nil {
					t.Error("Extend succeeded while Redis did not answer")
				}
			case <-time.After(time.Second):
				t.Fatal("Extend still waits for Redis after the loss")
			}
		})
	}
}

// TestLastUnlockWhoseReplyIsLostReleases: the last hold's release runs in
// Redis but its reply is lost. While the lease is known to last, Unlock
// finds out that it ran and reports a normal release, not an error that
// would end in a loss.
func TestLastUnlockWhoseReplyIsLostReleases(t *testing.T) {
	c, p, direct := proxied(t)
	l := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a"))
	mustUnlock(t, mustLock(t, timeout(t, 5*time.Second), c.Mutex("b"))) // the release script is loaded
	work := l.Context()
	p.FreezeReplies()
	result := make(chan error, 1)
	go func() { result <- l.Unlock(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for lockKeyExists(t, direct) {
		if time.Now().After(deadline) {
			t.Fatal("the release did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Cut()
	if err := <-result; err != nil {
		t.Fatalf("Unlock whose release ran = %v; want nil", err)
	}
	if cause := context.Cause(work); cause != context.Canceled {
		t.Errorf("Cause(Context()) = %v; want context.Canceled (released)", cause)
	}
	select {
	case <-l.Lost():
		t.Error("Lost closed for a lock released normally")
	default:
	}
}

// TestExtendAppliedLateDoesNotKeepTheLock: an Extend runs in Redis but its
// reply is held up until after the lease it was sent under. The holder is
// told of the loss when that lease ends, and the lock, extended in Redis
// for a lease nobody will use, is given up there too.
func TestExtendAppliedLateDoesNotKeepTheLock(t *testing.T) {
	const lease = 600 * time.Millisecond
	leases := map[string]MutexOption{"watchdog": WithWatchdog(lease), "fixed lease": WithLease(lease)}
	for name, opt := range leases {
		t.Run(name, func(t *testing.T) {
			c, p, direct := proxied(t)
			l := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a", opt))
			if err := l.Extend(context.Background(), lease); err != nil { // the script is loaded
				t.Fatal(err)
			}
			p.FreezeReplies()
			extended := make(chan error, 1)
			go func() { extended <- l.Extend(context.Background(), 20*time.Second) }()
			select {
			case <-l.Lost():
			case <-time.After(lease + 2*time.Second):
				t.Fatal("Lost not closed after the lease")
			}
			if err := <-extended; err == nil {
				t.Error("Extend whose reply never came succeeded")
			}
			p.Thaw()
			deadline := time.Now().Add(3 * time.Second)
			for lockKeyExists(t, direct) {
				if time.Now().After(deadline) {
					t.Fatal("the lock declared lost is still held in Redis, for the late Extend's 20s")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
