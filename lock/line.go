package lock

import (
	"context"
	"time"
)

// A Client queues at most one of its waiters per lock in Redis: the
// representative. Its other waiters wait in the client's line, oldest
// first, and are handed the lock within the client's turns (see turn and
// DESIGN.md, "The two-level queue").
//
// The invariant kept under Client.mu: if a line has waiters, it has a
// representative queued in Redis or a holder whose last Unlock brings the
// next waiter in. Whenever both are gone, the oldest waiter is promoted and
// queues itself (advanceLocked).

// line is one lock's local queue in a Client.
type line struct {
	rep    *waiter   // the waiter queued in Redis, if any
	queue  []*waiter // waiters not yet in Redis, oldest first
	holder *Lock     // this client's current holder, if any
}

// waiter is a goroutine blocked in Mutex.Lock.
type waiter struct {
	token   string
	m       *Mutex
	ctx     context.Context // the waiter's Lock call's: its Lock keeps the values
	grants  chan grant      // buffered, never blocks the sender
	recheck chan struct{}   // "run a check now"; buffered 1

	// Guarded by Client.mu.
	block    int       // the fences its turn reserves; fixed once it may be queued in Redis
	queuedAt time.Time // when the first script that may have queued it in Redis was sent
	granted  *Lock     // a lock handed to it within this client
	// pending is non-nil while a release script that enqueues this waiter
	// is in flight; it is closed when its outcome is known.
	pending chan struct{}
}

// join registers a new waiter for m and reports whether it is the
// representative, which has to queue itself in Redis.
func (c *Client) join(ctx context.Context, m *Mutex) (w *waiter, rep bool, err error) {
	w = &waiter{token: c.newToken(), m: m, ctx: ctx, grants: make(chan grant, 1), recheck: make(chan struct{}, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, ErrClosed
	}
	c.waiters[w.token] = w
	ln := c.lineLocked(m)
	if ln.rep == nil && ln.holder == nil {
		c.promoteLocked(ln, w, 0)
		w.queuedAt = time.Now() // it sends its acquire script next
		return w, true, nil
	}
	ln.queue = append(ln.queue, w)
	return w, false, nil
}

// promoteLocked makes w the representative of ln. Its block covers w, the
// waiters behind it now, and extra more: 1 if a holder is leaving, who
// usually comes back.
func (c *Client) promoteLocked(ln *line, w *waiter, extra int) {
	ln.rep = w
	w.block = blockFor(1 + len(ln.queue) + extra)
}

// beforeCheck returns the block of representative w and, if a release
// that grants or queues w is in flight, the channel closed when it is
// done; otherwise it records that a script that may queue w is about to
// be sent.
func (c *Client) beforeCheck(w *waiter) (block int, pending chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.pending != nil {
		return w.block, w.pending
	}
	if w.queuedAt.IsZero() {
		w.queuedAt = time.Now()
	}
	return w.block, nil
}

// isRep reports whether w is its line's representative.
func (c *Client) isRep(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ln := c.lines[w.m.keyList[0]]
	return ln != nil && ln.rep == w
}

// leave removes a waiter that gives up. If it was the representative, it
// returns the channel to wait on before its cancel script may run (nil if
// none) and wasRep true: the caller must take its token out of Redis. If
// the lock was handed to it within the client meanwhile, it returns that
// Lock, for the caller to pass on.
func (c *Client) leave(w *waiter) (pending chan struct{}, wasRep bool, granted *Lock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waiters, w.token)
	if w.granted != nil {
		return nil, false, w.granted
	}
	ln := c.lines[w.m.keyList[0]]
	if ln == nil {
		return nil, false, nil
	}
	if ln.rep == w {
		ln.rep, wasRep = nil, true
	} else {
		ln.remove(w)
	}
	c.advanceLocked(w.m.keyList[0], ln)
	return w.pending, wasRep, nil
}

// nudge promotes a waiter if its line has neither representative nor
// holder; the invariant makes this a no-op, it is the fallback's safety net.
func (c *Client) nudge(w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ln := c.lines[w.m.keyList[0]]; ln != nil {
		c.advanceLocked(w.m.keyList[0], ln)
	}
}

// take turns a Redis grant to waiter w (nil for TryLock, whose token is
// token) into its Lock, and begins the client's turn: it covers the
// waiters in line now, or, if the grant continues a turn, what that turn
// had left.
func (m *Mutex) take(ctx context.Context, w *waiter, token string, g grant) *Lock {
	c := m.client
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.grantLocked(ctx, m, token, g)
	ln := c.lineLocked(m)
	if w != nil {
		delete(c.waiters, w.token)
		if ln.rep == w {
			ln.rep = nil
		} else {
			ln.remove(w)
		}
	}
	t := l.t
	t.left = len(ln.queue)
	if g.cont != nil {
		t.left, t.deadline = g.cont.left, g.cont.deadline
	}
	if c.cfg.turn <= 0 {
		t.left = 0
	}
	ln.holder = l
	return l
}

// endLocked ends l as released or lost, and its turn with it if l holds
// it; a line it held brings its next waiter in. Called with c.mu held.
func (c *Client) endLocked(l *Lock, s state) {
	if t := l.t; t.holder == l {
		t.holder = nil
		t.ended = true
		t.stopLocked()
	}
	key := l.m.keyList[0]
	if ln := c.lines[key]; ln != nil && ln.holder == l {
		ln.holder = nil
		c.advanceLocked(key, ln)
	}
	l.mu.Lock()
	l.finishLocked(s)
	l.mu.Unlock()
}

// advanceLocked restores the invariant of ln: with waiters but neither a
// representative nor a holder, the oldest waiter becomes representative
// and is told to queue itself. An empty line is dropped, and kept for
// reuse: nothing outside c.lines refers to a line.
func (c *Client) advanceLocked(key string, ln *line) {
	if ln.rep == nil && ln.holder == nil {
		if len(ln.queue) == 0 {
			delete(c.lines, key)
			if len(c.spare) < cap(c.spare) {
				*ln = line{}
				c.spare = append(c.spare, ln)
			}
			return
		}
		w := ln.queue[0]
		ln.queue = ln.queue[1:]
		c.promoteLocked(ln, w, 1)
		signal(w.recheck)
	}
}

func (c *Client) lineLocked(m *Mutex) *line {
	ln := c.lines[m.keyList[0]]
	if ln == nil {
		if n := len(c.spare); n > 0 {
			ln, c.spare = c.spare[n-1], c.spare[:n-1]
		} else {
			ln = &line{}
		}
		c.lines[m.keyList[0]] = ln
	}
	return ln
}

func (ln *line) remove(w *waiter) {
	for i, x := range ln.queue {
		if x == w {
			ln.queue = append(ln.queue[:i], ln.queue[i+1:]...)
			return
		}
	}
}

// signal sends on a buffered-1 channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliver hands a pushed grant to its waiter, if it still waits. The grant
// was made after the waiter was queued, so the lease it carries lasts at
// least until the waiter's queuedAt plus that lease.
func (c *Client) deliver(token string, g grant) {
	c.mu.Lock()
	w := c.waiters[token]
	if w != nil {
		g.sent, g.pushed = w.queuedAt, true
	}
	c.mu.Unlock()
	if w == nil {
		return // gave up: its cancel script releases the grant
	}
	select {
	case w.grants <- g:
	default:
	}
}

// resync tells every representative to check at once: pushes sent while
// the subscription was down are lost.
func (c *Client) resync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ln := range c.lines {
		if ln.rep != nil {
			signal(ln.rep.recheck)
		}
	}
	for _, w := range c.waiters {
		if w.m == nil { // a waiter of an RWMutex or Semaphore (shared.go)
			signal(w.recheck)
		}
	}
}
