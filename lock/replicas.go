package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// ErrNotReplicated is returned by Lock, TryLock and Extend of a Mutex with
// WithReplicas when fewer replicas than required acknowledged the
// acquisition (or the new lease) in time. Lock and TryLock leave nothing
// held then.
var ErrNotReplicated = errors.New("lock: not confirmed by enough replicas")

// WithReplicas makes the lock survive a failover of its Redis primary
// (Sentinel, or a Cluster shard): Lock and TryLock return only once n
// replicas have acknowledged the acquisition, waiting at most timeout
// (Redis WAIT), and watchdog renewals and Extend count only once n
// replicas have acknowledged them. A promoted replica then has the lock
// and its fencing tokens for as long as the holder believes it holds it.
//
// If the replicas do not acknowledge an acquisition in time, Lock releases
// it and returns ErrNotReplicated. A renewal they do not acknowledge is
// retried like one Redis did not answer: if none is acknowledged before the
// lease the replicas are known to have runs out, the lock is lost (Lost,
// Context). Every acquisition, also one handed over within the Client,
// costs one more round trip, and WAIT's time.
//
// Replication being asynchronous, WAIT does not make Redis strongly
// consistent: a failover may still promote a replica that did not
// acknowledge, if fewer than n replicas remain. Pick n so that every
// replica that may be promoted is counted (for one replica, n = 1).
func WithReplicas(n int, timeout time.Duration) MutexOption {
	return func(c *mutexConfig) { c.replicas, c.replicaTimeout = n, max(timeout, time.Millisecond) }
}

// syncTTL is how long the key written before WAIT lives: it only needs to
// be written.
const syncTTL = 10 * time.Second

// confirmReplicas returns l once the replicas acknowledged its
// acquisition, or releases it and returns ErrNotReplicated.
func (m *Mutex) confirmReplicas(ctx context.Context, l *Lock) (*Lock, error) {
	err := m.replicate(ctx)
	if err == nil {
		return l, nil
	}
	cleanUp(ctx, func(ctx context.Context) { _ = l.Unlock(ctx) }) // if Redis is gone, the lease ends it
	return nil, err
}

// replicate returns nil once m.cfg.replicas replicas have acknowledged
// every write Redis executed before it was called.
//
// WAIT counts the acknowledgements of the writes of its own connection
// only, and on a connection that wrote nothing it waits for nothing. The
// acquisition may have been written by another connection, even another
// Client's (a pushed grant), so replicate writes a key under the lock's
// hash tag and sends WAIT behind it, on one dedicated connection (rueidis
// sends WAIT, a blocking command, on a pooled connection of its own, not
// after the SET on the shared pipeline). Redis replicates in the order it
// executes: a replica that has the SET has the acquisition too.
func (m *Mutex) replicate(ctx context.Context) error {
	n, timeout := m.cfg.replicas, m.cfg.replicaTimeout
	ctx, cancel := sendBefore(ctx, time.Now().Add(timeout+2*time.Second))
	defer cancel()
	acked, err := await(ctx, func() rueidis.RedisResult {
		var wait rueidis.RedisResult
		err := m.client.rc.Dedicated(func(dc rueidis.DedicatedClient) error {
			res := dc.DoMulti(ctx,
				dc.B().Set().Key(m.keyList[0]+":w").Value("1").Px(syncTTL).Build(),
				dc.B().Wait().Numreplicas(int64(n)).Timeout(timeout.Milliseconds()).Build())
			wait = res[1]
			return res[0].Error()
		})
		if err != nil {
			return rueidis.NewErrorResult(err)
		}
		return wait
	}, rueidis.NewErrorResult).AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %q: %w", ErrNotReplicated, m.name, err)
	case acked < int64(n):
		return fmt.Errorf("%w: %q: %d of %d replicas acknowledged within %v", ErrNotReplicated, m.name, acked, n, timeout)
	}
	return nil
}
