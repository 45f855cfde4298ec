package consume

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale/async/internal/replica"
)

// ErrNotReplicated is wrapped when the replicas did not acknowledge the
// entries a worker read within ReplicaTimeout: the entries stay pending
// on the consumer and are read again.
var ErrNotReplicated = errors.New("async: the entries read are not yet on enough Redis replicas; left pending")

// replicated returns nil once MinReplicas replicas have every entry the
// worker has read so far (at once when MinReplicas is 0), or an error
// wrapping ErrNotReplicated.
//
// Durability replica (docs/partitions.md): a primary cut off from its
// replicas still writes the gate's orders for a while (answered 503),
// and a consumer that reaches it would persist them; the replica promoted
// then never had them, sells the units again, and MySQL refuses the orders
// it accepts: accepted orders dead-lettered. So a consumer persists only
// what the replicas have. The entries were written by the gate on other
// connections: the SET of the voucher's sync key before the WAIT covers
// them (replica.Wait).
func (w *worker) replicated(ctx context.Context) error {
	n := w.c.cfg.MinReplicas
	if n <= 0 {
		return nil
	}
	wait := replica.Wait{Key: w.keys.Sync, Replicas: n, Timeout: w.c.cfg.ReplicaTimeout}
	if _, err := wait.Do(ctx, w.c.client); err != nil {
		w.c.unreplicated.Add(1)
		return fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	return nil
}
