package async

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// State is what Redis holds for one voucher of the pipeline, read in one
// consistent step (summed over its shards when it has several, each read
// in one step, and the units moving between them counted in Stock): with nothing sold twice and no buyer lost, Stock +
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
	keys := keyspace{orDefault(prefix, DefaultPrefix)}
	shards, err := shardCount(ctx, client, keys, voucherID)
	if err != nil {
		return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
	}
	snap, err := voucherSnapshot(ctx, client, keys, voucherID, shards)
	if err != nil {
		return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
	}
	if !snap.loaded {
		return State{}, nil
	}
	var dead int64
	for _, vk := range keys.shards(voucherID, shards) {
		n, err := client.Do(ctx, client.B().Xlen().Key(vk.dead).Build()).AsInt64()
		if err != nil {
			return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
		}
		dead += n
	}
	return State{Loaded: true, Stock: snap.stock, InitialStock: snap.initialStock, Buyers: snap.buyers, DeadLetters: int(dead)}, nil
}

// snapshot is a voucher's live figures in Redis, read in one step by
// snapshot.lua.
type snapshot struct {
	loaded                      bool // false: not in Redis, the rest is zero
	stock, initialStock, buyers int
}

// readSnapshot runs snapshot.lua for a voucher and decodes its reply.
func readSnapshot(ctx context.Context, client rueidis.Client, vk voucherKeys) (snapshot, error) {
	snap, err := snapshotScript.Exec(ctx, client, []string{vk.meta, vk.buyers}, nil).AsIntSlice()
	switch {
	case err != nil:
		return snapshot{}, err
	case len(snap) == 0:
		return snapshot{}, nil
	case len(snap) != 3:
		return snapshot{}, fmt.Errorf("snapshot.lua answered %v", snap)
	}
	return snapshot{loaded: true, stock: int(snap[0]), initialStock: int(snap[1]), buyers: int(snap[2])}, nil
}
