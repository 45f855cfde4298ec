package async

import (
	"context"
	"strconv"
	"time"
)

// retireBatch is how many vouchers one sweep retires at most.
const retireBatch = 10

// scheduleRetire records that the voucher's sale is over and drained, so
// its keys are deleted RetireAfter from now, unless scheduled already.
func (c *Consumer) scheduleRetire(ctx context.Context, voucher int64) error {
	if c.cfg.RetireAfter < 0 || c.cfg.Audit == nil {
		return nil
	}
	at := time.Now().Add(c.cfg.RetireAfter).UnixMilli()
	cmd := c.client.B().Zadd().Key(c.keys.retiring()).Nx().ScoreMember().
		ScoreMember(float64(at), strconv.FormatInt(voucher, 10)).Build()
	return c.client.Do(ctx, cmd).Error()
}

// sweepRetiring deletes the keys of the vouchers whose grace period is
// over, when nothing about them is open: reconciliation finds no
// difference, and retire.lua finds, in one step, the sale over, every
// order acknowledged and no dead letter. A voucher with something open is
// looked at again RetireAfter later; one ordered again (reconciliation
// re-queued an order) is scheduled again when its worker finds it done.
// Dead letters keep a voucher's keys until a person has dealt with them and
// deleted its dead-letter stream.
func (c *Consumer) sweepRetiring(ctx context.Context) error {
	if c.cfg.RetireAfter < 0 || c.cfg.Audit == nil {
		return nil
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	due, err := c.client.Do(ctx, c.client.B().Zrangebyscore().Key(c.keys.retiring()).Min("-inf").Max(now).
		Limit(0, retireBatch).Build()).AsStrSlice()
	if err != nil {
		return err
	}
	r := NewReconciler(c.client, c.cfg.Audit, ReconcilerConfig{Prefix: c.cfg.Prefix, Group: c.cfg.Group, Logger: c.log})
	for _, m := range due {
		id, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			c.log.Error("async: dropping a malformed voucher id from the retiring set", "member", m)
			c.forgetRetiring(ctx, m)
			continue
		}
		if err := c.retire(ctx, r, id); err != nil {
			return err
		}
	}
	return nil
}

// retire deletes one voucher's keys if nothing about it is open, or
// schedules it again.
func (c *Consumer) retire(ctx context.Context, r *Reconciler, id int64) error {
	log := c.log.With("voucher", id)
	rep, err := r.Check(ctx, id)
	if err != nil {
		return err
	}
	if len(rep.Diffs) > 0 {
		log.Warn("async: keeping a finished sale's Redis keys: reconcile reports differences", "differences", len(rep.Diffs))
		return c.postpone(ctx, id)
	}
	res, vk, err := c.retireShards(ctx, id)
	if err != nil {
		return err
	}
	switch res {
	case 1:
		log.Info("async: finished sale retired: its Redis keys are deleted, MySQL answers for it")
	case 2:
		log.Warn("async: keeping a finished sale's Redis keys for its dead letters; delete its dead-letter stream once they are dealt with",
			"key", vk.dead)
		return c.postpone(ctx, id)
	}
	// Retired, not loaded, or not done after all (its worker schedules it
	// again once it is).
	c.forgetRetiring(ctx, strconv.FormatInt(id, 10))
	return nil
}

// postpone looks at a voucher again RetireAfter from now.
func (c *Consumer) postpone(ctx context.Context, id int64) error {
	at := time.Now().Add(c.cfg.RetireAfter).UnixMilli()
	cmd := c.client.B().Zadd().Key(c.keys.retiring()).Xx().ScoreMember().ScoreMember(float64(at), strconv.FormatInt(id, 10)).Build()
	return c.client.Do(ctx, cmd).Error()
}

// forgetRetiring removes a member from the retiring set.
func (c *Consumer) forgetRetiring(ctx context.Context, member string) {
	if err := c.client.Do(ctx, c.client.B().Zrem().Key(c.keys.retiring()).Member(member).Build()).Error(); err != nil {
		c.log.Warn("async: removing a voucher from the retiring set", "voucher", member, "err", err)
	}
}

// retireShards runs retire.lua on each shard of a voucher (its one set of
// keys when it has one shard) and returns the first answer other than 1
// (deleted) or 3 (not loaded), with its shard, or 1. Once every shard is
// gone, their journals, applied sets and shard count go too.
func (c *Consumer) retireShards(ctx context.Context, id int64) (int64, voucherKeys, error) {
	n, err := shardCount(ctx, c.client, c.keys, id)
	if err != nil {
		return 0, voucherKeys{}, err
	}
	shards := c.keys.shards(id, n)
	out := int64(3)
	for _, vk := range shards {
		res, err := retireScript.Exec(ctx, c.client, []string{vk.meta, vk.buyers, vk.orders, vk.dead, vk.failed, vk.tries},
			[]string{c.cfg.Group}).AsInt64()
		if err != nil || (res != 1 && res != 3) {
			return res, vk, err
		}
		out = min(out, res)
	}
	if n > 1 {
		for _, vk := range shards {
			if err := c.client.Do(ctx, c.client.B().Del().Key(vk.moves, vk.applied).Build()).Error(); err != nil {
				return 0, vk, err
			}
		}
		if err := c.client.Do(ctx, c.client.B().Del().Key(c.keys.shardsKey(id)).Build()).Error(); err != nil {
			return 0, shards[0], err
		}
	}
	return out, shards[0], nil
}
