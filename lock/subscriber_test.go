package lock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// subscriberIDs returns the Redis client ids of c's subscriber connections
// (named lock:sub:<client id>) and their types.
func subscriberIDs(t *testing.T, rc rueidis.Client, c *Client) map[string]string {
	t.Helper()
	list, err := rc.Do(context.Background(), rc.B().ClientList().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, line := range strings.Split(list, "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["name"] == "lock:sub:"+c.id {
			typ := "normal"
			if strings.Contains(f["flags"], "P") {
				typ = "pubsub"
			}
			ids[f["id"]] = typ
		}
	}
	return ids
}

// waitSubscribed waits until c has exactly one subscriber connection, and
// it is in pub/sub mode (it is named just before it subscribes).
func waitSubscribed(t *testing.T, rc rueidis.Client, c *Client) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ids := subscriberIDs(t, rc, c); len(ids) == 1 {
			for id, typ := range ids {
				if typ == "pubsub" {
					return id
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("client has no subscriber connection: %v", subscriberIDs(t, rc, c))
	return ""
}

// TestWaitersWakeAfterSubscriberIsKilled kills the waiting client's
// subscription right before the lock is handed to it, so the push is lost.
// The fallback re-check is set far beyond the test's deadline: the waiter
// must be woken by the resubscribe, which makes every waiter check at once.
//
// The test kills the subscriber by id rather than with CLIENT KILL TYPE
// pubsub, which would also disconnect the subscribers of other tests sharing
// the server; for this client it is the same thing, since the subscription
// is its only pubsub connection (checked below).
func TestWaitersWakeAfterSubscriberIsKilled(t *testing.T) {
	c, rc, prefix := newTestClient(t, WithFallback(time.Minute, time.Minute))
	holder := sibling(t, prefix)
	ctx := context.Background()
	oldID := waitSubscribed(t, rc, c)

	for round := range 3 {
		l := mustLock(t, timeout(t, 5*time.Second), holder.Mutex("a"))
		m := c.Mutex("a")
		got := make(chan error, 1)
		go func() {
			w, err := m.Lock(timeout(t, 5*time.Second))
			if err == nil {
				err = w.Unlock(ctx)
			}
			got <- err
		}()
		for queued(t, rc, m) == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := rc.Do(ctx, rc.B().ClientKill().Id(mustAtoi(t, oldID)).Build()).Error(); err != nil {
			t.Fatalf("round %d: CLIENT KILL ID %s: %v", round, oldID, err)
		}
		mustUnlock(t, l) // publishes the grant while nobody listens
		if err := <-got; err != nil {
			t.Fatalf("round %d: waiter after its subscription was killed: %v", round, err)
		}
		newID := waitSubscribed(t, rc, c)
		if newID == oldID {
			t.Fatalf("round %d: subscriber %s was not replaced", round, newID)
		}
		oldID = newID
	}

	// Pushes work again on the new subscription: with the fallback a minute
	// away, only a push (or a resync, which has no reason to happen) can wake
	// this waiter before its deadline.
	l := mustLock(t, timeout(t, 5*time.Second), holder.Mutex("a"))
	got := make(chan error, 1)
	go func() {
		w, err := c.Mutex("a").Lock(timeout(t, 5*time.Second))
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	for queued(t, rc, c.Mutex("a")) == 0 {
		time.Sleep(time.Millisecond)
	}
	mustUnlock(t, l)
	if err := <-got; err != nil {
		t.Fatalf("waiter on the new subscription: %v", err)
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("not a client id: %q", s)
		}
		n = n*10 + int64(r-'0')
	}
	return n
}
