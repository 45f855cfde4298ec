package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// acquisition is what a test goroutine saw of one hold.
type acquisition struct {
	client int
	fence  int64
	local  bool // handed over within its Client's turn
	turn   *turn
}

// TestFencesIncreaseAcrossLocalHandoffsTurnsAndClients has the goroutines
// of two Clients take one lock in a loop, and checks, in the order the
// lock was held, that fences strictly increase: from one local handoff to
// the next, and from one turn (and Client) to the next.
func TestFencesIncreaseAcrossLocalHandoffsTurnsAndClients(t *testing.T) {
	c, _, prefix := newTestClient(t)
	clients := []*Client{c, sibling(t, prefix)}
	ctx := timeout(t, 30*time.Second)
	var (
		mu      sync.Mutex
		seq     []acquisition
		holders atomic.Int32
		wg      sync.WaitGroup
	)
	for i := range 2 * 6 {
		m := clients[i%2].Mutex("a")
		wg.Go(func() {
			for range 25 {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				mu.Lock()
				seq = append(seq, acquisition{client: i % 2, fence: l.Fence(), local: handedLocally(l), turn: l.t})
				mu.Unlock()
				holders.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var local, switches int
	for i, a := range seq {
		if a.local {
			local++
		}
		if i == 0 {
			continue
		}
		if a.fence <= seq[i-1].fence {
			t.Fatalf("acquisition %d: fence %d after %d (local %v, client %d after %d)",
				i, a.fence, seq[i-1].fence, a.local, a.client, seq[i-1].client)
		}
		if a.local && a.turn != seq[i-1].turn {
			t.Fatalf("acquisition %d was handed over locally, but not within the turn before it", i)
		}
		if a.client != seq[i-1].client {
			switches++
		}
	}
	if local == 0 || switches == 0 {
		t.Fatalf("%d acquisitions: %d handed over locally, %d between Clients; want both", len(seq), local, switches)
	}
}

// TestTurnReservesMoreFences makes a turn cover more waiters than the
// block its grant reserved: the waiter was queued in Redis alone, and its
// line grew while it waited. The first local handoff reserves the rest in
// the script that confirms the turn's lease; the fences stay increasing
// and the block is used up exactly.
func TestTurnReservesMoreFences(t *testing.T) {
	// A turn long enough that only its block could end it early.
	c, rc, prefix := newTestClient(t, WithTurnDuration(time.Minute))
	other := sibling(t, prefix)
	ctx := timeout(t, 10*time.Second)
	m := c.Mutex("a")
	blocker := mustLock(t, ctx, other.Mutex("a"))

	const followers = 4
	got := make(chan *Lock, followers+1)
	var wg sync.WaitGroup
	lockInto := func() {
		defer wg.Done()
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		got <- l // while holding: the channel's order is the holds'
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go lockInto() // the representative, queued in Redis with a block of 1
	for queued(t, rc, m) == 0 {
		time.Sleep(time.Millisecond)
	}
	for range followers {
		wg.Add(1)
		go lockInto()
	}
	for c.queuedLocally(m) < followers+1 {
		time.Sleep(time.Millisecond)
	}
	mustUnlock(t, blocker)
	wg.Wait()
	close(got)

	var ls []*Lock
	for l := range got {
		ls = append(ls, l)
	}
	first := ls[0]
	if handedLocally(first) || first.Fence() <= blocker.Fence() {
		t.Fatalf("first holder: local %v, fence %d after the blocker's %d", handedLocally(first), first.Fence(), blocker.Fence())
	}
	for i, l := range ls[1:] {
		if !handedLocally(l) || l.t != first.t {
			t.Fatalf("follower %d was not handed over within the first turn", i)
		}
	}
	fences := make([]int64, len(ls))
	for i, l := range ls {
		fences[i] = l.Fence()
	}
	if !slices.IsSorted(fences) || len(slices.Compact(slices.Clone(fences))) != len(fences) {
		t.Fatalf("fences %v, want strictly increasing", fences)
	}
	last, err := rc.Do(ctx, rc.B().Get().Key(m.keyList[2]).Build()).AsInt64()
	if err != nil || last != fences[len(fences)-1] {
		t.Fatalf("last fence issued %d, %v; the last holder's is %d", last, err, fences[len(fences)-1])
	}
}

// lockInBackground starts m.Lock in a goroutine and returns a channel that
// gets its Lock (or nil after reporting an error).
func lockInBackground(t *testing.T, ctx context.Context, m *Mutex) <-chan *Lock {
	t.Helper()
	ch := make(chan *Lock, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	return ch
}

// turnWithWaiter returns a holder of m whose turn covers a waiter behind
// it in its line, and the channel the waiter's Lock will come on.
func turnWithWaiter(t *testing.T, ctx context.Context, c *Client, m *Mutex) (*Lock, <-chan *Lock) {
	t.Helper()
	blocker := mustLock(t, ctx, m)
	holder := lockInBackground(t, ctx, m)
	for c.queuedLocally(m) < 1 {
		time.Sleep(time.Millisecond)
	}
	waiter := lockInBackground(t, ctx, m)
	for c.queuedLocally(m) < 2 {
		time.Sleep(time.Millisecond)
	}
	mustUnlock(t, blocker) // grants the holder a turn that covers the waiter
	h := <-holder
	if h == nil {
		t.FailNow()
	}
	c.mu.Lock()
	left := h.t.left
	c.mu.Unlock()
	if left != 1 {
		t.Fatalf("the holder's turn covers %d waiters, want 1", left)
	}
	return h, waiter
}

// wantLostTurnGoesThroughRedis is the end of the lost-turn tests: holder
// has lost the lock, waiter waits behind it in the same Client, and other
// has taken the lock in Redis. The holder's Unlock must fail without
// handing the lock on; the waiter must get it only from Redis, after
// other's release.
func wantLostTurnGoesThroughRedis(t *testing.T, holder *Lock, waiter <-chan *Lock, other *Lock) {
	t.Helper()
	select {
	case <-holder.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() not closed")
	}
	if cause := context.Cause(holder.Context()); !errors.Is(cause, ErrLost) {
		t.Fatalf("Cause(Context()) = %v, want ErrLost", cause)
	}
	if err := holder.Unlock(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unlock of the lost holder = %v, want ErrNotHeld", err)
	}
	// Give a wrong local handoff time to show.
	select {
	case l := <-waiter:
		t.Fatalf("the waiter got the lock (fence %d, local %v) while another Client holds it", l.Fence(), handedLocally(l))
	case <-time.After(100 * time.Millisecond):
	}
	mustUnlock(t, other)
	l := <-waiter
	if l == nil {
		t.FailNow()
	}
	if handedLocally(l) || l.Fence() <= other.Fence() || other.Fence() <= holder.Fence() {
		t.Fatalf("waiter: local %v, fence %d; other %d; lost holder %d", handedLocally(l), l.Fence(), other.Fence(), holder.Fence())
	}
	mustUnlock(t, l)
}

// TestDeletedLockEndsTheTurn deletes the lock key under a holder with a
// local waiter; another Client takes the lock. Once its renewal has found
// the loss, the holder must not hand the lock to its waiter. The watchdog
// is paused until the other Client holds the lock: a renewal that found
// the loss before would let the waiter take the free lock first.
func TestDeletedLockEndsTheTurn(t *testing.T) {
	c, rc, prefix := newTestClient(t, WithTurnDuration(time.Minute))
	ctx := timeout(t, 20*time.Second)
	m := c.Mutex("a", WithWatchdog(300*time.Millisecond))
	otherMutex := sibling(t, prefix).Mutex("a")
	holder, waiter := turnWithWaiter(t, ctx, c, m)
	resume := pauseWatchdog(holder)
	if err := rc.Do(ctx, rc.B().Del().Key(m.keyList[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	other, err := otherMutex.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the key was deleted: %v", err)
	}
	resume(true)
	wantLostTurnGoesThroughRedis(t, holder, waiter, other)
}

// pauseWatchdog stops the renewals of l's turn, as a process paused by GC
// or the scheduler would, until resume; resume(true) makes the next
// renewal due at once.
func pauseWatchdog(l *Lock) (resume func(renewNow bool)) {
	c := l.m.client
	l.t.renewMu.lock() // a renewal cannot start while renewMu is held
	c.mu.Lock()
	l.t.timer.Stop()
	c.mu.Unlock()
	return func(renewNow bool) {
		l.t.renewMu.unlock()
		if renewNow {
			c.mu.Lock()
			l.t.timer.Reset(0)
			c.mu.Unlock()
		}
	}
}

// TestPausedHolderDoesNotHandOnLocally pauses a holder's watchdog until
// its lease is gone and another Client holds the lock. Its Unlock, with a
// waiter in line, must find out in Redis and hand nothing on.
func TestPausedHolderDoesNotHandOnLocally(t *testing.T) {
	// A turn long enough that only the lease can stop the local handoff.
	c, _, prefix := newTestClient(t, WithTurnDuration(time.Minute))
	ctx := timeout(t, 20*time.Second)
	m := c.Mutex("a", WithWatchdog(300*time.Millisecond))
	holder, waiter := turnWithWaiter(t, ctx, c, m)
	resume := pauseWatchdog(holder)
	other := mustLock(t, ctx, sibling(t, prefix).Mutex("a")) // once the lease ran out
	resume(false)

	if err := holder.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unlock of the paused holder = %v, want ErrNotHeld", err)
	}
	wantLostTurnGoesThroughRedis(t, holder, waiter, other)
}

// TestTurnDurationLetsOtherClientsIn has a Client with a long line of
// waiters, each holding the lock for a while, and a waiter of another
// Client that queues once the first Client's turn has begun. The turn
// covers the whole line, but its time bound ends it after a few holds.
func TestTurnDurationLetsOtherClientsIn(t *testing.T) {
	c, rc, prefix := newTestClient(t, WithTurnDuration(5*time.Millisecond))
	other := sibling(t, prefix)
	ctx := timeout(t, 30*time.Second)
	m := c.Mutex("a")
	const n = 20
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	held := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(order)
	}
	hold := func(m *Mutex, who string) {
		defer wg.Done()
		l, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, who)
		mu.Unlock()
		time.Sleep(3 * time.Millisecond)
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
	first := mustLock(t, ctx, m)
	for range n {
		wg.Add(1)
		go hold(m, "mine")
	}
	for c.queuedLocally(m) < n {
		time.Sleep(time.Millisecond)
	}
	mustUnlock(t, first) // the next turn covers all n
	for held() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	wg.Add(1)
	go hold(other.Mutex("a"), "other")
	for queued(t, rc, m) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	queuedAt := held()
	wg.Wait()
	// Once the other Client's waiter is queued, the turn running ends by
	// its bound: 5ms fits at most two holds of 3ms. Without the bound it
	// would serve the rest of the line first.
	if i := slices.Index(order, "other"); i < 0 || i-queuedAt > 3 {
		t.Fatalf("the other Client's waiter, queued after %d holds, came in at position %d of %d: %v", queuedAt, i, len(order), order)
	}
}

// TestReentryDuringTurn re-enters a lock that was handed over within a
// turn: the holds count under the turn's token in Redis, the handoff waits
// for the last of them, and the old handle cannot touch the new holder's
// lock.
func TestReentryDuringTurn(t *testing.T) {
	c, rc, prefix := newTestClient(t, WithTurnDuration(time.Minute))
	ctx := timeout(t, 10*time.Second)
	m := c.Mutex("a")
	holds := func(l *Lock) int64 {
		t.Helper()
		n, err := rc.Do(ctx, rc.B().Hget().Key(m.keyList[0]).Field(l.t.token).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first, b := turnWithWaiter(t, ctx, c, m)
	if err := first.Reenter(ctx); err != nil {
		t.Fatal(err)
	}
	if again, err := m.Lock(first.Context()); err != nil || again != first {
		t.Fatalf("Lock(first.Context()) = %p, %v; want %p", again, err, first)
	}
	if n := holds(first); n != 3 {
		t.Fatalf("holds in Redis = %d, want 3", n)
	}
	mustUnlock(t, first)
	mustUnlock(t, first)
	select {
	case <-b:
		t.Fatal("the lock was handed on before the last re-entered hold was released")
	case <-time.After(50 * time.Millisecond):
	}
	mustUnlock(t, first)
	second := <-b
	if !handedLocally(second) || second.t != first.t || second.Fence() <= first.Fence() {
		t.Fatalf("second holder: local %v, same turn %v, fence %d after %d",
			handedLocally(second), second.t == first.t, second.Fence(), first.Fence())
	}
	if err := second.Reenter(ctx); err != nil {
		t.Fatal(err)
	}
	if n := holds(second); n != 2 {
		t.Fatalf("holds in Redis after the handoff and a re-entry = %d, want 2", n)
	}
	// The stale handle can do nothing to the new holder's lock.
	if err := first.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unlock of the handed-on handle = %v, want ErrNotHeld", err)
	}
	if err := first.Extend(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Extend of the handed-on handle = %v, want ErrNotHeld", err)
	}
	if err := first.Reenter(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Reenter of the handed-on handle = %v, want ErrNotHeld", err)
	}
	if n := holds(second); n != 2 {
		t.Fatalf("holds in Redis after the stale handle's calls = %d, want 2", n)
	}
	wantNotObtained(t, sibling(t, prefix).Mutex("a"))
	mustUnlock(t, second)
	mustUnlock(t, second)
	l, err := sibling(t, prefix).Mutex("a").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the last Unlock: %v", err)
	}
	mustUnlock(t, l)
}

// TestFixedLeaseWaiterIsGrantedByRedis has a turn cover a waiter whose
// mutex has a fixed lease: its lease must start in Redis with its
// acquisition, so it is granted by Redis, not handed over in the turn.
func TestFixedLeaseWaiterIsGrantedByRedis(t *testing.T) {
	c, rc, _ := newTestClient(t, WithTurnDuration(time.Minute))
	ctx := timeout(t, 10*time.Second)
	m := c.Mutex("a")
	blocker := mustLock(t, ctx, m)
	first := lockInBackground(t, ctx, m)
	for c.queuedLocally(m) < 1 {
		time.Sleep(time.Millisecond)
	}
	fixed := lockInBackground(t, ctx, c.Mutex("a", WithLease(time.Minute)))
	for c.queuedLocally(m) < 2 {
		time.Sleep(time.Millisecond)
	}
	mustUnlock(t, blocker)
	l := <-first
	mustUnlock(t, l)
	f := <-fixed
	if handedLocally(f) || f.Fence() <= l.Fence() {
		t.Fatalf("fixed-lease waiter: local %v, fence %d after %d", handedLocally(f), f.Fence(), l.Fence())
	}
	pttl, err := rc.Do(ctx, rc.B().Pttl().Key(m.keyList[0]).Build()).AsInt64()
	if err != nil || pttl <= int64(10*time.Second/time.Millisecond) {
		t.Fatalf("PTTL = %dms, %v; want the fixed lease of a minute", pttl, err)
	}
	mustUnlock(t, f)
}

// TestDirectGrantClearsTheWaitersQueueEntry: a release that hands the lock
// straight to its client's next waiter also removes the entry that waiter
// may have queued in Redis meanwhile; left there, it would later be
// granted to a token nobody waits for, holding everyone up for a lease.
func TestDirectGrantClearsTheWaitersQueueEntry(t *testing.T) {
	c, rc, _ := newTestClient(t)
	m := c.Mutex("a")
	ctx := context.Background()
	holder, next := c.newToken(), c.newToken()
	if _, ok, err := m.runQueue(ctx, acquireScript, holder, false, 1); err != nil || !ok {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	// next's check runs before the release: the lock is held, so it queues.
	if _, ok, err := m.runQueue(ctx, checkScript, next, true, 2); err != nil || ok {
		t.Fatalf("check: %v, %v", ok, err)
	}
	// The release keeps the turn: it grants next directly.
	args := []string{holder, m.settingsArg, next, m.leaseArg, "2", "1"}
	if err := releaseScript.Exec(ctx, rc, m.keys(), args).Error(); err != nil {
		t.Fatal(err)
	}
	if q := queued(t, rc, m); q != 0 {
		t.Fatalf("next holds the lock, and %d entries are still queued", q)
	}
	if n, err := releaseScript.Exec(ctx, rc, m.keys(), []string{next, m.settingsArg}).AsInt64(); err != nil || n != 0 {
		t.Fatalf("next's release = %d, %v; want 0", n, err)
	}
	if lockKeyExists(t, m) {
		t.Fatal("the lock is held after its last holder released it")
	}
}

// TestReleasesThroughRedisRacingChecksLeaveNothingBehind: goroutines of one
// client with a fixed lease (which a turn cannot hand on locally) pass the
// lock through Redis, keeping the turn, while their fallback checks fire
// every millisecond. Once all have unlocked, neither a hold nor a queue
// entry may be left in Redis.
func TestReleasesThroughRedisRacingChecksLeaveNothingBehind(t *testing.T) {
	c, rc, prefix := newTestClient(t, WithFallback(time.Millisecond, time.Millisecond), WithTurnDuration(time.Second))
	other := sibling(t, prefix)
	for round := range 150 {
		name := fmt.Sprintf("r%d", round)
		first := mustLock(t, timeout(t, 5*time.Second), other.Mutex(name))
		m := c.Mutex(name, WithLease(5*time.Second))
		done := make(chan error, 4)
		for range 4 {
			go func() {
				l, err := m.Lock(timeout(t, 20*time.Second))
				if err == nil {
					time.Sleep(200 * time.Microsecond)
					err = l.Unlock(context.Background())
				}
				done <- err
			}()
		}
		time.Sleep(5 * time.Millisecond)
		mustUnlock(t, first)
		for range 4 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if q, held := queued(t, rc, m), lockKeyExists(t, m); q != 0 || held {
			t.Fatalf("round %d: all unlocked, yet %d queue entries and lock held %v", round, q, held)
		}
	}
}
