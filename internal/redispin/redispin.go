// Package redispin wraps a rueidis client so that rueidis never puts a
// command it may retry back in its pool: a command a broken connection
// may still read is never reused. It costs, for retryable commands only,
// the one allocation the pool would have saved.
package redispin

// What rueidis v1.0.79 does, to check in a new release:
//
//   - singleClient.Do (client.go) retries a retryable command (read-only,
//     or ToRetryable, as Lua scripts made with NewLuaScriptRetryable are)
//     after a network error, and once a try is answered without one calls
//     cmds.PutCompleted: the command's buffer goes back to a sync.Pool and
//     the next Builder writes into it. singleClient.DoMulti does the same
//     for a batch of retryable commands.
//   - The connection that broke may still read the command: its writer
//     (pipe._backgroundWrite, pipe.go) takes it from the ring
//     (ring.NextWriteCmd, which releases the slot) and then reads
//     cmd.Commands(), while its cleanup (pipe._background) answers that
//     slot with the connection's error (ring.NextResultCh) before the
//     writer has exited. Nothing orders that read before the reuse.
//
// So -race reports cmds.(*Completed).Commands in _backgroundWrite against
// a Builder or cmds.Put, and the dead connection may write another
// command's arguments. A pinned command (Completed.Pin) is never put
// back. TestRueidisStillRecyclesRetriedCommands reproduces the race on an
// unwrapped client and fails once rueidis no longer has it; Wrap can go
// then.
//
// Wrap covers Do and DoMulti, and the node clients of Nodes, through which
// Lua's ExecMulti sends its SCRIPT LOAD. A dedicated connection retries
// only while it is up, so Dedicated and Dedicate need nothing.

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
