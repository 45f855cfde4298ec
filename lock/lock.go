package lock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Lock is one acquisition of a Mutex: the handle its holder releases,
// extends and re-enters it through. It is safe for concurrent use.
type Lock struct {
	m      *Mutex
	token  string
	fence  int64
	values context.Context // the acquiring context; Context keeps its values
	outer  *Lock           // a Lock the acquiring context carried

	opMu    sync.Mutex // serialises Unlock, Reenter and Extend
	renewMu sync.Mutex // held while a renewal or Extend talks to Redis

	mu         sync.Mutex
	state      state
	holds      int64
	lease      time.Duration      // what a watchdog renewal sets
	leaseEnd   time.Time          // WithLease: when the lease is meant to end
	validUntil time.Time          // the lease in Redis lasts until about then (see newLock)
	timer      *time.Timer        // next renewal, or the expiry of a fixed lease
	stopping   bool               // the last Unlock has stopped renewals
	abortRenew context.CancelFunc // cancels the renewal in flight
	lost       chan struct{}      // made on demand by Lost
	ctx        context.Context    // made on demand by Context
	cancel     context.CancelCauseFunc
}

type state uint8

const (
	held state = iota
	released
	lost
)

type ctxKey struct{}

// closedChan is what Lost returns for a lock lost before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// newLock returns the handle of a grant and starts its renewal or expiry
// timer. The lease is counted from start: for a grant from a script this
// call made, the moment it was sent, before Redis set the lease; for a
// pushed grant, the moment the push arrived, one network hop after. (A
// process paused before reading its push thus believes in a lease that is
// partly gone; its first renewal, a third of the way through, finds out.)
func (m *Mutex) newLock(ctx context.Context, token string, g grant, start time.Time) *Lock {
	l := &Lock{
		m:          m,
		token:      token,
		fence:      g.fence,
		values:     ctx,
		holds:      1,
		lease:      m.cfg.lease,
		validUntil: start.Add(g.ttl),
	}
	l.outer, _ = ctx.Value(ctxKey{}).(*Lock)
	if !m.cfg.watchdog {
		l.leaseEnd = start.Add(m.cfg.lease)
	}
	l.mu.Lock()
	l.scheduleLocked(g.ttl)
	l.mu.Unlock()
	return l
}

// Name returns the name of the lock.
func (l *Lock) Name() string { return l.m.name }

// Token returns the random owner token of this acquisition, as stored in
// Redis: "<client id>:<random>".
func (l *Lock) Token() string { return l.token }

// Fence returns the fencing token of this acquisition. Tokens of one lock
// name strictly increase from one acquisition to the next (re-entries share
// their acquisition's token), so a resource that remembers the highest
// token it has accepted can refuse a holder whose lease ran out while it
// was paused, and whose lock is now someone else's:
//
//	UPDATE t SET v = ?, fence = ? WHERE id = ? AND fence < ?
//
// run with (v, l.Fence(), id, l.Fence()) changes no row for such a stale
// holder.
//
// Redis issues the token in the acquiring script: the last token + 1
// (INCR), or, if Redis has no record of the last one (first use, or the
// fence retention passed since it was seeded), Redis TIME in µs. As no lock
// is taken a million times a second, a new seed is above every token issued
// since the previous one, so tokens never go backwards unless the Redis
// clock does. Per lock name Redis keeps one small key,
// for at most the retention.
func (l *Lock) Fence() int64 { return l.fence }

// Lost returns a channel closed when the lock is lost while held: a renewal
// found it gone or taken, renewals failed until the lease ran out, a fixed
// lease (WithLease) ran out, or Unlock, Extend or Reenter found it not held.
// A normal Unlock does not close it; Context covers both ends.
func (l *Lock) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		if l.state == lost {
			return closedChan
		}
		l.lost = make(chan struct{})
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
// Mutex.Lock) needs its own Unlock, and only the last Unlock releases. The
// count lives in Redis, in the lock's hash under this acquisition's token.
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
	n, err := reenterScript.Exec(detach(ctx), l.m.client.rc, l.m.keyList[:1], []string{l.token}).AsInt64()
	if err != nil {
		return l.m.fail(ctx, "reenter", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n == 0 {
		l.endLocked(lost)
		return ErrNotHeld
	}
	l.holds = n
	return nil
}

// Unlock drops one hold; the last one stops the renewals, then releases the
// lock and hands it to the next waiter, in one script. It returns
// ErrNotHeld, and deletes nothing, if the lock expired or is someone
// else's. If ctx is done already, Unlock returns ctx.Err() and changes
// nothing; once its script is sent it waits for the answer. If Redis cannot
// be reached, renewals stay stopped: call Unlock again, or the lock
// expires with its lease.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // nothing changed: renewals go on
	}
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.mu.Lock()
	if l.state == released {
		l.mu.Unlock()
		return ErrNotHeld
	}
	last := l.holds <= 1
	if last {
		l.stopRenewalsLocked()
	}
	l.mu.Unlock()
	args := l.m.queueArgs(l.token, false)
	var next *waiter
	if last {
		l.renewMu.Lock() // wait for a renewal in flight
		l.renewMu.Unlock()
		var keep bool
		if next, keep = l.m.client.handOn(l); next != nil {
			args = append(args, next.token, next.m.leaseArg, flag(keep))
		}
	}
	start := time.Now()
	v, err := releaseScript.Exec(detach(ctx), l.m.client.rc, l.m.keys(), args).AsIntSlice()
	if err == nil && len(v) == 0 {
		err = errors.New("empty reply")
	}
	if next != nil {
		var g *grant
		if err == nil && len(v) == 3 {
			g = &grant{fence: v[1], ttl: time.Duration(v[2]) * time.Millisecond, local: true, start: start}
		}
		l.m.client.handedOn(next, g, err != nil)
	}
	if err != nil {
		return l.m.fail(ctx, "release", err)
	}
	n := v[0]
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case n < 0:
		l.endLocked(lost)
		return ErrNotHeld
	case n == 0:
		l.endLocked(released)
	default:
		l.holds = n
	}
	return nil
}

// Extend sets the lock's remaining lease to d. With a watchdog, later
// renewals use d as the lease too. It returns ErrNotHeld if the lock
// expired or is someone else's.
func (l *Lock) Extend(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	if !l.isHeld() {
		return ErrNotHeld
	}
	start := time.Now()
	n, err := extendScript.Exec(detach(ctx), l.m.client.rc, l.m.keyList[:1], []string{l.token, ms(d)}).AsInt64()
	if err != nil {
		return l.m.fail(ctx, "extend", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n == 0 {
		l.endLocked(lost)
		return ErrNotHeld
	}
	l.lease, l.validUntil = d, start.Add(d)
	if !l.m.cfg.watchdog {
		l.leaseEnd = l.validUntil
	}
	if l.state == held && !l.stopping {
		l.scheduleLocked(d)
	}
	return nil
}

func (l *Lock) isHeld() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == held
}

// scheduleLocked arms the timer after Redis set the lease to ttl: a renewal
// at ttl/3 with a watchdog, or when a handoff granted less than the fixed
// lease asked for; otherwise the expiry of the fixed lease.
func (l *Lock) scheduleLocked(ttl time.Duration) {
	d := ttl / 3
	if !l.m.cfg.watchdog && !l.leaseEnd.After(l.validUntil.Add(time.Millisecond)) {
		d = time.Until(l.validUntil)
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.tick)
	} else {
		l.timer.Reset(d)
	}
}

// tick renews the lease, or declares a fixed lease that ran out lost.
func (l *Lock) tick() {
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	l.mu.Lock()
	if l.state != held || l.stopping {
		l.mu.Unlock()
		return
	}
	now := time.Now()
	lease := l.lease
	if !l.m.cfg.watchdog {
		lease = l.leaseEnd.Sub(now) // top up a short handoff lease
		if !l.leaseEnd.After(l.validUntil.Add(time.Millisecond)) || lease <= 0 {
			if now.Before(l.validUntil) {
				l.timer.Reset(l.validUntil.Sub(now))
			} else {
				l.endLocked(lost)
			}
			l.mu.Unlock()
			return
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), l.validUntil)
	l.abortRenew = cancel
	l.mu.Unlock()

	n, err := extendScript.Exec(ctx, l.m.client.rc, l.m.keyList[:1], []string{l.token, ms(lease)}).AsInt64()
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.abortRenew = nil
	if l.state != held || l.stopping {
		return
	}
	switch {
	case err == nil && n == 1:
		l.validUntil = now.Add(lease)
		l.scheduleLocked(lease)
	case err == nil:
		l.endLocked(lost)
	default:
		// Transient: retry while the lease may still be ours.
		left := time.Until(l.validUntil)
		if left <= 0 {
			l.endLocked(lost)
			return
		}
		l.timer.Reset(max(left/4, 5*time.Millisecond))
	}
}

func (l *Lock) stopRenewalsLocked() {
	l.stopping = true
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.abortRenew != nil {
		l.abortRenew()
	}
}

// endLocked moves a held lock to its final state and tells the holder.
func (l *Lock) endLocked(s state) {
	if l.state != held {
		return
	}
	l.state = s
	if l.timer != nil {
		l.timer.Stop()
	}
	if s == lost && l.lost != nil {
		close(l.lost)
	}
	l.m.client.dropHolder(l)
	if l.cancel != nil {
		if s == lost {
			l.cancel(ErrLost)
		} else {
			l.cancel(nil)
		}
	}
}
