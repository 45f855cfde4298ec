package lock

import (
	"fmt"
	"time"
)

// The handoff: within a Client's turn, the last Unlock of a holder passes
// the lock to the next goroutine in the lock's line, in this process, with
// no Redis call (see DESIGN.md). Client.plan decides, for each Unlock,
// between that and a release through Redis (release.go).

// unlockKind is what an Unlock of a handle does.
type unlockKind uint8

const (
	// unlockNotHeld: the handle does not hold the lock; Unlock returns
	// ErrNotHeld.
	unlockNotHeld unlockKind = iota
	// unlockHandOff: the last hold, handed to the next waiter of the turn
	// (done by plan itself).
	unlockHandOff
	// unlockConfirm: the last hold, and the next waiter could have it
	// within the turn, but the turn's lease is not known to be valid or
	// its fence block is used up: confirm the lease in Redis (reserving a
	// new block), then plan again.
	unlockConfirm
	// unlockDrop: not the last hold; drop it in Redis. Renewals go on.
	unlockDrop
	// unlockDropMaybeLast: a hold whose count is unsure (an earlier Reenter
	// or Unlock failed in flight) may be the last: renewals are stopped
	// before the release and resumed if Redis says holds are left.
	unlockDropMaybeLast
	// unlockEndTurn: the last hold, released in Redis; it ends the turn
	// and may name the Client's next waiter (see successor). Renewals are
	// stopped.
	unlockEndTurn
)

func (k unlockKind) String() string {
	switch k {
	case unlockNotHeld:
		return "not held"
	case unlockHandOff:
		return "hand off"
	case unlockConfirm:
		return "confirm lease"
	case unlockDrop:
		return "drop hold"
	case unlockDropMaybeLast:
		return "drop hold, maybe the last"
	case unlockEndTurn:
		return "end turn"
	}
	return fmt.Sprintf("unlockKind(%d)", uint8(k))
}

// stopsRenewals reports whether the release of this kind runs with the
// turn's renewals stopped.
func (k unlockKind) stopsRenewals() bool {
	return k == unlockDropMaybeLast || k == unlockEndTurn
}

// successor is how a release that ends a turn names its Client's next
// waiter to the release script.
type successor uint8

const (
	// noSuccessor: the release names no waiter.
	noSuccessor successor = iota
	// successorQueues: the waiter joins the Redis queue behind the other
	// Clients' waiters, or takes the lock at once if none wait.
	successorQueues
	// successorContinues: the waiter takes the lock at once, whoever else
	// waits, and continues the turn with what is left of it.
	successorContinues
)

func (s successor) String() string {
	switch s {
	case noSuccessor:
		return "none"
	case successorQueues:
		return "queues"
	case successorContinues:
		return "continues the turn"
	}
	return fmt.Sprintf("successor(%d)", uint8(s))
}

// unlockPlan is what Client.plan decided an Unlock does.
type unlockPlan struct {
	kind      unlockKind
	block     int       // unlockConfirm: the fences to reserve (0: none)
	next      *waiter   // unlockEndTurn: the waiter the release names, if any
	successor successor // how next is named
	rest      *budget   // successorContinues: what is left of the turn
}

// plan decides what an Unlock of l does, and does it if it needs no Redis
// call. A hold that is not the last, or whose count is unsure, is dropped
// in Redis. The last hold is handed on within the turn if it can be (see
// handOffLocked); otherwise the release goes through Redis and ends the
// turn (see endTurnLocked). mayRenew allows an unlockConfirm plan.
func (c *Client) plan(l *Lock, mayRenew bool) unlockPlan {
	c.mu.Lock()
	defer c.mu.Unlock()
	l.mu.Lock()
	st, holds, unsure := l.state, l.holds, l.unsure
	l.mu.Unlock()
	switch {
	case st != held:
		return unlockPlan{kind: unlockNotHeld}
	case holds > 1 || unsure:
		return c.dropLocked(l, unsure)
	}
	now := time.Now()
	ln := c.lines[l.m.keyList[0]]
	mine := ln != nil && ln.holder == l
	if mine {
		if p, ok := c.handOffLocked(ln, l, now, mayRenew); ok {
			return p
		}
	}
	return c.endTurnLocked(l, ln, mine, now)
}

// dropLocked plans the release of one of several holds of l, or of one
// whose count is unsure and which may thus be the last: then it stops the
// renewals first. Called with c.mu held.
func (c *Client) dropLocked(l *Lock, unsure bool) unlockPlan {
	if unsure && l.t.holder == l {
		l.t.stopLocked()
		return unlockPlan{kind: unlockDropMaybeLast}
	}
	return unlockPlan{kind: unlockDrop}
}

// handOffLocked plans the last Unlock of l, the holder of ln, within its
// turn. The lock is handed to ln's next waiter, at once, if the turn is not
// over, the waiter renews the lock the way the turn does, the turn's lease
// is known to be valid (turn.validLocked) and a fence of its block is left.
// If only the last two fail, and mayRenew, the turn is confirmed first.
// ok is false if the release must go through Redis. Called with c.mu held.
func (c *Client) handOffLocked(ln *line, l *Lock, now time.Time, mayRenew bool) (p unlockPlan, ok bool) {
	t := l.t
	if ln.rep != nil || len(ln.queue) == 0 || t.ended || t.over(now) || !t.compatible(ln.queue[0].m) {
		return unlockPlan{}, false
	}
	short := t.fence > t.lastFence
	switch {
	case !short && t.validLocked(now):
		c.handLocked(ln, l)
		return unlockPlan{kind: unlockHandOff}, true
	case !mayRenew:
		return unlockPlan{}, false
	case short:
		return unlockPlan{kind: unlockConfirm, block: blockFor(t.left)}, true
	}
	return unlockPlan{kind: unlockConfirm}, true
}

// handLocked hands the lock from holder l to the next waiter in ln,
// within l's turn: the waiter gets a Lock with its own token and the next
// fence of the turn's block, and l is released. Called with c.mu held.
func (c *Client) handLocked(ln *line, l *Lock) {
	t := l.t
	w := ln.queue[0]
	ln.queue = ln.queue[1:]
	nl := t.newHolderLocked(new(Lock), w.ctx, w.m, w.token, t.fence)
	t.fence++
	t.left--
	c.stats.handoffs.Add(1)
	ln.holder = nl
	t.lease = t.m.cfg.lease // an Extend was the old holder's
	delete(c.waiters, w.token)
	w.granted = nl
	l.mu.Lock()
	l.finishLocked(released)
	l.mu.Unlock()
	select {
	case w.grants <- grant{lock: nl}:
	default:
	}
}
