package lock

import (
	"context"
	"testing"
	"time"
)

// TestSharedWaitersWakeAfterSubscriberIsKilled kills the waiting Client's
// subscription right before the hold is granted to its waiters, so the
// pushes are lost; with the fallback check a minute away, the resubscribe
// must wake them. See TestWaitersWakeAfterSubscriberIsKilled.
func TestSharedWaitersWakeAfterSubscriberIsKilled(t *testing.T) {
	for _, kind := range []string{"rwmutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			c, rc, prefix := newTestClient(t, WithFallback(time.Minute, time.Minute))
			holder := sibling(t, prefix)
			ctx := context.Background()
			id := waitSubscribed(t, rc, c)
			for round := range 3 {
				var release func(context.Context) error
				var s *sharedLock
				got := make(chan error, 4)
				if kind == "rwmutex" {
					w := mustRWLock(t, holder.RWMutex("a").Lock, timeout(t, 5*time.Second))
					release, s = w.Unlock, &c.RWMutex("a").s
				} else {
					p := mustAcquire(t, holder.Semaphore("a", 1).Acquire, timeout(t, 5*time.Second))
					release, s = p.Release, &c.Semaphore("a", 1).s
				}
				for range 3 { // readers are all let in together; permits one by one
					go func() {
						h, err := s.acquire(timeout(t, 5*time.Second), sharedHold, true)
						if err == nil {
							time.Sleep(time.Millisecond)
							err = h.release(ctx)
						}
						got <- err
					}()
				}
				waitSharedQueued(t, rc, s, 3)
				if err := rc.Do(ctx, rc.B().ClientKill().Id(mustAtoi(t, id)).Build()).Error(); err != nil {
					t.Fatalf("round %d: CLIENT KILL ID %s: %v", round, id, err)
				}
				if err := release(ctx); err != nil { // pushes while nobody listens
					t.Fatal(err)
				}
				for range 3 {
					if err := <-got; err != nil {
						t.Fatalf("round %d: waiter after its subscription was killed: %v", round, err)
					}
				}
				newID := waitSubscribed(t, rc, c)
				if newID == id {
					t.Fatalf("round %d: subscriber %s was not replaced", round, id)
				}
				id = newID
			}
		})
	}
}
