package lock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// When a call may wait for rueidis in its own goroutine.
//
// await runs each command in a goroutine of its own, because rueidis
// ignores the context while it dials a connection and greets the server,
// or waits for another caller who does, and while a connection has
// ringSlots commands waiting for replies. That goroutine, and the extra
// wake-up, is about 15% of the CPU of an uncontended Lock+Unlock. On a
// connection that has answered just now, neither happens: the connection
// is up, and rueidis waits for the reply on the context's Done (sendContext
// hides its deadline). So a command is sent from the caller's goroutine
// when the Client's health says so:
//
//   - a reply came within directWindow, and no call has ended without one
//     since (a lost connection, Redis stopped past a call's context): the
//     connection is up, and a stall has gone on for directWindow at most,
//     too short for the ring of a connection to fill or for rueidis's
//     keep-alive (ConnWriteTimeout, 10s by default) to drop it;
//   - directStreak replies came in a row since the Client was made or a
//     call ended without one: rueidis spreads a Client's commands over a
//     few connections (PipelineMultiplex) and dials each at its first use,
//     or its first use after it broke, so a Client's first replies may come
//     on one connection while another has yet to be dialled;
//   - fewer than directInFlight commands are under way that way, so that
//     ours cannot fill a connection's ring (1024 by default) while Redis
//     stalls;
//   - the client is not a Redis Cluster client, whose nodes' connections
//     are dialled and dropped independently: one node's replies say nothing
//     about another's.
//
// What this leaves: a connection that breaks and must be dialled again
// (or one never used in directStreak replies) at the moment Redis stalls,
// or another user of the same rueidis client filling a connection's ring
// within directWindow of a stall; a direct call then waits as rueidis
// does, up to its Dialer timeout (5s by default) or until the stall ends.
const (
	directWindow   = 10 * time.Millisecond
	directStreak   = 64
	directInFlight = 128
)

// health is what a Client knows of its connections (see directWindow).
type health struct {
	off       bool         // never direct (a cluster client)
	lastReply atomic.Int64 // nanoseconds since healthEpoch; 0 once a call ended without a reply
	streak    atomic.Int64 // replies since the last call that ended without one, up to directStreak
	inFlight  atomic.Int64 // direct commands under way
}

// healthEpoch is the origin of health's clock: time.Since reads the
// monotonic clock.
var healthEpoch = time.Now()

// direct reports whether a command may be sent from the caller's goroutine.
func (h *health) direct() bool {
	if h.off || h.streak.Load() < directStreak || h.inFlight.Load() >= directInFlight {
		return false
	}
	last := h.lastReply.Load()
	return last != 0 && int64(time.Since(healthEpoch))-last < int64(directWindow)
}

// record takes note of a command's result.
func (h *health) record(r rueidis.RedisResult) {
	if r.NonRedisError() != nil { // no reply: a lost connection, or a context that ended
		h.lastReply.Store(0)
		h.streak.Store(0)
		return
	}
	// Stores only when they change something, or by a millisecond: the
	// goroutines of a busy Client all record, and a store takes the cache
	// line from the other cores.
	if now := int64(time.Since(healthEpoch)); now-h.lastReply.Load() >= int64(time.Millisecond) {
		h.lastReply.Store(now)
	}
	if h.streak.Load() < directStreak {
		h.streak.Add(1)
	}
}

// enter reports whether a command with ctx may be sent from the caller's
// goroutine, and if so counts it in; the caller calls leave with its
// result.
func (h *health) enter(ctx context.Context) bool {
	if ctx.Done() != nil && (ctx.Err() != nil || !h.direct()) {
		return false
	}
	h.inFlight.Add(1)
	return true
}

// leave counts a command sent after enter out, and returns its result r.
func (h *health) leave(r rueidis.RedisResult) rueidis.RedisResult {
	h.inFlight.Add(-1)
	h.record(r)
	return r
}

// call returns f(ctx), a command sent with ctx, but returns ctx's error
// as soon as ctx ends (see await), from the caller's goroutine when the
// Client's health allows.
func (c *Client) call(ctx context.Context, f func(context.Context) rueidis.RedisResult) rueidis.RedisResult {
	h := &c.health
	if h.enter(ctx) {
		return h.leave(f(ctx))
	}
	r := await(ctx, func() rueidis.RedisResult {
		r := f(ctx)
		h.record(r)
		return r
	}, rueidis.NewErrorResult)
	if r.NonRedisError() != nil {
		h.record(r) // given up on: whatever the command does, the Client waits for a reply again
	}
	return r
}
