package consume

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"
)

// ErrNotReplicated is wrapped when the replicas did not acknowledge the
// entries a worker read within ReplicaTimeout: the entries stay pending
// on the consumer and are read again.
var ErrNotReplicated = errors.New("async: the entries read are not yet on enough Redis replicas; left pending")

// syncTTL is the lifetime of the key written before WAIT (seconds; the
// key only needs to be written). The gate writes the same key.
const syncTTL = 3600

// replicated returns nil once MinReplicas replicas have every entry the
// worker has read so far (at once when MinReplicas is 0), or an error
// wrapping ErrNotReplicated.
//
// Durability replica (docs/partitions.md): a primary cut off from its
// replicas still writes the gate's orders for a while (answered 503),
// and a consumer that reaches it would persist them; the replica promoted
// then never had them, sells the units again, and MySQL refuses the orders
// it accepts: accepted orders dead-lettered. So a consumer persists only
// what the replicas have.
func (w *worker) replicated(ctx context.Context) error {
	n := int64(w.c.cfg.MinReplicas)
	if n <= 0 {
		return nil
	}
	// WAIT counts the writes of its own connection only, and the entries
	// were written by the gate on others: a SET of the voucher's sync key
	// on a dedicated connection moves its offset past everything Redis had
	// executed when the entries were read (Redis replicates in the order it
	// executes). A primary that refuses writes (NOREPLICAS) or is a replica
	// now (READONLY) fails the SET: not replicated either.
	var acked int64
	err := w.c.client.Dedicated(func(dc rueidis.DedicatedClient) error {
		res := dc.DoMulti(ctx,
			dc.B().Set().Key(w.keys.Sync).Value("1").ExSeconds(syncTTL).Build(),
			dc.B().Wait().Numreplicas(n).Timeout(max(w.c.cfg.ReplicaTimeout.Milliseconds(), 1)).Build())
		if err := res[0].Error(); err != nil {
			return err
		}
		var err error
		acked, err = res[1].AsInt64()
		return err
	})
	if err == nil && acked < n {
		err = fmt.Errorf("%d of %d replicas acknowledged within %v", acked, n, w.c.cfg.ReplicaTimeout)
	}
	if err != nil {
		w.c.unreplicated.Add(1)
		return fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	return nil
}
