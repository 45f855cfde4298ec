package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestUnlockOutlivesAnAbandonedDial has a release wait for a connection
// that another user of the rueidis client is dialling, under a context
// that ends before the dial does. rueidis dials with the context of the
// command that found the connection missing, and fails every command
// waiting for that dial with its error: the release, never sent, failed
// with that context's error. (TestDeletedLockEndsTheTurn once failed so,
// with "operation was canceled": the watchdog's renewal, aborted by the
// Unlock, was dialling.) Unlock must send it again, and succeed.
func TestUnlockOutlivesAnAbandonedDial(t *testing.T) {
	_, prefix := testenv.Redis(t)
	p := testenv.StartProxy(t)
	rc := p.Client(t) // one connection
	c := New(rc, WithPrefix(prefix))
	t.Cleanup(func() { c.Close() })
	l := mustLock(t, timeout(t, 5*time.Second), c.Mutex("a"))

	p.Cut() // the connection must be dialled again,
	time.Sleep(50 * time.Millisecond)
	p.Freeze() // and its greeting waits
	dialled := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		dialled <- rc.Do(ctx, rc.B().Ping().Build()).Error() // dials, under ctx
	}()
	time.Sleep(50 * time.Millisecond)
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(context.Background()) }() // waits for that dial
	if err := <-dialled; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the PING = %v, want its context's error", err)
	}
	p.Thaw()
	if err := <-unlocked; err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	mustUnlock(t, mustLock(t, timeout(t, 5*time.Second), sibling(t, prefix).Mutex("a")))
}
