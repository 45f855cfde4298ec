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
