package returns

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/internal/replica"
)

// restockReplicated runs the returns of one voucher (one shard: durability
// replica does not take sharded vouchers) and a WAIT on one connection, so
// the WAIT covers them (replica.Wait), and fails unless MinReplicas
// replicas have them: then the return stays pending and the sweep runs it
// again.
func (r *Restocker) restockReplicated(ctx context.Context, vk layout.VoucherKeys, execs []rueidis.LuaExec) error {
	cmds := make([]rueidis.Completed, 0, len(execs))
	for _, e := range execs {
		// EVAL, not EVALSHA: returns are few, and a dedicated connection
		// has no NOSCRIPT fallback of its own.
		cmds = append(cmds, r.client.B().Eval().Script(returnLua).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build())
	}
	wait := replica.Wait{Key: vk.Sync, Replicas: r.cfg.MinReplicas, Timeout: r.cfg.ReplicaTimeout}
	res, err := wait.Do(ctx, r.client, cmds...)
	for _, x := range res {
		if err := x.Error(); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("returns of %s: %w", vk.Body, err)
	}
	return nil
}
