package lock

import (
	"context"
	"sync"
	"time"
)

// hold is one acquisition of an RWMutex or a Semaphore: its own token in
// Redis, its own lease, and its own watchdog. RWLock and Permit are its
// public faces. Re-entries are counted here, not in Redis: they are by
// handle, so only the last Unlock needs Redis.
type hold struct {
	s      *sharedLock
	kind   string
	token  string
	fence  int64
	values context.Context // the acquiring context; Context keeps its values
	outer  *hold           // a hold the acquiring context carried
	rw     *RWLock         // the RWLock this is, if it is one

	opMu    sync.Mutex // serialises release, reenter and Extend
	renewMu gate       // held while a renewal or Extend talks to Redis

	mu       sync.Mutex
	state    state
	holds    int
	unsure   bool // a release failed in flight: it may have run
	lost     chan struct{}
	ctx      context.Context
	cancel   context.CancelCauseFunc
	lease    time.Duration // what a watchdog renewal sets
	ttl      time.Duration // the lease Redis last set
	leaseEnd time.Time     // Redis keeps the hold at least until then
	fixedEnd time.Time     // WithLease: when the lease is meant to end
	timer    *time.Timer
	stopping bool // renewals stopped: a release is in flight
	abort    context.CancelFunc
}

type holdKey struct{}

// newHold returns the handle of grant g to token and starts its watchdog
// (or the timer of its fixed lease).
func (s *sharedLock) newHold(ctx context.Context, token, kind string, g grant) *hold {
	h := &hold{s: s, kind: kind, token: token, fence: g.fence, values: ctx, holds: 1, renewMu: newGate(),
		lease: s.cfg.lease, ttl: g.ttl, leaseEnd: g.sent.Add(g.ttl)}
	h.outer, _ = ctx.Value(holdKey{}).(*hold)
	if !s.cfg.watchdog {
		h.fixedEnd = time.Now().Add(s.cfg.lease)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer = time.AfterFunc(time.Hour, h.tick)
	h.scheduleLocked()
	return h
}

// Name returns the name of the lock or semaphore.
func (h *hold) Name() string { return h.s.name }

// Token returns the random owner token of this acquisition:
// "<client id>:<random>".
func (h *hold) Token() string { return h.token }

// Lost returns a channel closed when the hold is lost while held: a
// renewal found it gone, renewals failed until the lease ran out, a fixed
// lease (WithLease) ran out, or Unlock, Release or Extend found it not
// held. A normal release does not close it; Context covers both ends.
func (h *hold) Lost() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost == nil {
		h.lost = make(chan struct{})
		if h.state == lost { // lost before anyone asked: endLocked did not close it
			close(h.lost)
		}
	}
	return h.lost
}

// Context returns a context that is cancelled when the hold is released
// (cause context.Canceled) or lost (cause ErrLost). It carries the values
// of the context it was obtained with, and the handle itself: for an
// RWLock, RLock and Lock of the same RWMutex with it re-enter it.
func (h *hold) Context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithCancelCause(context.WithValue(context.WithoutCancel(h.values), holdKey{}, h))
		switch h.state {
		case lost:
			h.cancel(ErrLost)
		case released:
			h.cancel(nil)
		}
	}
	return h.ctx
}

// Extend sets the remaining lease to d; with a watchdog, later renewals use
// d too. It returns ErrNotHeld if the hold expired or was released. It
// waits for Redis as Lock.Extend does.
func (h *hold) Extend(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	if err := h.renewMu.lockCtx(ctx); err != nil {
		return err // a renewal in flight held it past ctx's end
	}
	defer h.renewMu.unlock()
	h.mu.Lock()
	ok, sent := h.state == held, time.Now()
	deadline := later(h.leaseEnd, sent.Add(h.ttl/3))
	h.mu.Unlock()
	if !ok {
		return ErrNotHeld
	}
	sctx, cancel := sendBefore(ctx, deadline)
	defer cancel()
	ok, err := h.s.renew(sctx, h.token, h.kind, d)
	if err != nil {
		return opError(ctx, "extend", h.s.name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != held {
		return ErrNotHeld
	}
	if !ok {
		h.endLocked(lost)
		return ErrNotHeld
	}
	h.lease, h.ttl, h.leaseEnd = d, d, sent.Add(d)
	if !h.s.cfg.watchdog {
		h.fixedEnd = h.leaseEnd
	}
	if !h.stopping {
		h.scheduleLocked()
	}
	return nil
}

// reenter adds a hold: each needs its own release, and only the last
// one goes to Redis. It does not change the lease.
func (h *hold) reenter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != held {
		return ErrNotHeld
	}
	h.holds++
	return nil
}

// release drops one hold; the last one gives the hold up in Redis and
// lets the waiters it made room for in. If Redis cannot be reached it
// returns an error and the hold stays, renewed: call it again. A release
// whose reply was lost may have run: the next call (or renewal) that finds
// the hold gone counts it as released.
func (h *hold) release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	h.mu.Lock()
	switch {
	case h.state == released && h.unsure:
		h.mu.Unlock()
		return nil // an earlier release that reported an error had run
	case h.state != held:
		h.mu.Unlock()
		return ErrNotHeld
	case h.holds > 1:
		h.holds--
		h.mu.Unlock()
		return nil
	}
	h.stopLocked()
	h.mu.Unlock()
	h.renewMu.await() // a renewal in flight must not run after the release

	ok, err := h.s.release(ctx, h.token, h.kind)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil:
		h.unsure, h.stopping = true, false
		h.scheduleLocked()
		return opError(ctx, "release", h.s.name, err)
	case ok || h.unsure:
		h.endLocked(released)
		return nil
	}
	h.endLocked(lost)
	return ErrNotHeld
}

func (h *hold) isHeld() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == held
}

// scheduleLocked arms the timer for the renewal due a third of the way
// through the lease Redis set, or for the end of a fixed lease that needs
// no top-up.
func (h *hold) scheduleLocked() {
	d := time.Until(h.leaseEnd) - 2*h.ttl/3
	if !h.s.cfg.watchdog && !h.fixedEnd.After(h.leaseEnd.Add(time.Millisecond)) {
		d = time.Until(h.leaseEnd)
	}
	h.timer.Reset(max(d, 0))
}

// stopLocked stops the renewals, and aborts one in flight.
func (h *hold) stopLocked() {
	h.stopping = true
	h.timer.Stop()
	if h.abort != nil {
		h.abort()
	}
}

// tick renews the lease (with a fixed lease: tops a short pushed grant up
// to it), or declares the hold lost when its lease is over.
func (h *hold) tick() {
	h.renewMu.lock()
	defer h.renewMu.unlock()
	h.mu.Lock()
	if h.state != held || h.stopping {
		h.mu.Unlock()
		return
	}
	now := time.Now()
	lease := h.lease
	if !h.s.cfg.watchdog {
		lease = h.fixedEnd.Sub(now)
		if !h.fixedEnd.After(h.leaseEnd.Add(time.Millisecond)) || lease <= 0 {
			if now.Before(h.leaseEnd) {
				h.timer.Reset(h.leaseEnd.Sub(now))
			} else {
				h.expireLocked()
			}
			h.mu.Unlock()
			return
		}
	}
	ctx, cancel := within(context.Background(), h.leaseEnd) // an abort ends it at once
	h.abort = cancel
	h.mu.Unlock()

	ok, err := h.s.renew(ctx, h.token, h.kind, lease)
	cancel()

	h.mu.Lock()
	defer h.mu.Unlock()
	h.abort = nil
	switch {
	case h.state != held || h.stopping:
	case err == nil && ok:
		h.ttl, h.leaseEnd = lease, now.Add(lease)
		h.scheduleLocked()
	case err == nil && h.unsure:
		h.endLocked(released) // the release that reported an error had run
	case err == nil:
		h.endLocked(lost)
	case !time.Now().Before(h.leaseEnd):
		h.expireLocked()
	default: // transient: retry while the lease may still be ours
		h.timer.Reset(max(time.Until(h.leaseEnd)/4, 5*time.Millisecond))
	}
}

// expireLocked ends a hold whose lease is over as lost, and gives it up in
// Redis too: a renewal whose reply never came may still apply.
func (h *hold) expireLocked() {
	h.endLocked(lost)
	go h.s.giveUp(context.Background(), nil, h.token, h.kind)
}

// endLocked moves a held handle to its final state and tells the holder.
func (h *hold) endLocked(s state) {
	if h.state != held {
		return
	}
	h.state = s
	h.stopLocked()
	if h.cancel != nil { // Context first: a holder woken by Lost finds it cancelled
		if s == lost {
			h.cancel(ErrLost)
		} else {
			h.cancel(nil)
		}
	}
	if s == lost && h.lost != nil {
		close(h.lost)
	}
}
