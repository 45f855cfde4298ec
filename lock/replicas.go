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

// WithReplicas makes Lock and TryLock return only once n replicas have
// acknowledged the acquisition (Redis WAIT, at most timeout), or else
// release it and return ErrNotReplicated; watchdog renewals and Extend
// count only once acknowledged, so a lock whose renewals stay
// unacknowledged is lost when the acknowledged lease ends. Each
// acquisition costs a round trip and WAIT's time. WAIT does not make
// replication synchronous: count in n every replica a failover may promote.
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
// every write Redis executed before it was called (see DESIGN.md,
// "Confirming on replicas").
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
