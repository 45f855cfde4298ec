package lock

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"
)

// Mutex is a named distributed lock. Get one from Client.Mutex; it is safe
// for concurrent use, and each Lock or TryLock call is a separate
// acquisition with its own owner token and fencing token.
type Mutex struct {
	client  *Client
	name    string
	cfg     mutexConfig
	keyList [3]string // lock hash, queue, fence (see scripts/common.lua)

	leaseArg     string // cfg.lease in ms
	settingsArg  string // the settings argument of the queue scripts
	retentionArg string // cfg.fenceRetention in ms
}

type mutexConfig struct {
	lease          time.Duration
	watchdog       bool
	fenceRetention time.Duration
	replicas       int           // WithReplicas: acknowledgements required
	replicaTimeout time.Duration // WithReplicas: how long WAIT waits
}

// MutexOption configures a Mutex.
type MutexOption func(*mutexConfig)

// WithLease gives each acquisition a fixed lease d: nothing renews it, so
// the lock expires d after it was obtained unless Extend is called, and
// Lost is closed then.
func WithLease(d time.Duration) MutexOption {
	return func(c *mutexConfig) { c.lease, c.watchdog = d, false }
}

// WithWatchdog keeps each acquisition alive while it is held by renewing its
// lease every lease/3 (the default, with lease 10s). If the holder's process
// dies, the lock expires at most lease later.
func WithWatchdog(lease time.Duration) MutexOption {
	return func(c *mutexConfig) { c.lease, c.watchdog = lease, true }
}

// WithFenceRetention sets how long Redis keeps the record of a lock's last
// fencing token after starting it from the Redis clock (default 24h, at
// least 1s). Tokens never go backwards when it is forgotten, as long as the
// Redis clock does not: see Lock.Fence.
func WithFenceRetention(d time.Duration) MutexOption {
	return func(c *mutexConfig) { c.fenceRetention = d }
}

// Name returns the name of the lock.
func (m *Mutex) Name() string { return m.name }

// TryLock makes one attempt to obtain the lock and returns ErrNotObtained if
// it is held, or if waiters are queued for it (they go first). If ctx
// carries a held Lock of this mutex (see Lock.Context), TryLock re-enters it.
// If Redis does not answer, it returns ctx.Err() as Lock does.
func (m *Mutex) TryLock(ctx context.Context) (*Lock, error) {
	l, err := m.tryLock(ctx)
	if err != nil || m.cfg.replicas == 0 {
		return l, err
	}
	return m.confirmReplicas(ctx, l)
}

func (m *Mutex) tryLock(ctx context.Context) (*Lock, error) {
	if l, err := m.reentry(ctx); l != nil || err != nil {
		return l, err
	}
	if busy, err := m.client.busy(m); err != nil || busy {
		return nil, cmp.Or(err, ErrNotObtained)
	}
	token := m.client.newToken()
	g, ok, err := m.runQueue(ctx, acquireScript, token, false, 1)
	if err != nil {
		m.cancel(ctx, token, 1) // the script may have run
		return nil, m.fail(ctx, "acquire", err)
	}
	if !ok {
		return nil, ErrNotObtained
	}
	if !m.fresh(ctx, token, &g) {
		m.cancel(ctx, token, 1) // the grant ran out before its reply came
		return nil, ErrNotObtained
	}
	return m.take(ctx, nil, token, g), nil
}

// Lock obtains the lock, waiting until it is free or ctx is done; then it
// returns ctx.Err(), within 200ms of ctx's end whatever Redis does (see
// the package doc, Contexts). Waiters are served in turns (Fairness). If
// ctx carries a held Lock of this mutex (see Lock.Context), Lock re-enters
// it and returns the same handle.
func (m *Mutex) Lock(ctx context.Context) (*Lock, error) {
	l, err := m.lock(ctx)
	if err != nil || m.cfg.replicas == 0 {
		return l, err
	}
	return m.confirmReplicas(ctx, l)
}

func (m *Mutex) lock(ctx context.Context) (_ *Lock, err error) {
	if l, err := m.reentry(ctx); l != nil || err != nil {
		return l, err
	}
	defer m.client.stats.timeLock(time.Now(), &err)
	w, rep, err := m.client.join(ctx, m)
	if err != nil {
		return nil, err
	}
	if rep {
		g, ok, err := m.runQueue(ctx, acquireScript, w.token, true, w.block)
		if err != nil {
			m.leave(ctx, w) // the script may have run
			return nil, m.fail(ctx, "acquire", err)
		}
		if ok && m.fresh(ctx, w.token, &g) {
			return m.take(ctx, w, w.token, g), nil
		}
		if ok {
			signal(w.recheck) // the grant ran out before its reply came: queue at once
		}
	}
	return m.wait(ctx, w)
}

// wait blocks a waiter until the lock is handed to it: within its Client,
// by a push, or found by a check after a resubscribe or a jittered
// fallback delay. Only the representative checks in Redis; the others wait
// for their turn.
func (m *Mutex) wait(ctx context.Context, w *waiter) (*Lock, error) {
	c := m.client
	t := time.NewTimer(c.fallback())
	defer t.Stop()
	for {
		select {
		case g := <-w.grants:
			if g.lock != nil {
				return g.lock, nil
			}
			if m.fresh(ctx, w.token, &g) {
				return m.take(ctx, w, w.token, g), nil
			}
			// The late grant's lease ran out, or Redis did not say: the
			// check below finds out, and queues w again if need be.
		case <-w.recheck:
		case <-t.C:
		case <-ctx.Done():
			m.leave(ctx, w)
			return nil, ctx.Err()
		case <-c.ctx.Done():
			m.leave(ctx, w)
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil { // ended as a grant, the timer or a recheck came
			m.leave(ctx, w)
			return nil, err
		}
		t.Reset(c.fallback())
		if !c.isRep(w) {
			c.nudge(w)
			continue
		}
		block, pending := c.beforeCheck(w)
		if pending != nil {
			// A release is handing the lock to w, or queueing it in Redis:
			// a check now could queue w beside that grant. The outcome
			// comes as a grant, a recheck, or (queued) a push.
			select {
			case <-pending:
			case <-ctx.Done():
			case <-c.ctx.Done():
			}
			continue
		}
		g, ok, err := m.runQueue(ctx, checkScript, w.token, true, block)
		if err == nil && ok {
			if m.fresh(ctx, w.token, &g) {
				return m.take(ctx, w, w.token, g), nil
			}
			signal(w.recheck) // the grant ran out before its reply came: queue at once
		}
		// On an error keep waiting: the next check may get through, and
		// ctx bounds the wait.
	}
}

// fresh reports whether grant g to token, from a script's reply or a push,
// may be taken as it is: a third of its lease is known to be left, as a
// turn requires before a handoff, or Redis confirms it is still token's
// with g's fence. A reply or push held up past most of the lease may
// carry a grant that ran out, and the lock moved on.
func (m *Mutex) fresh(ctx context.Context, token string, g *grant) bool {
	return leaseLeft(time.Now(), g.sent.Add(g.ttl), g.ttl) || m.confirm(ctx, token, g)
}

// confirm makes sure, with one round trip, that the lock granted to token
// by g is still token's under g's fence, and sets the mutex's lease on it.
// On success g's lease estimate is replaced by the one just set.
func (m *Mutex) confirm(ctx context.Context, token string, g *grant) bool {
	sctx, cancel := m.client.sendContext(ctx)
	defer cancel()
	sent := time.Now()
	args := []string{token, m.leaseArg, strconv.FormatInt(g.fence, 10)}
	n, err := execScript(sctx, extendScript, m.client, m.keyList[:1], args).AsInt64()
	if err != nil || n != 1 {
		return false
	}
	g.sent, g.ttl, g.pushed = sent, m.cfg.lease, false
	return true
}

// leave takes a waiter that gives up out of its line and, if it was queued
// in Redis, out of the Redis queue, so that no entry is left behind; if the
// lock was handed to it meanwhile, the cancel script passes it on, or, if
// it was handed over within the Client, an Unlock. The Redis part is
// waited for at most replyGrace (see cleanUp).
func (m *Mutex) leave(ctx context.Context, w *waiter) {
	pending, wasRep, granted := m.client.leave(w)
	switch {
	case granted != nil:
		cleanUp(ctx, func(ctx context.Context) { _ = granted.Unlock(ctx) })
	case wasRep:
		cleanUp(ctx, func(ctx context.Context) {
			if pending != nil {
				select { // the release that enqueues w must run before w's cancel
				case <-pending:
				case <-ctx.Done():
					return // the entry expires (see cancel)
				}
			}
			m.cancelNow(ctx, w.token, w.block)
		})
	}
}

// cancel runs the cancel script for token, queued with block, waiting for
// it at most replyGrace (see cleanUp).
func (m *Mutex) cancel(ctx context.Context, token string, block int) {
	cleanUp(ctx, func(ctx context.Context) { m.cancelNow(ctx, token, block) })
}

// cancelNow runs the cancel script for token, queued with block. If Redis
// is unreachable, an entry left behind expires with its queue, or, if the
// lock is handed to it, with the handoff lease; a lock granted to it by an
// acquire script, with the mutex's lease.
func (m *Mutex) cancelNow(ctx context.Context, token string, block int) {
	_ = execScript(ctx, cancelScript, m.client, m.keys(), m.queueArgs(token, false, block)).Error()
}

// fail returns ctx.Err() if ctx is done, else err (a Redis or connection
// error) wrapped with context.
func (m *Mutex) fail(ctx context.Context, op string, err error) error {
	return opError(ctx, op, m.name, err)
}

// opError returns ctx.Err() if ctx is done, else err from op on the lock
// called name, wrapped with both.
func opError(ctx context.Context, op, name string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return fmt.Errorf("lock: %s %q: %w", op, name, err)
}

// reentry re-enters and returns the held Lock of this mutex that ctx
// carries, if any; otherwise it returns ctx's error, if any.
func (m *Mutex) reentry(ctx context.Context) (*Lock, error) {
	if l := m.heldIn(ctx); l != nil {
		if err := l.Reenter(ctx); err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, ctx.Err()
}

// heldIn returns the held Lock of this mutex that ctx carries, if any.
func (m *Mutex) heldIn(ctx context.Context) *Lock {
	l, _ := ctx.Value(ctxKey{}).(*Lock)
	for ; l != nil; l = l.outer {
		if l.m.client == m.client && l.m.name == m.name && l.isHeld() {
			return l
		}
	}
	return nil
}

// busy reports whether this client holds m's lock or has a waiter queued
// for it, or returns ErrClosed.
func (c *Client) busy(m *Mutex) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, ErrClosed
	}
	ln := c.lines[m.keyList[0]]
	return ln != nil && (ln.holder != nil || ln.rep != nil), nil
}
