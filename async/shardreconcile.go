package async

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale"
)

// readShardsRedis reads what Redis holds of a voucher for reconciliation:
// its shards' keys (one set for a voucher with one shard), their summed
// figures and, when loaded, each shard's buyers, unacknowledged orders and
// dead letters. With fix it first completes the moves the shards' journals
// hold (movers that died between two shards), reported in Report.Moved.
func (r *Reconciler) readShardsRedis(ctx context.Context, id int64, rep *Report, fix bool) ([]voucherKeys, []redisSide, error) {
	v, err := r.db.Voucher(ctx, id) // ENotFound as it is
	if err != nil {
		return nil, nil, err
	}
	shards, sides, err := r.readShardsOf(ctx, v, rep, fix)
	if err != nil {
		return nil, nil, fmt.Errorf("async: reconcile voucher %d: %w", id, err)
	}
	return shards, sides, nil
}

// readShardsOf is readShardsRedis once the voucher's row is read.
func (r *Reconciler) readShardsOf(ctx context.Context, v *flashsale.Voucher, rep *Report, fix bool) ([]voucherKeys, []redisSide, error) {
	id := v.ID
	shards := r.keys.shards(id, v.ShardCount())
	if fix && len(shards) > 1 {
		st, err := readShards(ctx, r.client, shards)
		if err != nil {
			return nil, nil, err
		}
		for k, sh := range st {
			n, err := completeMoves(ctx, r.client, r.keys, shards[k], sh.moves)
			if err != nil {
				return nil, nil, err
			}
			rep.Moved += n
		}
	}
	snap, err := voucherSnapshot(ctx, r.client, r.keys, id, len(shards))
	if err != nil || !snap.loaded {
		return shards, nil, err
	}
	rep.Loaded, rep.Stock, rep.InitialStock = true, snap.stock, snap.initialStock
	sides := make([]redisSide, len(shards))
	for k, vk := range shards {
		if sides[k], err = r.readRedis(ctx, vk); err != nil {
			return nil, nil, err
		}
		rep.Buyers += len(sides[k].buyers)
		rep.DeadLetters += len(sides[k].dead)
	}
	return shards, sides, nil
}

// compareShards compares each shard with MySQL's orders of the buyers
// whose home it is, and repairs with fix (see Reconciler.compare).
func (r *Reconciler) compareShards(ctx context.Context, shards []voucherKeys, sides []redisSide, rep *Report, orders []flashsale.Order, fix bool) error {
	mysql := make([]map[int64]int64, len(shards)) // per shard: user → order
	for k := range mysql {
		mysql[k] = map[int64]int64{}
	}
	for _, o := range orders {
		mysql[homeShard(o.UserID, len(shards))][o.UserID] = o.ID
	}
	for k, vk := range shards {
		if err := r.compare(ctx, vk, rep, sides[k], mysql[k], fix); err != nil {
			return fmt.Errorf("shard %s: %w", vk.body, err)
		}
		if err := r.checkRegistered(ctx, vk, rep, len(sides[k].inFlight), fix); err != nil {
			return fmt.Errorf("shard %s: %w", vk.body, err)
		}
	}
	return nil
}
