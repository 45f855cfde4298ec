package async

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// State is what Redis holds for one voucher of the pipeline, read in one
// consistent step: with nothing sold twice and no buyer lost, Stock +
// Buyers = InitialStock at every instant.
type State struct {
	// Loaded is false when the voucher is not in Redis; the rest is zero.
	Loaded              bool
	Stock, InitialStock int
	// Buyers counts the orders the gate accepted (one per buyer);
	// DeadLetters those that can never be persisted.
	Buyers, DeadLetters int
}

// ReadState reads a voucher's State from Redis, under prefix
// (DefaultPrefix when empty). It is for tools that audit the pipeline from
// outside, such as the load lab.
func ReadState(ctx context.Context, client rueidis.Client, prefix string, voucherID int64) (State, error) {
	vk := keyspace{orDefault(prefix, DefaultPrefix)}.voucher(voucherID)
	snap, err := snapshotScript.Exec(ctx, client, []string{vk.meta, vk.buyers}, nil).AsIntSlice()
	if err != nil {
		return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
	}
	if len(snap) == 0 {
		return State{}, nil
	}
	dead, err := client.Do(ctx, client.B().Xlen().Key(vk.dead).Build()).AsInt64()
	if err != nil {
		return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
	}
	return State{Loaded: true, Stock: int(snap[0]), InitialStock: int(snap[1]), Buyers: int(snap[2]), DeadLetters: int(dead)}, nil
}

// Purge deletes a voucher's keys from Redis: its stock, buyers, streams,
// the pointers of the given orders and its place in the consumers'
// registry. Only for a voucher whose sale is over and whose orders are all
// persisted (State.Buyers orders in MySQL): whatever still waits in its
// stream is lost. The service reloads the voucher from MySQL if it is
// ordered again.
func Purge(ctx context.Context, client rueidis.Client, prefix string, voucherID int64, orderIDs []int64) error {
	keys := keyspace{orDefault(prefix, DefaultPrefix)}
	vk := keys.voucher(voucherID)
	cmds := rueidis.Commands{
		client.B().Srem().Key(keys.registry()).Member(strconv.FormatInt(voucherID, 10)).Build(),
		client.B().Del().Key(vk.meta, vk.buyers, vk.orders, vk.dead, vk.failed, vk.tries).Build(),
	}
	// Pointers live in slots of their own: one DEL each.
	for _, id := range orderIDs {
		cmds = append(cmds, client.B().Del().Key(keys.order(id)).Build())
	}
	for _, res := range client.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("async: purging voucher %d: %w", voucherID, err)
		}
	}
	return nil
}
