package reconcile

import (
	"context"
	"fmt"
	"strconv"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// redisSide is what Redis holds for a voucher.
type redisSide struct {
	buyers   map[int64]buyer // user → the buyer's record
	inFlight map[int64]bool  // orders not acknowledged
	dead     []deadLetter
}

// buyer is a buyer's record: the units its live orders hold and the
// latest of them, in Redis, or as MySQL's live orders would make it.
type buyer struct{ units, latest int64 }

// deadLetter is an entry of a dead-letter stream.
type deadLetter struct {
	order, user int64
	units       int64 // 1 in entries without a quantity
	kind        layout.DeadKind
	reason      string
}

// stockShort reports whether the order was dead-lettered because MySQL had
// no stock left for it. Only the kind tells: entries without one (before
// issue 12) are not read, see "Drain before you upgrade" in
// docs/operations.md.
func (dl deadLetter) stockShort() bool {
	return dl.kind == layout.DeadStockShort
}

// readShardsRedis reads what Redis holds of a voucher for reconciliation:
// its shards' keys (one set for a voucher with one shard), their summed
// figures and, when loaded, each shard's buyers, unacknowledged orders and
// dead letters. With fix it first completes the moves the shards' journals
// hold (movers that died between two shards), reported in Report.Moved.
func (r *Reconciler) readShardsRedis(ctx context.Context, id int64, rep *Report, fix bool) ([]layout.VoucherKeys, []redisSide, error) {
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
func (r *Reconciler) readShardsOf(ctx context.Context, v *flashsale.Voucher, rep *Report, fix bool) ([]layout.VoucherKeys, []redisSide, error) {
	id := v.ID
	shards := r.keys.Shards(id, v.ShardCount())
	if fix && len(shards) > 1 {
		st, err := layout.ReadShards(ctx, r.client, shards)
		if err != nil {
			return nil, nil, err
		}
		for k, sh := range st {
			n, err := layout.CompleteMoves(ctx, r.client, r.keys, shards[k], sh.Moves)
			if err != nil {
				return nil, nil, err
			}
			rep.Moved += n
		}
	}
	snap, err := layout.ReadSnapshot(ctx, r.client, r.keys, id, len(shards), layout.CountHeld) // it reads every buyer anyway
	if err != nil || !snap.Loaded {
		return shards, nil, err
	}
	rep.Loaded, rep.Stock, rep.InitialStock, rep.Held = true, snap.Stock, snap.InitialStock, snap.Held
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

// readRedis reads a voucher's buyers, then its unacknowledged orders, then
// its dead letters: an order is acknowledged only after it is persisted or
// dead-lettered, so one that leaves the stream meanwhile is found later.
func (r *Reconciler) readRedis(ctx context.Context, vk layout.VoucherKeys) (redisSide, error) {
	rs := redisSide{buyers: map[int64]buyer{}, inFlight: map[int64]bool{}}
	var cursor uint64
	for {
		e, err := r.client.Do(ctx, r.client.B().Hscan().Key(vk.Buyers).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return rs, err
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			user, err1 := strconv.ParseInt(e.Elements[i], 10, 64)
			units, latest := layout.ParseBuyer(e.Elements[i+1])
			order, err2 := strconv.ParseInt(latest, 10, 64)
			if err1 != nil || err2 != nil {
				return rs, fmt.Errorf("malformed buyer %q → %q", e.Elements[i], e.Elements[i+1])
			}
			rs.buyers[user] = buyer{units, order}
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	unacked, err := layout.Unacked(ctx, r.client, vk, r.group)
	if err != nil {
		return rs, err
	}
	for id := range unacked {
		rs.inFlight[id] = true
	}
	start := "-"
	for {
		page, err := r.client.Do(ctx, r.client.B().Xrange().Key(vk.Dead).Start(start).End("+").Count(1000).Build()).AsXRange()
		if err != nil {
			return rs, err
		}
		for _, e := range page {
			order, _ := strconv.ParseInt(e.FieldValues[layout.FieldOrder], 10, 64)
			user, _ := strconv.ParseInt(e.FieldValues[layout.FieldUser], 10, 64)
			units, err := strconv.ParseInt(e.FieldValues[layout.FieldQuantity], 10, 64)
			if err != nil {
				units = 1
			}
			rs.dead = append(rs.dead, deadLetter{order: order, user: user, units: units,
				kind: layout.DeadKind(e.FieldValues[layout.FieldKind]), reason: e.FieldValues[layout.FieldReason]})
		}
		if len(page) < 1000 {
			return rs, nil
		}
		start = "(" + page[len(page)-1].ID
	}
}
