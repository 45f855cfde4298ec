package async

import (
	"context"
	"fmt"

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
