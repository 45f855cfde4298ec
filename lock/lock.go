package lock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Lock is one acquisition of a Mutex: the handle its holder releases,
// extends and re-enters it through. It is safe for concurrent use.
type Lock struct {
	m      *Mutex
	t      *turn // the turn this acquisition is part of
	token  string
	fence  int64
	values context.Context // the acquiring context; Context keeps its values
	outer  *Lock           // a Lock the acquiring context carried

	opMu sync.Mutex // serialises Unlock, Reenter and Extend

	mu     sync.Mutex // taken after m.client.mu, never before it
	state  state
	holds  int64
	unsure bool          // a Reenter or Unlock failed in flight: Redis has the true count
	lost   chan struct{} // made on demand by Lost
	ctx    context.Context
	cancel context.CancelCauseFunc
}

type state uint8

const (
	held state = iota
	released
	lost
)

type ctxKey struct{}

// Name returns the name of the lock.
func (l *Lock) Name() string { return l.m.name }

// Token returns the random owner token of this acquisition:
// "<client id>:<random>". Each acquisition has its own, re-entries share
// it.
func (l *Lock) Token() string { return l.token }

// Fence returns the fencing token of this acquisition. Tokens of one lock
// name strictly increase in the order the lock is held, also after the
// fence retention (WithFenceRetention), unless the Redis clock goes back;
// they are not consecutive, and re-entries share their acquisition's. A
// resource that refuses tokens below the highest it has accepted refuses
// a holder whose lease ran out (see the example).
func (l *Lock) Fence() int64 { return l.fence }

// Lost returns a channel closed when the lock is lost while held: a renewal
// found it gone or taken, renewals failed until the lease ran out, a fixed
// lease (WithLease) ran out, a last Unlock could not reach Redis and the
// lease then ran out, or Unlock, Extend or Reenter found it not held.
// A normal Unlock does not close it; Context covers both ends.
func (l *Lock) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
		if l.state == lost { // lost before anyone asked: finishLocked did not close it
			close(l.lost)
		}
	}
	return l.lost
}

// Context returns a context that is cancelled when the lock is released by
// its last Unlock (cause context.Canceled) or lost (cause ErrLost, see
// context.Cause). It carries the values of the context the lock was
// obtained with, and the handle itself: Mutex.Lock and TryLock on the same
// Client and name with this context (or one derived from it) re-enter the
// lock instead of deadlocking on it.
func (l *Lock) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.WithValue(context.WithoutCancel(l.values), ctxKey{}, l))
		switch l.state {
		case lost:
			l.cancel(ErrLost)
		case released:
			l.cancel(nil)
		}
	}
	return l.ctx
}

// Reenter adds a hold to the lock: each Reenter (and each re-entering
// Mutex.Lock) needs its own Unlock, and only the last Unlock releases.
// Re-entering does not change the lease.
func (l *Lock) Reenter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.opMu.Lock()
	defer l.opMu.Unlock()
	if !l.isHeld() {
		return ErrNotHeld
	}
	l.mu.Lock()
	before, unsure := l.holds, l.unsure
	l.mu.Unlock()
	sctx, cancel := l.m.client.sendContext(ctx)
	n, err := execScript(sctx, reenterScript, l.m.client, l.m.keyList[:1], []string{l.t.token}).AsInt64()
	cancel()
	if err != nil && !unsure {
		n, err = l.recount(ctx, before+1, err)
	}
	c := l.m.client
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		l.mu.Lock()
		l.unsure = true // it may have run, or run yet
		l.mu.Unlock()
		return l.m.fail(ctx, "reenter", err)
	case n == 0:
		if l.t.holder == l {
			c.loseLocked(l.t)
		}
		return ErrNotHeld
	}
	l.mu.Lock()
	l.holds = n
	l.mu.Unlock()
	return nil
}

// recount finds out whether a Reenter or an Unlock whose reply was lost
// (err) ran, by reading the turn's hold count in Redis: it returns the
// count if it is want (the script ran), 0 if the lock is gone, or err if
// it cannot tell. So a caller who does not Unlock for a failed
// Reenter does not leave a hold behind that nobody releases, and one who
// retries a failed Unlock, as it should, does not drop two holds. An
// unchanged count proves nothing: the script may still be on its way on
// another connection. It asks for at most 2s, and not past replyGrace after
// ctx ends.
func (l *Lock) recount(ctx context.Context, want int64, err error) (int64, error) {
	rctx, cancel := sendBefore(ctx, time.Now().Add(2*time.Second))
	defer cancel()
	c := l.m.client
	var v int64
	var rerr error
	for try := 0; try < 3; try++ { // the connection that lost the reply is being replaced
		v, rerr = do(rctx, c, c.rc.B().Hget().Key(l.m.keyList[0]).Field(l.t.token).Build()).AsInt64()
		if rerr == nil || rueidis.IsRedisNil(rerr) || rctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case rueidis.IsRedisNil(rerr):
		return 0, nil
	case rerr == nil && v == want:
		return v, nil
	}
	return 0, err
}

// Extend sets the lock's remaining lease to d; with a watchdog, later
// renewals use d too, until the lock is handed on. It returns ErrNotHeld
// if the lock expired or is someone else's. It waits for Redis while the
// current lease is known to last (at least a third of the lease) and ctx
// lasts (see the package doc, Contexts); if Redis does not answer by then
// it returns an error, and Lost is closed once the lease is over unless a
// watchdog renewal gets through first.
func (l *Lock) Extend(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.opMu.Lock()
	defer l.opMu.Unlock()
	t := l.t
	if err := t.renewMu.lockCtx(ctx); err != nil {
		return err // a renewal in flight held it past ctx's end
	}
	defer t.renewMu.unlock()
	if !l.isHeld() {
		return ErrNotHeld
	}
	c := l.m.client
	c.mu.Lock()
	sent := time.Now()
	deadline := t.callDeadlineLocked(sent)
	c.mu.Unlock()
	sctx, cancel := sendBefore(ctx, deadline)
	defer cancel()
	n, err := execScript(sctx, extendScript, c, l.m.keyList[:1], []string{t.token, ms(d)}).AsInt64()
	if err != nil {
		return l.m.fail(ctx, "extend", err)
	}
	if n == 1 && l.m.cfg.replicas > 0 {
		if err := l.m.replicate(sctx); err != nil {
			return err // the lease known to last stays the one acknowledged before
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.holder != l {
		return ErrNotHeld
	}
	if n == 0 {
		c.loseLocked(t)
		return ErrNotHeld
	}
	t.lease, t.ttl, t.leaseEnd = d, d, sent.Add(d)
	if !l.m.cfg.watchdog {
		t.fixedEnd = t.leaseEnd
	}
	if t.stopping {
		t.expireLocked() // after a failed final release: the new end
	} else {
		t.scheduleLocked()
	}
	return nil
}

// leaseLasts reports whether t's lease is known to last now.
func (c *Client) leaseLasts(t *turn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Before(t.leaseEnd)
}

func (l *Lock) isHeld() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == held
}

// finishLocked moves a held handle to its final state and tells the
// holder. Called with l.mu held; the turn and the line are the caller's
// business (see Client.endLocked).
func (l *Lock) finishLocked(s state) {
	if l.state != held {
		return
	}
	l.state = s
	if s == lost {
		l.m.client.stats.lost.Add(1)
	}
	// Context first: a holder woken by Lost finds it cancelled already.
	if l.cancel != nil {
		if s == lost {
			l.cancel(ErrLost)
		} else {
			l.cancel(nil)
		}
	}
	if s == lost && l.lost != nil {
		close(l.lost)
	}
}
