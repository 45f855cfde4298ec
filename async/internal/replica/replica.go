// Package replica holds the WAIT of durability replica, shared by the gate
// (async), the consumers (async/consume) and the returns (async/returns):
// on one Redis connection, the writes to cover, then a SET of the
// voucher's sync key, then WAIT.
//
// WAIT numreplicas timeout blocks until the replicas have acknowledged
// every write its connection made before it. It cannot run inside a
// script, and on another connection it waits for nothing, so the writes
// and the WAIT go on one dedicated connection (rueidis sends WAIT, a
// blocking command, on a pooled connection of its own rather than the
// shared pipeline, and a WAIT there would stall everyone behind it).
//
// The SET moves the connection's replication offset past everything Redis
// had executed when it ran: writes made on other connections (the gate's
// orders a consumer read, an order a duplicate answer reveals, a return a
// crashed attempt made) are covered too, since Redis replicates in the
// order it executes, and so is a round whose own writes wrote nothing. A
// primary that refuses writes (NOREPLICAS) or is a replica now (READONLY)
// fails the SET: not replicated either.
package replica

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// syncTTL is the sync key's lifetime in seconds: it only needs to be
// written.
const syncTTL = 3600

// Wait is a wait for Replicas replicas, within Timeout, of what Redis has
// executed, through a SET of Key (the voucher's sync key,
// layout.VoucherKeys.Sync).
type Wait struct {
	Key      string
	Replicas int
	Timeout  time.Duration
}

// Round sends cmds, then the SET and the WAIT, on dc in one round trip. It
// returns the replies to cmds, and nil when at least Replicas replicas
// acknowledged within Timeout; else the SET's error or the WAIT's as
// Redis answered it (a caller may look for a cluster redirect with
// rueidis.IsRedisErr), or an error saying how many replicas acknowledged.
func (w Wait) Round(ctx context.Context, dc rueidis.DedicatedClient, cmds ...rueidis.Completed) ([]rueidis.RedisResult, error) {
	n := len(cmds)
	cmds = append(cmds[:n:n],
		dc.B().Set().Key(w.Key).Value("1").ExSeconds(syncTTL).Build(),
		// A timeout of 0 would block for ever: at least 1 ms.
		dc.B().Wait().Numreplicas(int64(w.Replicas)).Timeout(max(w.Timeout.Milliseconds(), 1)).Build())
	res := dc.DoMulti(ctx, cmds...)
	if err := res[n].Error(); err != nil {
		return res[:n], err
	}
	acked, err := res[n+1].AsInt64()
	if err == nil && acked < int64(w.Replicas) {
		err = fmt.Errorf("%d of %d replicas acknowledged within %v", acked, w.Replicas, w.Timeout)
	}
	return res[:n], err
}

// Do is Round on a dedicated connection of client; cmds may be built with
// client.B(). An error taking the connection is returned as it is.
func (w Wait) Do(ctx context.Context, client rueidis.Client, cmds ...rueidis.Completed) (res []rueidis.RedisResult, err error) {
	derr := client.Dedicated(func(dc rueidis.DedicatedClient) error {
		res, err = w.Round(ctx, dc, cmds...)
		return nil
	})
	if derr != nil {
		return nil, derr
	}
	return res, err
}
