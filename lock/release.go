package lock

import (
	"context"
	"strconv"
	"time"
)

// Unlock drops one hold; the last one passes the lock to the next waiter.
// It returns ErrNotHeld, changing nothing, if the lock was lost or this
// handle released already, and ctx.Err() as the package doc says. On
// another error the hold stays: call Unlock again. That does not drop a
// second hold for a release that ran but whose reply was lost, unless it
// was still on its way. A last hold whose release failed is no longer
// renewed: it expires with its lease unless Unlock is called again.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // nothing changed: renewals go on
	}
	l.opMu.Lock()
	defer l.opMu.Unlock()
	for tries := 0; ; tries++ {
		p := l.m.client.plan(l, tries < 2)
		switch p.kind {
		case unlockNotHeld:
			return ErrNotHeld
		case unlockHandOff:
			return nil
		case unlockConfirm:
			if _, err := l.t.renew(ctx, p.block); err != nil {
				return l.m.fail(ctx, "renew", err)
			}
		default:
			return l.release(ctx, p)
		}
	}
}

// releaseReply is what the release script's run told.
type releaseReply struct {
	left      int64 // holds left in Redis; -1: the handle did not hold the lock
	granted   bool  // the lock went to the plan's next waiter, with grant
	grant     grant // granted: the grant to it
	replyLost bool  // the script may or may not have run
	err       error // the release is not known to have happened
}

// release drops a hold of l in Redis as p plans it (unlockDrop,
// unlockDropMaybeLast or unlockEndTurn), in four steps: wait for a renewal
// in flight if renewals are stopped, run the script (finding out, if its
// reply is lost, whether it ran), tell the next waiter its outcome, and
// settle l and its turn.
func (l *Lock) release(ctx context.Context, p unlockPlan) error {
	if p.kind.stopsRenewals() {
		l.t.awaitRenewal()
	}
	r := l.runRelease(ctx, p)
	if p.next != nil {
		// A release that kept a hold did not look at the waiter, and one
		// whose reply was lost may have granted it: it checks.
		var g *grant
		if r.granted {
			g = &r.grant
		}
		l.m.client.handedOn(p.next, g, r.replyLost || r.left > 0)
	}
	return l.settleRelease(ctx, p, r)
}

// runRelease runs the release script and decodes its reply.
func (l *Lock) runRelease(ctx context.Context, p unlockPlan) releaseReply {
	l.mu.Lock()
	before, unsure := l.holds, l.unsure
	l.mu.Unlock()
	// ARGV: see scripts/common.lua. Built here, not returned by a helper,
	// so that it stays on the stack.
	args := []string{l.t.token, l.m.settingsArg}
	if n := p.next; n != nil {
		args = append(args, n.token, n.m.leaseArg, strconv.Itoa(n.block), flag(p.successor == successorContinues))
	}
	sctx, cancel := l.m.client.sendContext(ctx)
	defer cancel()
	sent := time.Now()
	v, err := execScript(sctx, releaseScript, l.m.client, l.m.keys(), args).ToMessage()
	switch {
	case err != nil:
		return l.lostReleaseReply(ctx, p, before, unsure, err)
	case v.IsInt64():
		n, _ := v.AsInt64()
		return releaseReply{left: n}
	}
	g, err := decodeGrant(v)
	if err != nil {
		return releaseReply{err: err}
	}
	g.sent, g.cont = sent, p.rest
	return releaseReply{granted: true, grant: g}
}

// lostReleaseReply finds out, when the release script's reply was lost
// (err), whether it ran, from the hold count in Redis. before and unsure
// are l's count before the release and whether Redis has the true one.
func (l *Lock) lostReleaseReply(ctx context.Context, p unlockPlan, before int64, unsure bool, err error) releaseReply {
	r := releaseReply{replyLost: true, err: err}
	switch {
	case p.kind == unlockEndTurn:
		// The turn's token gone from Redis while its lease is known to
		// last means the release ran (renewals are stopped, so nothing
		// else moves the lease).
		if _, rerr := l.recount(ctx, 0, err); rerr == nil && l.m.client.leaseLasts(l.t) {
			r.err = nil // left is 0: released
		}
	case !unsure:
		// Did the hold go? A caller told "no" calls Unlock again.
		r.left, r.err = l.recount(ctx, before-1, err)
		if r.err == nil && r.left == 0 {
			r.left = -1
		}
	}
	return r
}

// settleRelease brings l and its turn in line with the release's outcome
// and returns Unlock's result.
func (l *Lock) settleRelease(ctx context.Context, p unlockPlan, r releaseReply) error {
	c := l.m.client
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case r.err != nil:
		l.releaseFailedLocked(p)
		return l.m.fail(ctx, "release", r.err)
	case r.left < 0:
		c.endLocked(l, lost)
		return ErrNotHeld
	case r.left == 0:
		c.endLocked(l, released)
	default:
		// A release that was to be the last but left holds means Redis
		// counted holds this handle did not know of: Redis has the count
		// from now on, and the lock is still held, so renew on.
		l.mu.Lock()
		l.holds, l.unsure = r.left, p.kind == unlockEndTurn
		l.mu.Unlock()
		if p.kind.stopsRenewals() {
			l.t.resumeLocked(l)
		}
	}
	return nil
}

// releaseFailedLocked leaves l held after a release that is not known to
// have happened. Called with c.mu held.
func (l *Lock) releaseFailedLocked(p unlockPlan) {
	t := l.t
	if p.kind == unlockEndTurn {
		if t.holder == l {
			t.expireLocked() // renewals stay stopped: tell the holder when the lease ends
		}
		return
	}
	l.mu.Lock()
	l.unsure = true // the hold may have been dropped
	l.mu.Unlock()
	if p.kind == unlockDropMaybeLast {
		t.resumeLocked(l) // the lock may still be held
	}
}

// endTurnLocked plans the last Unlock of l as a release through Redis,
// which ends l's turn: it stops the renewals and, if l holds the lock's
// line, names the line's next waiter (its new representative) to the
// release script. The waiter continues the turn if the turn is not over.
// Called with c.mu held.
func (c *Client) endTurnLocked(l *Lock, ln *line, mine bool, now time.Time) unlockPlan {
	t := l.t
	p := unlockPlan{kind: unlockEndTurn}
	t.ended = true
	t.stopLocked()
	if !mine {
		return p
	}
	ln.holder = nil
	if ln.rep != nil || len(ln.queue) == 0 {
		c.advanceLocked(l.m.keyList[0], ln)
		return p
	}
	next := ln.queue[0]
	ln.queue = ln.queue[1:]
	c.promoteLocked(ln, next, 1)
	next.pending = make(chan struct{})
	if next.queuedAt.IsZero() {
		next.queuedAt = now
	}
	p.next, p.successor = next, successorQueues
	if !t.over(now) && c.cfg.turn > 0 {
		p.successor, p.rest = successorContinues, &budget{left: t.left - 1, deadline: t.deadline}
	}
	return p
}

// handedOn tells the waiter a release named the outcome, once it is known:
// it got the lock (g non-nil), or was queued in Redis, or, if the script
// may not have run (or did not look at the waiter), it checks (and queues
// itself) now.
func (c *Client) handedOn(next *waiter, g *grant, check bool) {
	c.mu.Lock()
	close(next.pending)
	next.pending = nil
	c.mu.Unlock()
	switch {
	case g != nil:
		select {
		case next.grants <- *g:
		default:
		}
	case check:
		signal(next.recheck)
	}
}
