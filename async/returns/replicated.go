package returns

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// restockReplicated runs the returns of one voucher (one shard: durability
// replica does not take sharded vouchers) and a WAIT on one connection, so
// the WAIT covers them, and fails unless MinReplicas replicas have them:
// then the return stays pending and the sweep runs it again.
func (r *Restocker) restockReplicated(ctx context.Context, vk layout.VoucherKeys, execs []rueidis.LuaExec) error {
	return r.client.Dedicated(func(dc rueidis.DedicatedClient) error {
		for _, e := range execs {
			// EVAL, not EVALSHA: returns are few, and a dedicated
			// connection has no NOSCRIPT fallback of its own.
			cmd := dc.B().Eval().Script(returnLua).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
			if err := dc.Do(ctx, cmd).Error(); err != nil {
				return err
			}
		}
		cmd := dc.B().Wait().Numreplicas(int64(r.cfg.MinReplicas)).Timeout(r.cfg.ReplicaTimeout.Milliseconds()).Build()
		n, err := dc.Do(ctx, cmd).AsInt64()
		if err != nil {
			return err
		}
		if n < int64(r.cfg.MinReplicas) {
			return fmt.Errorf("returns of %s: %d of %d replicas confirmed within %s", vk.Body, n, r.cfg.MinReplicas, r.cfg.ReplicaTimeout)
		}
		return nil
	})
}
