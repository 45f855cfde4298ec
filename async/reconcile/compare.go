package reconcile

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// compareShards compares each shard with MySQL's orders of the buyers
// whose home it is, and repairs with fix (see Reconciler.compare).
func (r *Reconciler) compareShards(ctx context.Context, shards []layout.VoucherKeys, sides []redisSide, rep *Report, orders []flashsale.Order, fix bool) error {
	mysql := make([]map[int64]buyer, len(shards)) // per shard: user → record
	for k := range mysql {
		mysql[k] = map[int64]buyer{}
	}
	for _, o := range orders {
		m := mysql[layout.HomeShard(o.UserID, len(shards))]
		b := m[o.UserID]
		m[o.UserID] = buyer{b.units + int64(o.Units()), max(b.latest, o.ID)}
	}
	for k, vk := range shards {
		if err := r.compare(ctx, vk, rep, sides[k], mysql[k], fix); err != nil {
			return fmt.Errorf("shard %s: %w", vk.Body, err)
		}
		if err := r.checkRegistered(ctx, vk, rep, len(sides[k].inFlight), fix); err != nil {
			return fmt.Errorf("shard %s: %w", vk.Body, err)
		}
	}
	return nil
}

// compare reports the differences between the buyers and the orders, and
// repairs them with fix: first every buyer Redis holds, then the dead
// letters, then MySQL's orders whose user Redis does not know, then the
// backlog's count.
func (r *Reconciler) compare(ctx context.Context, vk layout.VoucherKeys, rep *Report, rs redisSide, mysql map[int64]buyer, fix bool) error {
	if err := r.compareBuyers(ctx, vk, rep, rs, mysql, fix); err != nil {
		return err
	}
	if err := r.compareDeadLetters(ctx, vk, rep, rs, mysql, fix); err != nil {
		return err
	}
	if err := r.findUnknownOrders(ctx, vk, rep, rs, mysql); err != nil {
		return err
	}
	return r.recountBacklog(ctx, vk, rep, fix)
}

// compareBuyers checks each buyer's record against MySQL's live orders:
// the same, another (repointed with fix), its latest order in flight,
// dead-lettered (left to compareDeadLetters), or lost (re-queued with fix).
func (r *Reconciler) compareBuyers(ctx context.Context, vk layout.VoucherKeys, rep *Report, rs redisSide, mysql map[int64]buyer, fix bool) error {
	dead := map[int64]bool{}
	for _, d := range rs.dead {
		dead[d.order] = true
	}
	for user, b := range rs.buyers {
		order := b.latest
		stored, ok := mysql[user]
		switch {
		case ok && stored == b:
		case rs.inFlight[order]:
			rep.InFlight++
		case ok:
			d := rep.add(Diff{Kind: DiffOrderMismatch, UserID: user, OrderID: order,
				Detail: fmt.Sprintf("Redis records %d units, latest order %d; MySQL's live orders hold %d, latest order %d", b.units, order, stored.units, stored.latest)})
			if fix {
				n, err := repointScript.Exec(ctx, r.client, []string{vk.Buyers}, []string{itoa(user),
					layout.BuyerValue(b.units, itoa(order)), layout.BuyerValue(stored.units, itoa(stored.latest))}).AsInt64()
				if err != nil {
					return err
				}
				d.Fixed = n == 1
			}
		case dead[order]:
			// Reported by compareDeadLetters.
		default:
			if err := r.compareClosed(ctx, vk, rep, user, b, fix); err != nil {
				return err
			}
		}
	}
	return nil
}

// compareDeadLetters reports each dead-lettered order whose buyer still
// holds its unit, and with fix gives the unit back, unless MySQL had no
// stock for the order.
func (r *Reconciler) compareDeadLetters(ctx context.Context, vk layout.VoucherKeys, rep *Report, rs redisSide, mysql map[int64]buyer, fix bool) error {
	seen := map[int64]bool{}
	for _, dl := range rs.dead {
		if seen[dl.order] || dl.order == 0 || dl.user == 0 {
			continue // a copy, or a malformed entry with nothing to give back
		}
		seen[dl.order] = true
		if _, ok := mysql[dl.user]; ok || rs.buyers[dl.user].latest != dl.order || rs.inFlight[dl.order] {
			continue // persisted after all, given back already, or queued again
		}
		d := rep.add(Diff{Kind: DiffDeadLetter, UserID: dl.user, OrderID: dl.order,
			Detail: "dead-lettered (" + dl.reason + "); the buyer still holds a unit"})
		if dl.stockShort() {
			// MySQL had no unit for it: Redis sold one too many, and giving
			// it back would sell it again to someone MySQL cannot serve.
			d.Detail += "; not given back: MySQL had no stock for it"
			continue
		}
		if fix {
			n, err := restoreScript.Exec(ctx, r.client, []string{vk.Meta, vk.Buyers}, []string{itoa(dl.user), itoa(dl.order), itoa(dl.units)}).AsInt64()
			if err != nil {
				return err
			}
			d.Fixed = n == 1
			if n == -1 {
				d.Detail += "; not given back: the stock is full"
			}
		}
	}
	return nil
}

// findUnknownOrders reports MySQL's orders whose user is no buyer in Redis.
func (r *Reconciler) findUnknownOrders(ctx context.Context, vk layout.VoucherKeys, rep *Report, rs redisSide, mysql map[int64]buyer) error {
	for user, stored := range mysql {
		order := stored.latest
		if _, ok := rs.buyers[user]; ok {
			continue
		}
		// The buyer may have been accepted after the buyers were read.
		err := r.client.Do(ctx, r.client.B().Hget().Key(vk.Buyers).Field(itoa(user)).Build()).Error()
		if err == nil {
			continue
		}
		if !rueidis.IsRedisNil(err) {
			return err
		}
		rep.add(Diff{Kind: DiffUnknownOrder, UserID: user, OrderID: order, Detail: "in MySQL; the user is no buyer in Redis"})
	}
	return nil
}

// checkRegistered reports a voucher with waiting orders that is not in the
// registry, and registers it with fix. The orders are counted again after
// the registry is read: a worker retires a voucher only once nothing
// waits, so orders still there then are ones nobody will read.
func (r *Reconciler) checkRegistered(ctx context.Context, vk layout.VoucherKeys, rep *Report, waiting int, fix bool) error {
	if waiting == 0 {
		return nil
	}
	id := vk.Body // the voucher's id, or its shard's tag
	ok, err := r.client.Do(ctx, r.client.B().Sismember().Key(r.keys.Registry()).Member(id).Build()).AsBool()
	if err != nil || ok {
		return err
	}
	unacked, entries, _, err := layout.StreamBacklog(ctx, r.client, vk, r.group)
	if err != nil || entries == 0 {
		return err
	}
	d := rep.add(Diff{Kind: DiffUnregistered, Detail: fmt.Sprintf("%d orders wait in the stream; the voucher is not in the registry, so no consumer reads them", unacked)})
	if fix {
		if err := r.client.Do(ctx, r.client.B().Sadd().Key(r.keys.Registry()).Member(id).Build()).Error(); err != nil {
			return err
		}
		d.Fixed = true
	}
	return nil
}

// lostOrder reports a buyer's latest order as lost, and with fix appends
// it to the stream again.
func (r *Reconciler) lostOrder(ctx context.Context, vk layout.VoucherKeys, rep *Report, user int64, b buyer, fix bool) error {
	d := rep.add(Diff{Kind: DiffLostOrder, UserID: user, OrderID: b.latest,
		Detail: "accepted by Redis; not in MySQL, the stream or the dead letters"})
	if !fix {
		return nil
	}
	fixed, err := r.requeue(ctx, vk, user, b.latest, b.units)
	d.Fixed = fixed
	return err
}

// requeue appends an accepted order to the voucher's stream again, then
// registers the voucher: in that order, because a consumer removes a
// voucher from the registry only once nothing waits, and checks again
// after.
func (r *Reconciler) requeue(ctx context.Context, vk layout.VoucherKeys, user, order, units int64) (bool, error) {
	n, err := requeueScript.Exec(ctx, r.client, []string{vk.Buyers, vk.Orders, vk.Meta}, []string{itoa(user), itoa(order), itoa(units)}).AsInt64()
	if err != nil || n == 0 {
		return false, err
	}
	err = r.client.Do(ctx, r.client.B().Sadd().Key(r.keys.Registry()).Member(vk.Body).Build()).Error()
	return err == nil, err
}
