package lock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// When a command may be sent from the caller's goroutine, without await's
// goroutine (about 15% of the CPU of an uncontended Lock+Unlock): a reply
// came within directWindow and no call has ended without one since, the
// last directStreak replies came in a row, fewer than directInFlight such
// commands are under way, and the client is not a Redis Cluster client.
// Why each, and the gap left, is in DESIGN.md ("Contexts and a silent
// Redis").
const (
	directWindow   = 10 * time.Millisecond
	directStreak   = 64
	directInFlight = 128
)

// health is what a Client knows of its connections (see directWindow).
type health struct {
	off       bool         // never direct (a cluster client)
	epoch     time.Time    // the origin of lastReply: time.Since reads the monotonic clock
	lastReply atomic.Int64 // nanoseconds since epoch; 0 once a call ended without a reply
	streak    atomic.Int64 // replies since the last call that ended without one, up to directStreak
	inFlight  atomic.Int64 // direct commands under way
}

// direct reports whether a command may be sent from the caller's goroutine.
func (h *health) direct() bool {
	if h.off || h.streak.Load() < directStreak || h.inFlight.Load() >= directInFlight {
		return false
	}
	last := h.lastReply.Load()
	return last != 0 && int64(time.Since(h.epoch))-last < int64(directWindow)
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
	if now := int64(time.Since(h.epoch)); now-h.lastReply.Load() >= int64(time.Millisecond) {
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
// as soon as ctx ends (see await), and at once if it has ended: then
// nothing is sent. A command that was not sent (see notSent) is sent once
// more.
func (c *Client) call(ctx context.Context, f func(context.Context) rueidis.RedisResult) rueidis.RedisResult {
	if err := ctx.Err(); err != nil {
		return rueidis.NewErrorResult(err)
	}
	r := c.send(ctx, f)
	if notSent(ctx, r) {
		r = c.send(ctx, f)
	}
	return r
}

// notSent reports whether r failed, with ctx alive, on a context's error:
// another context's, under which the connection r's command waited for was
// being dialled. rueidis dials with the context of the command that found
// the connection missing, and answers every command waiting for the dial
// with its error; so that command was never sent, and may be sent again
// even if it is not idempotent.
func notSent(ctx context.Context, r rueidis.RedisResult) bool {
	err := r.NonRedisError()
	return err != nil && ctx.Err() == nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// send is call's f(ctx) once, from the caller's goroutine when the
// Client's health allows.
func (c *Client) send(ctx context.Context, f func(context.Context) rueidis.RedisResult) rueidis.RedisResult {
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
