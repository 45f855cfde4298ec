package lock

import (
	"context"
	"strconv"
	"time"
)

// A turn is a stretch of time during which this Client holds a lock in
// Redis under one owner token, the lock passing between its goroutines
// without a Redis call (see DESIGN.md, "Turns"). It ends with a release
// through Redis, or when its lease is lost.
type turn struct {
	first   Lock   // the handle of the acquisition that began the turn
	m       *Mutex // the mutex of the acquisition that began the turn
	token   string
	renewMu gate // held while a renewal, renew or Extend talks to Redis

	// The rest is guarded by m.client.mu.
	holder     *Lock // the current holder; nil once the turn is released or lost
	fence      int64 // next unused fence of the block
	lastFence  int64 // last fence of the block
	left       int   // local handoffs the turn may still make
	deadline   time.Time
	ended      bool          // no more local handoffs: released, being released, or lost
	ttl        time.Duration // the lease Redis last set
	leaseEnd   time.Time     // Redis keeps the lock at least until then (see grant.sent)
	lease      time.Duration // what a watchdog renewal sets
	fixedEnd   time.Time     // WithLease: when the acquisition's lease is meant to end
	timer      *time.Timer   // next renewal, or the expiry of a fixed lease
	stopping   bool          // renewals stopped: the turn is being released
	abortRenew context.CancelFunc
	// unconfirmed: leaseEnd is only a lower bound taken from a pushed
	// grant (see grant.sent), not yet confirmed by a renewal of ours.
	unconfirmed bool
}

// grantLocked begins a turn with the grant g to token and returns its
// first holder's Lock. The lock's line is not touched (see Mutex.take).
// Called with c.mu held.
func (c *Client) grantLocked(ctx context.Context, m *Mutex, token string, g grant) *Lock {
	now := time.Now()
	t := &turn{
		renewMu:   newGate(),
		m:         m,
		token:     token,
		fence:     g.fence + 1,
		lastFence: g.fence + max(g.block, 1) - 1,
		deadline:  now.Add(c.cfg.turn),
		ttl:       g.ttl,
		leaseEnd:  g.sent.Add(g.ttl),
		lease:     m.cfg.lease,

		unconfirmed: g.pushed,
	}
	if !m.cfg.watchdog {
		// A fixed lease runs from the grant: for a pushed grant, from its
		// arrival (a process paused before reading it thus believes in a
		// lease partly gone; leaseEnd, which is safe, bounds it anyway).
		start := g.sent
		if g.pushed {
			start = now
		}
		t.fixedEnd = start.Add(m.cfg.lease)
	}
	l := t.newHolderLocked(&t.first, ctx, m, token, g.fence)
	t.scheduleLocked()
	c.stats.turns.Add(1)
	return l
}

// newHolderLocked makes l, a zero Lock, the held handle of an acquisition
// of m with its own owner token and fencing token, and the holder of turn
// t; ctx is the acquiring context. It is the one place a Lock is built: by
// a grant from Redis (grantLocked) and by a local handoff (handLocked).
// Called with c.mu held.
func (t *turn) newHolderLocked(l *Lock, ctx context.Context, m *Mutex, token string, fence int64) *Lock {
	l.m, l.t, l.token, l.fence, l.values, l.holds = m, t, token, fence, ctx, 1
	l.outer, _ = ctx.Value(ctxKey{}).(*Lock)
	t.holder = l
	m.client.stats.acquired.Add(1)
	return l
}

// newLock returns the handle of a grant to token that begins a turn of its
// own, outside the lock's line, and starts its renewal or expiry timer.
func (m *Mutex) newLock(ctx context.Context, token string, g grant, sent time.Time) *Lock {
	g.sent = sent
	c := m.client
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grantLocked(ctx, m, token, g)
}

// compatible reports whether a waiter of m may have the lock handed to it
// within the turn: it must renew the lock the way the turn does (same
// lease, same replicas to confirm renewals). Fixed
// leases never are, since each acquisition's lease starts in Redis.
func (t *turn) compatible(m *Mutex) bool {
	return t.m.cfg.watchdog && m.cfg.watchdog && m.cfg.lease == t.m.cfg.lease && m.cfg.replicas == t.m.cfg.replicas
}

// over reports whether the turn has served the waiters it covers, or run
// for as long as a turn may.
func (t *turn) over(now time.Time) bool {
	return t.left <= 0 || !now.Before(t.deadline)
}

// validLocked reports whether the turn's lease is known to last for at
// least a third of its length more: by then a renewal is due, so a turn
// whose renewals work always is. A lease that is not is confirmed in Redis
// (renew) before the lock is handed on.
func (t *turn) validLocked(now time.Time) bool {
	return leaseLeft(now, t.leaseEnd, t.ttl)
}

// leaseLeft reports whether a lease of length ttl, known to last until at
// least end, has at least a third of its length left at now.
func leaseLeft(now, end time.Time, ttl time.Duration) bool {
	return now.Before(end.Add(-ttl / 3))
}

// scheduleLocked arms the timer for the renewal due a third of the way
// through the lease Redis set, or for the expiry of a fixed lease that
// needs no top-up.
func (t *turn) scheduleLocked() {
	d := time.Until(t.leaseEnd) - 2*t.ttl/3
	if !t.m.cfg.watchdog && !t.fixedEnd.After(t.leaseEnd.Add(time.Millisecond)) {
		d = time.Until(t.leaseEnd)
	}
	d = max(d, 0)
	if t.timer == nil {
		t.timer = time.AfterFunc(d, t.tick)
	} else {
		t.timer.Reset(d)
	}
}

// stopLocked stops the renewals, and aborts one in flight.
func (t *turn) stopLocked() {
	t.stopping = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.abortRenew != nil {
		t.abortRenew()
	}
}

// tick renews the lease, or declares a fixed lease that ran out lost.
func (t *turn) tick() {
	t.renewMu.lock()
	defer t.renewMu.unlock()
	c := t.m.client
	c.mu.Lock()
	if t.stopping || t.holder == nil {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	lease := t.lease
	if !t.m.cfg.watchdog {
		lease = t.fixedEnd.Sub(now) // top up a short handoff lease
		if !t.fixedEnd.After(t.leaseEnd.Add(time.Millisecond)) || lease <= 0 {
			if now.Before(t.leaseEnd) {
				t.timer.Reset(t.leaseEnd.Sub(now))
			} else {
				c.expiredLocked(t)
			}
			c.mu.Unlock()
			return
		}
	}
	ctx, cancel := within(context.Background(), t.renewDeadlineLocked(now)) // an abort ends it at once
	t.abortRenew = cancel
	c.mu.Unlock()

	n, err := execScript(ctx, extendScript, c, t.m.keyList[:1], []string{t.token, ms(lease)}).AsInt64()
	if err == nil && n == 1 && t.m.cfg.replicas > 0 {
		err = t.m.replicate(ctx) // unacknowledged: retried as if Redis had not answered
	}
	cancel()

	c.mu.Lock()
	defer c.mu.Unlock()
	t.abortRenew = nil
	if t.stopping || t.holder == nil {
		return
	}
	switch {
	case err == nil && n == 1:
		t.ttl, t.leaseEnd, t.unconfirmed = lease, now.Add(lease), false
		t.scheduleLocked()
	case err == nil:
		c.loseLocked(t)
	default:
		// Transient: retry while the lease may still be ours.
		left := time.Until(t.leaseEnd)
		if left <= 0 {
			c.expiredLocked(t)
			return
		}
		t.timer.Reset(max(left/4, 5*time.Millisecond))
	}
}

// renewDeadlineLocked returns how long a renewal may wait for Redis:
// while the lease may still be ours, so that a holder whose lease runs out
// while Redis does not answer is told by then. Only a pushed grant, whose
// leaseEnd is a lower bound, gets a moment more: finding the token in
// Redis proves it holds. Called with c.mu held.
func (t *turn) renewDeadlineLocked(now time.Time) time.Time {
	if t.unconfirmed {
		return later(t.leaseEnd, now.Add(t.ttl/3))
	}
	return t.leaseEnd
}

// callDeadlineLocked returns how long renew and Extend may wait for Redis:
// as a renewal, but at least a third of the lease, so that a holder whose
// lease is known to be over still learns from Redis whether it holds. They
// hold renewMu, which the watchdog waits for: a holder whose lease ran out
// while one of them was waiting for a silent Redis is told at most a third
// of the lease late, instead of when Redis answers. Called with c.mu held.
func (t *turn) callDeadlineLocked(now time.Time) time.Time {
	return later(t.renewDeadlineLocked(now), now.Add(t.ttl/3))
}

// renew makes sure, in Redis, that the turn still owns the lock, sets its
// lease, and reserves block more fences if block > 0. It reports false if
// the turn turned out lost (its holder is then told).
func (t *turn) renew(ctx context.Context, block int) (bool, error) {
	if err := t.renewMu.lockCtx(ctx); err != nil {
		return false, err // a renewal in flight held it past ctx's end
	}
	defer t.renewMu.unlock()
	c := t.m.client
	c.mu.Lock()
	lease, ok := t.lease, !t.stopping && t.holder != nil
	sent := time.Now()
	deadline := t.callDeadlineLocked(sent)
	c.mu.Unlock()
	if !ok {
		return false, nil
	}
	ctx, cancel := sendBefore(ctx, deadline)
	defer cancel()
	keys := []string{t.m.keyList[0], t.m.keyList[2]}
	v, err := execScript(ctx, renewScript, c, keys,
		[]string{t.token, ms(lease), strconv.Itoa(block), t.m.retentionArg}).AsInt64()
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v < 0 {
		c.loseLocked(t)
		return false, nil
	}
	t.ttl, t.leaseEnd, t.unconfirmed = lease, sent.Add(lease), false
	if !t.stopping {
		t.scheduleLocked()
	}
	if block > 0 {
		t.fence, t.lastFence = v, v+int64(block)-1
	}
	return true, nil
}

// awaitRenewal waits until a renewal in flight, if any, is done. The
// caller has stopped the renewals, so no new one starts.
func (t *turn) awaitRenewal() { t.renewMu.await() }

// resumeLocked restarts the renewals stopped for a release that turned out
// not to free the lock, if l still holds the turn. Called with c.mu held.
func (t *turn) resumeLocked(l *Lock) {
	if t.holder == l && t.stopping {
		t.stopping = false
		t.scheduleLocked()
	}
}

// expireLocked declares the turn lost when its lease runs out unless it
// has been released or renewed by then: after a final release that failed,
// with the renewals stopped, nothing else would tell the holder. Called
// with c.mu held.
func (t *turn) expireLocked() {
	time.AfterFunc(max(time.Until(t.leaseEnd), 0), func() {
		c := t.m.client
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.stopping && t.holder != nil && !time.Now().Before(t.leaseEnd) {
			c.expiredLocked(t)
		}
	})
}

// expiredLocked ends turn t as lost when its lease is known to be over,
// and gives the lock up in Redis too: a renewal, Extend or release whose
// reply never came may still have been applied, or apply late, and keep
// the lock for a lease nobody here will use, while the next waiter waits.
// Called with c.mu held.
func (c *Client) expiredLocked(t *turn) {
	c.loseLocked(t)
	go t.m.cancel(context.Background(), t.token, 0)
}

// loseLocked ends turn t as lost, and its holder with it. Called with
// c.mu held.
func (c *Client) loseLocked(t *turn) {
	if t.holder != nil {
		c.endLocked(t.holder, lost)
		return
	}
	t.ended = true
	t.stopLocked()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
