package reconcile

import (
	"context"
	"slices"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// Retire deletes the Redis keys of a voucher whose sale is over and
// drained, if nothing about it is open: no difference, no dead letter.
// settled is false when the voucher must be looked at again later (see
// DESIGN.md, "Retiring a finished sale"); true when it is retired, not
// loaded, or not done after all (its consumer schedules it again).
func (r *Reconciler) Retire(ctx context.Context, id int64) (settled bool, err error) {
	log := r.log.With("voucher", id)
	rep, err := r.Check(ctx, id)
	if err != nil {
		return false, err
	}
	// The backlog's count goes with the keys: it keeps nothing open.
	open := slices.DeleteFunc(rep.Diffs, func(d Diff) bool { return d.Kind == DiffBacklogCount })
	if len(open) > 0 {
		log.Warn("async: keeping a finished sale's Redis keys: reconcile reports differences", "differences", len(open))
		return false, nil
	}
	res, vk, err := r.retireShards(ctx, id)
	if err != nil {
		return false, err
	}
	switch res {
	case 1:
		log.Info("async: finished sale retired: its Redis keys are deleted, MySQL answers for it")
	case 2:
		log.Warn("async: keeping a finished sale's Redis keys for its dead letters; delete its dead-letter stream once they are dealt with",
			"key", vk.Dead)
		return false, nil
	}
	return true, nil
}

// retireShards runs retire.lua on each shard of a voucher (its one set of
// keys when it has one shard) and returns the first answer other than 1
// (deleted) or 3 (not loaded), with its shard, or 1. Once every shard is
// gone, their journals, applied sets and shard count go too.
func (r *Reconciler) retireShards(ctx context.Context, id int64) (int64, layout.VoucherKeys, error) {
	n, err := layout.ShardCount(ctx, r.client, r.keys, id)
	if err != nil {
		return 0, layout.VoucherKeys{}, err
	}
	shards := r.keys.Shards(id, n)
	out := int64(3)
	for _, vk := range shards {
		res, err := retireScript.Exec(ctx, r.client, []string{vk.Meta, vk.Buyers, vk.Orders, vk.Dead, vk.Failed, vk.Tries, vk.Returned, vk.Keyed},
			[]string{r.group}).AsInt64()
		if err != nil || (res != 1 && res != 3) {
			return res, vk, err
		}
		out = min(out, res)
	}
	if n > 1 {
		for _, vk := range shards {
			if err := r.client.Do(ctx, r.client.B().Del().Key(vk.Moves, vk.Applied).Build()).Error(); err != nil {
				return 0, vk, err
			}
		}
		if err := r.client.Do(ctx, r.client.B().Del().Key(r.keys.ShardCountKey(id)).Build()).Error(); err != nil {
			return 0, shards[0], err
		}
	}
	return out, shards[0], nil
}
