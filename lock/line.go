package lock

// A Client queues at most one of its waiters per lock in Redis: the
// representative. Its other waiters wait in the client's line, oldest
// first. When one of them holds the lock, its release (one script) passes
// the lock on to the next in line directly, and the reply carries the grant,
// so the client wakes it without a push. A client's turn is bounded: it
// serves the waiters that were in its line when its turn began, then its
// next waiter joins the Redis queue, behind the other clients', in the same
// release script that hands the lock to the queue's head. So every
// goroutine gets its turn once per round and nobody starves, while most
// handoffs stay inside one process, and a goroutine that queues again after
// its turn costs no Redis call.
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
	turn   int       // local handoffs left in this client's turn
}

// waiter is a goroutine blocked in Mutex.Lock.
type waiter struct {
	token   string
	m       *Mutex
	grants  chan grant    // grants pushed by Redis; buffered, never blocks the sender
	recheck chan struct{} // "run a check now"; buffered 1
	// pending is non-nil while a release script that enqueues this waiter
	// is in flight; it is closed when its outcome is known.
	pending chan struct{}
}

// join registers a new waiter for m and reports whether it is the
// representative, which has to queue itself in Redis.
func (c *Client) join(m *Mutex, token string) (w *waiter, rep bool, err error) {
	w = &waiter{token: token, m: m, grants: make(chan grant, 1), recheck: make(chan struct{}, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, ErrClosed
	}
	c.waiters[token] = w
	ln := c.lineLocked(m)
	if ln.rep == nil && ln.holder == nil {
		ln.rep = w
		return w, true, nil
	}
	ln.queue = append(ln.queue, w)
	return w, false, nil
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
// none) and ok true: the caller must take its token out of Redis.
func (c *Client) leave(w *waiter) (pending chan struct{}, wasRep bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waiters, w.token)
	ln := c.lines[w.m.keyList[0]]
	if ln == nil {
		return nil, false
	}
	if ln.rep == w {
		ln.rep, wasRep = nil, true
	} else {
		ln.remove(w)
	}
	c.advanceLocked(w.m.keyList[0], ln)
	return w.pending, wasRep
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

// took records that l was obtained, by waiter w (nil for TryLock). Unless
// it was handed over inside this client, a new turn begins: it covers the
// waiters in line now.
func (c *Client) took(w *waiter, l *Lock, local bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ln := c.lineLocked(l.m)
	if !local {
		ln.turn = len(ln.queue)
	}
	if w != nil {
		delete(c.waiters, w.token)
		if ln.rep == w {
			ln.rep = nil
		} else {
			ln.remove(w)
		}
	}
	ln.holder = l
}

// handOn is called at l's last Unlock, before its release script is sent.
// It returns the next local waiter, for the script to hand the lock to or
// enqueue, and whether the client's turn allows the former; nil if there is
// no waiter (or one is queued in Redis already). The waiter becomes the
// representative until the outcome is known (handedOn).
func (c *Client) handOn(l *Lock) (next *waiter, keep bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := l.m.keyList[0]
	ln := c.lines[key]
	if ln == nil || ln.holder != l {
		return nil, false
	}
	ln.holder = nil
	if ln.rep != nil || len(ln.queue) == 0 {
		c.advanceLocked(key, ln)
		return nil, false
	}
	next = ln.queue[0]
	ln.queue = ln.queue[1:]
	ln.rep = next
	next.pending = make(chan struct{})
	if ln.turn > 0 {
		ln.turn--
		keep = true
	}
	return next, keep
}

// handedOn ends a handOn once the release script's outcome is known: the
// waiter got the lock (g non-nil), or was queued in Redis, or, if the
// script failed and may not have run, checks (and queues itself) now.
func (c *Client) handedOn(next *waiter, g *grant, failed bool) {
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
	case failed:
		signal(next.recheck)
	}
}

// dropHolder forgets l as its line's holder (lost or released).
func (c *Client) dropHolder(l *Lock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := l.m.keyList[0]
	if ln := c.lines[key]; ln != nil && ln.holder == l {
		ln.holder = nil
		c.advanceLocked(key, ln)
	}
}

// advanceLocked restores the invariant of ln: with waiters but neither a
// representative nor a holder, the oldest waiter becomes representative
// and is told to queue itself. An empty line is dropped.
func (c *Client) advanceLocked(key string, ln *line) {
	if ln.rep == nil && ln.holder == nil {
		if len(ln.queue) == 0 {
			delete(c.lines, key)
			return
		}
		ln.rep = ln.queue[0]
		ln.queue = ln.queue[1:]
		signal(ln.rep.recheck)
	}
}

func (c *Client) lineLocked(m *Mutex) *line {
	ln := c.lines[m.keyList[0]]
	if ln == nil {
		ln = &line{}
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

// deliver hands a pushed grant to its waiter, if it still waits.
func (c *Client) deliver(token string, g grant) {
	c.mu.Lock()
	w := c.waiters[token]
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
}
