package consume

import (
	"context"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/async/reconcile"
)

// Retiring finished sales. The consumer owns the timing: a worker sees a
// sale over and drained and schedules it, and the sweep of the retiring
// set runs in the consumer's loop. Whether its keys may go is
// reconciliation's judgement (nothing open, no dead letter), so the
// sweep hands each due voucher to reconcile.Reconciler.Retire.

// retireBatch is how many vouchers one sweep retires at most.
const retireBatch = 10

// scheduleRetire records that the voucher's sale is over and drained, so
// its keys are deleted RetireAfter from now, unless scheduled already.
func (c *Consumer) scheduleRetire(ctx context.Context, voucher int64) error {
	if c.cfg.RetireAfter < 0 || c.cfg.Audit == nil {
		return nil
	}
	at := time.Now().Add(c.cfg.RetireAfter).UnixMilli()
	cmd := c.client.B().Zadd().Key(c.keys.Retiring()).Nx().ScoreMember().
		ScoreMember(float64(at), strconv.FormatInt(voucher, 10)).Build()
	return c.client.Do(ctx, cmd).Error()
}

// sweepRetiring retires the vouchers whose grace period is over
// (reconcile.Reconciler.Retire deletes their keys when nothing about them
// is open). A voucher with something open is looked at again RetireAfter
// later; one ordered again (reconciliation re-queued an order) is
// scheduled again when its worker finds it done.
func (c *Consumer) sweepRetiring(ctx context.Context) error {
	if c.cfg.RetireAfter < 0 || c.cfg.Audit == nil {
		return nil
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	due, err := c.client.Do(ctx, c.client.B().Zrangebyscore().Key(c.keys.Retiring()).Min("-inf").Max(now).
		Limit(0, retireBatch).Build()).AsStrSlice()
	if err != nil {
		return err
	}
	r := reconcile.New(c.client, c.cfg.Audit, reconcile.Config{Prefix: c.cfg.Prefix, Group: c.cfg.Group, Logger: c.log})
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

// retire has the reconciler retire one voucher, and looks at it again
// RetireAfter later if it is not settled.
func (c *Consumer) retire(ctx context.Context, r *reconcile.Reconciler, id int64) error {
	settled, err := r.Retire(ctx, id)
	if err != nil {
		return err
	}
	if !settled {
		return c.postpone(ctx, id)
	}
	c.forgetRetiring(ctx, strconv.FormatInt(id, 10))
	return nil
}

// postpone looks at a voucher again RetireAfter from now.
func (c *Consumer) postpone(ctx context.Context, id int64) error {
	at := time.Now().Add(c.cfg.RetireAfter).UnixMilli()
	cmd := c.client.B().Zadd().Key(c.keys.Retiring()).Xx().ScoreMember().ScoreMember(float64(at), strconv.FormatInt(id, 10)).Build()
	return c.client.Do(ctx, cmd).Error()
}

// forgetRetiring removes a member from the retiring set.
func (c *Consumer) forgetRetiring(ctx context.Context, member string) {
	if err := c.client.Do(ctx, c.client.B().Zrem().Key(c.keys.Retiring()).Member(member).Build()).Error(); err != nil {
		c.log.Warn("async: removing a voucher from the retiring set", "voucher", member, "err", err)
	}
}
