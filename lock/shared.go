package lock

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// sharedLock is the engine of RWMutex and Semaphore: a name whose holders
// share its permits in Redis, a shared hold taking one and an exclusive
// hold all (see DESIGN.md, "RWMutex and Semaphore"). Its waiters are
// Client.waiters with a nil Mutex, woken by the same subscriber.
type sharedLock struct {
	client   *Client
	name     string
	keys     []string // holders, owner, queue, alive, fence, permits
	cfg      mutexConfig
	settings string // ARGV[2]
	leaseArg string // ARGV[3]
	permits  string // ARGV[6]: the permits a Semaphore starts from, "0" for none
}

// The kinds of hold (ARGV[4]).
const (
	sharedHold    = "s"
	exclusiveHold = "x"
)

var (
	sharedAcquireScript = sharedScript("shared_acquire.lua")
	sharedReleaseScript = sharedScript("shared_release.lua")
	sharedRenewScript   = sharedScript("shared_renew.lua")
	sharedPermitsScript = sharedScript("shared_permits.lua")
)

// sharedScript returns script name with scripts/shared_common.lua
// included. Every shared script is harmless to run twice, so retryable.
func sharedScript(name string) *rueidis.Lua {
	return rueidis.NewLuaScriptRetryable(includeSource(name, "shared_common.lua"))
}

// newShared returns the engine of name with keys <lock key>:<kind>..., and
// permits (0: no limit).
func (c *Client) newShared(name, kind string, permits int, opts []MutexOption) sharedLock {
	cfg := c.defaults.cfg
	for _, o := range opts {
		o(&cfg)
	}
	cfg.lease = max(cfg.lease, 3*time.Millisecond)
	cfg.fenceRetention = max(cfg.fenceRetention, time.Second)
	base := lockKey(c.cfg.prefix, name) + ":" + kind
	return sharedLock{
		client:   c,
		name:     name,
		keys:     []string{base, base + ":x", base + ":q", base + ":a", base + ":f", base + ":n"},
		cfg:      cfg,
		settings: c.settingsArg(cfg.fenceRetention),
		leaseArg: ms(cfg.lease),
		permits:  strconv.Itoa(permits),
	}
}

// run runs script for token with lease (ms) and the kind of hold, and
// decodes a grant (ok) or 0. The grant's sent is when the script was sent.
func (s *sharedLock) run(ctx context.Context, script *rueidis.Lua, token, kind, lease string, wait bool) (g grant, ok bool, err error) {
	sctx, cancel := s.client.sendContext(ctx)
	defer cancel()
	sent := time.Now()
	args := []string{token, s.settings, lease, kind, flag(wait), s.permits}
	v, err := execScript(sctx, script, s.client, s.keys, args).ToMessage()
	if err != nil || v.IsInt64() {
		return grant{}, false, err
	}
	g, err = decodeGrant(v)
	g.sent = sent
	return g, err == nil, err
}

// acquire obtains a hold of kind, waiting for it if wait is set.
func (s *sharedLock) acquire(ctx context.Context, kind string, wait bool) (*hold, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := s.client
	token := c.newToken()
	var w *waiter
	if wait {
		w = &waiter{token: token, ctx: ctx, grants: make(chan grant, 1), recheck: make(chan struct{}, 1)}
	}
	if err := c.addWaiter(w); err != nil {
		return nil, err
	}
	g, ok, err := s.run(ctx, sharedAcquireScript, token, kind, s.leaseArg, wait)
	switch {
	case err != nil:
		s.giveUp(ctx, w, token, kind) // the script may have run
		return nil, opError(ctx, "acquire", s.name, err)
	case ok && s.fresh(ctx, token, kind, &g):
		c.dropWaiter(w)
		return s.newHold(ctx, token, kind, g), nil
	case !wait:
		if ok {
			s.giveUp(ctx, nil, token, kind) // the grant ran out before its reply came
		}
		return nil, ErrNotObtained
	case ok:
		signal(w.recheck) // the grant ran out before its reply came: queue at once
	}
	return s.wait(ctx, w, kind)
}

// wait blocks queued waiter w until it is granted a hold of kind: by a
// push, or found by a check after a resubscribe or a fallback delay.
func (s *sharedLock) wait(ctx context.Context, w *waiter, kind string) (*hold, error) {
	c := s.client
	t := time.NewTimer(c.fallback())
	defer t.Stop()
	for {
		select {
		case g := <-w.grants:
			if s.fresh(ctx, w.token, kind, &g) {
				c.dropWaiter(w)
				return s.newHold(ctx, w.token, kind, g), nil
			}
			// The late grant ran out: the check below queues w again.
		case <-w.recheck:
		case <-t.C:
		case <-ctx.Done():
			s.giveUp(ctx, w, w.token, kind)
			return nil, ctx.Err()
		case <-c.ctx.Done():
			s.giveUp(ctx, w, w.token, kind)
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil { // ended as a grant, the timer or a recheck came
			s.giveUp(ctx, w, w.token, kind)
			return nil, err
		}
		t.Reset(c.fallback())
		g, ok, err := s.run(ctx, sharedAcquireScript, w.token, kind, s.leaseArg, true)
		if err == nil && ok {
			if s.fresh(ctx, w.token, kind, &g) {
				c.dropWaiter(w)
				return s.newHold(ctx, w.token, kind, g), nil
			}
			signal(w.recheck)
		}
		// On an error keep waiting: the next check may get through, and
		// ctx bounds the wait.
	}
}

// fresh reports whether grant g to token may be taken as it is: a third of
// its lease is known to be left, or Redis confirms token still holds and
// sets the full lease (then g is updated).
func (s *sharedLock) fresh(ctx context.Context, token, kind string, g *grant) bool {
	if leaseLeft(time.Now(), g.sent.Add(g.ttl), g.ttl) {
		return true
	}
	sctx, cancel := s.client.sendContext(ctx)
	defer cancel()
	sent := time.Now()
	ok, err := s.renew(sctx, token, kind, s.cfg.lease)
	if err != nil || !ok {
		return false
	}
	g.sent, g.ttl = sent, s.cfg.lease
	return true
}

// renew sets token's lease to d if it still holds.
func (s *sharedLock) renew(ctx context.Context, token, kind string, d time.Duration) (bool, error) {
	args := []string{token, s.settings, ms(d), kind, "0", s.permits}
	n, err := execScript(ctx, sharedRenewScript, s.client, s.keys, args).AsInt64()
	return n == 1, err
}

// release drops token's hold or its place in the queue, and reports
// whether it held.
func (s *sharedLock) release(ctx context.Context, token, kind string) (bool, error) {
	args := []string{token, s.settings, s.leaseArg, kind, "0", s.permits}
	sctx, cancel := s.client.sendContext(ctx)
	defer cancel()
	n, err := execScript(sctx, sharedReleaseScript, s.client, s.keys, args).AsInt64()
	return n == 1, err
}

// giveUp forgets waiter w (if any) and takes token out of Redis, hold and
// queue, waiting for it at most replyGrace (see cleanUp). If Redis cannot
// be reached, what is left expires: a queue entry once nobody checks it
// in, a hold with its lease.
func (s *sharedLock) giveUp(ctx context.Context, w *waiter, token, kind string) {
	s.client.dropWaiter(w)
	cleanUp(ctx, func(ctx context.Context) { _, _ = s.release(ctx, token, kind) })
}

// addWaiter registers w (if any) for pushes, or returns ErrClosed. A push
// to w carries a lease that lasts at least that long from now.
func (c *Client) addWaiter(w *waiter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if w != nil {
		w.queuedAt = time.Now()
		c.waiters[w.token] = w
	}
	return nil
}

// dropWaiter unregisters w, if any.
func (c *Client) dropWaiter(w *waiter) {
	if w == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waiters, w.token)
}

// heldIn returns the held hold of s that ctx carries (see hold.Context).
func (s *sharedLock) heldIn(ctx context.Context) *hold {
	h, _ := ctx.Value(holdKey{}).(*hold)
	for ; h != nil; h = h.outer {
		if h.s.client == s.client && h.s.keys[0] == s.keys[0] && h.isHeld() {
			return h
		}
	}
	return nil
}
