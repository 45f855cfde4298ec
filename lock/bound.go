package lock

import (
	"context"
	"slices"
	"time"

	"github.com/redis/rueidis"
)

// How long a call waits for Redis once its context has ended: a script
// sent before the end is waited for replyGrace more, then given up; the
// cleanup that follows is waited for replyGrace too, and goes on in the
// background for at most cleanupTimeout. Nothing is sent once the context
// has ended. See DESIGN.md, "Contexts and a silent Redis".
const (
	replyGrace     = 100 * time.Millisecond
	cleanupTimeout = time.Second
)

// sendContext returns the context a script is sent with, and a function
// the caller must call when done with it: ctx's values, ending replyGrace
// after ctx, with no deadline (see noDeadline). A ctx that has ended
// already is returned as it is: Client.call sends nothing with it.
func (c *Client) sendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil || ctx.Err() != nil {
		return ctx, noop
	}
	return c.sharedGrace(ctx)
}

func noop() {}

// ownGrace is sendContext's context for one call.
func ownGrace(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(replyGrace, cancel) })
	return sctx, func() { stop(); cancel() }
}

// sendBefore is sendContext, ended at deadline at the latest.
func sendBefore(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	switch {
	case ctx.Done() == nil:
		return within(ctx, deadline)
	case ctx.Err() != nil:
		return ctx, noop
	}
	sctx, cancel := ownGrace(ctx) // a cancelCtx: within registers with it, with no goroutine
	dctx, stop := within(sctx, deadline)
	return dctx, func() { stop(); cancel() }
}

// within returns a context that ends at deadline, or with parent, and
// does not report its deadline (see noDeadline).
func within(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(parent, deadline)
	return noDeadline{ctx}, cancel
}

// noDeadline hides the deadline of its context from rueidis, which waits
// for a command that has one by setting it on its connection (while the
// connection is not pipelining) and then misses an earlier cancellation:
// the watchdog's renewal aborted by a release, a call whose context ended.
// Without one, rueidis waits on Done.
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// cleanUp runs f, which undoes in Redis what a call that gave up may have
// done, with a context of its own that ends after cleanupTimeout, and
// waits for it at most replyGrace: on a live Redis it is done by then, and
// on a dead one it does not hold the caller up. f must not touch state the
// caller relies on once cleanUp returns.
func cleanUp(ctx context.Context, f func(context.Context)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		f(cctx)
	}()
	t := time.NewTimer(replyGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// gate is a mutex that a caller can stop waiting for when its context
// ends. Make it with newGate.
type gate chan struct{}

func newGate() gate { return make(gate, 1) }

func (g gate) lock() { g <- struct{}{} }

func (g gate) unlock() { <-g }

// lockCtx locks g, or returns ctx.Err() if ctx ends first.
func (g gate) lockCtx(ctx context.Context) error {
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits until whoever holds g lets it go: a renewal in flight, which
// must not run after a release.
func (g gate) await() {
	g.lock()
	g.unlock()
}

// execScript is s.Exec(ctx, c.rc, keys, args), but returns ctx's error as
// soon as ctx ends (see Client.call).
func execScript(ctx context.Context, s *rueidis.Lua, c *Client, keys, args []string) rueidis.RedisResult {
	direct := c.health.enter(ctx)
	if direct {
		// No closure: keys and args, which a closure would capture, stay
		// on the caller's stack.
		r := c.health.leave(s.Exec(ctx, c.rc, keys, args))
		if !notSent(ctx, r) {
			return r
		}
	}
	k, a := slices.Clone(keys), slices.Clone(args)
	f := func(ctx context.Context) rueidis.RedisResult { return s.Exec(ctx, c.rc, k, a) }
	if direct {
		return c.send(ctx, f) // once more, as Client.call does
	}
	return c.call(ctx, f)
}

// do is c.rc.Do(ctx, cmd), but returns ctx's error as soon as ctx ends
// (see Client.call).
func do(ctx context.Context, c *Client, cmd rueidis.Completed) rueidis.RedisResult {
	return c.call(ctx, func(ctx context.Context) rueidis.RedisResult { return c.rc.Do(ctx, cmd) })
}

// await returns f(), or fail(ctx.Err()) as soon as ctx ends; if ctx has
// ended already, f is not run. rueidis honours ctx while a command waits
// in a pipeline, but not while it dials and greets a new connection for
// it (for up to its Dialer's timeout, 5s by default, against a stopped
// server), or waits for another caller who does. f goes on alone then;
// rueidis sends nothing for a ctx that has ended.
func await[T any](ctx context.Context, f func() T, fail func(error) T) T {
	if ctx.Done() == nil {
		return f()
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	res := make(chan T, 1)
	go func() { res <- f() }()
	select {
	case r := <-res:
		return r
	case <-ctx.Done():
		select {
		case r := <-res: // both ready: the result is worth more
			return r
		default:
			return fail(ctx.Err())
		}
	}
}
