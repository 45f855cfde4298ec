// Package redispin wraps a rueidis client so that a command it may retry
// is never reused while a broken connection still reads it.
//
// rueidis (v1.0.79) builds commands in pooled buffers and puts a command
// back in the pool once Do answers it without a network error. A
// retryable command (read-only, or marked retryable, as the lock's
// idempotent scripts are) that was taken by a connection which then broke
// is answered with that error by the connection's reader, retried on
// another connection, answered there, and recycled, while the broken
// connection's writer goroutine may still be reading it: nothing orders
// that read before the recycling. The race detector reports it
// (TestRetriedCommandsAreNotRecycled, run on the client unwrapped, failed
// one run in two, with 12 reports), and a buffer reused by then is what
// the dead connection would write. A pinned command is never put back,
// so the late read sees the command it took; it costs the one allocation
// the pool would have saved, and only for retryable commands.
//
// Wrap covers Do and DoMulti, and the node clients of Nodes, through which
// Lua's ExecMulti sends its SCRIPT LOAD. A dedicated connection retries
// only while it is up, so Dedicated and Dedicate need nothing.
package redispin

import (
	"context"

	"github.com/redis/rueidis"
)

// client is a rueidis.Client whose Do and DoMulti pin retryable commands.
type client struct{ rueidis.Client }

var _ rueidis.Client = client{}

// Wrap returns rc with its retryable commands pinned (see the package
// comment). It returns rc itself when it is already wrapped.
func Wrap(rc rueidis.Client) rueidis.Client {
	if _, ok := rc.(client); ok {
		return rc
	}
	return client{rc}
}

// Do is rueidis.Client.Do with cmd pinned if it is retryable.
func (c client) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return c.Client.Do(ctx, pin(cmd))
}

// DoMulti is rueidis.Client.DoMulti with each retryable command pinned.
func (c client) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	for i := range multi {
		multi[i] = pin(multi[i])
	}
	return c.Client.DoMulti(ctx, multi...)
}

// Nodes is rueidis.Client.Nodes with every node's client wrapped: Lua's
// ExecMulti sends its SCRIPT LOAD, which it marks retryable, through them.
func (c client) Nodes() map[string]rueidis.Client {
	nodes := c.Client.Nodes()
	for addr, n := range nodes {
		nodes[addr] = Wrap(n)
	}
	return nodes
}

func pin(cmd rueidis.Completed) rueidis.Completed {
	if cmd.IsRetryable() {
		return cmd.Pin()
	}
	return cmd
}
