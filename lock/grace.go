package lock

import (
	"context"
	"sync/atomic"
	"time"
)

// graceCtx is sendContext's context: parent's values, done replyGrace
// after parent, with no deadline (see noDeadline). The calls of a Client
// made with the same parent share one while it is the Client's last
// (Client.lastGrace): a context.AfterFunc per call would take the parent's
// mutex twice, which the goroutines of a pool or a server that share one
// context contend on.
type graceCtx struct {
	context.Context // WithoutCancel(parent): the values only
	parent          context.Context
	done            chan struct{}
	stop            func() bool // unregisters from parent
	release         func()      // g.leave, made once

	users   atomic.Int64 // calls using g
	evicted atomic.Bool  // no longer lastGrace: stop once unused
	stopped atomic.Bool
	ended   atomic.Bool
}

var _ context.Context = (*graceCtx)(nil)

func (*graceCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func (g *graceCtx) Done() <-chan struct{} { return g.done }

func (g *graceCtx) Err() error {
	select {
	case <-g.done:
		return context.Canceled
	default:
		return nil
	}
}

// sharedGrace returns the graceCtx of parent, which must have a Done
// channel, and the function the caller calls when done with it. Calls
// with contexts of their own (a request's) make one each, as
// context.WithCancel would; the last one keeps its parent (and its values)
// reachable until the Client's next call with another context.
func (c *Client) sharedGrace(parent context.Context) (context.Context, func()) {
	if g := c.lastGrace.Load(); g != nil && sameContext(g.parent, parent) && g.enter() {
		return g, g.release
	}
	g := &graceCtx{Context: context.WithoutCancel(parent), parent: parent, done: make(chan struct{})}
	g.release = g.leave
	g.users.Store(1)
	g.stop = context.AfterFunc(parent, func() { time.AfterFunc(replyGrace, g.end) })
	if old := c.lastGrace.Swap(g); old != nil {
		old.evict()
	}
	return g, g.release
}

// sameContext reports whether a and b are one context. Comparing two
// interfaces panics if both hold the same uncomparable type: such
// contexts are never shared.
func sameContext(a, b context.Context) (same bool) {
	defer func() { _ = recover() }()
	return a == b
}

// enter counts a call in, unless g was evicted.
func (g *graceCtx) enter() bool {
	g.users.Add(1)
	if g.evicted.Load() {
		g.leave()
		return false
	}
	return true
}

// leave counts a call out; the last one out of an evicted g stops it.
func (g *graceCtx) leave() {
	if g.users.Add(-1) == 0 && g.evicted.Load() {
		g.unregister()
	}
}

func (g *graceCtx) evict() {
	g.evicted.Store(true)
	if g.users.Load() == 0 {
		g.unregister()
	}
}

// unregister stops g's AfterFunc on its parent, so that a parent that
// lives on does not collect them; g ends then, as a context.WithCancel's
// child does when cancelled, for any call still holding it after leave.
func (g *graceCtx) unregister() {
	if g.stopped.CompareAndSwap(false, true) {
		g.stop()
		g.end()
	}
}

func (g *graceCtx) end() {
	if g.ended.CompareAndSwap(false, true) {
		close(g.done)
	}
}
